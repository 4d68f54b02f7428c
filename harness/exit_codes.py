"""The exit codes of `harness`, as numbers: their one home, which
`harness.cli.exits` (and the exit-code page), the commands that judge
(`of_verdict`) and the metric writer's process
(`harness.record.metric_writer`) read. What each means is
`harness.cli.exits`'s to say."""

from harness.stats.verdict import FAIL, INCONCLUSIVE, NOT_JUDGED, PASS

EXIT_PASS = 0
EXIT_FAILED = 1
EXIT_USER_ERROR = 2
# Trained to the end; the MLflow record waits for `harness sync` (also the
# metric writer's exit when the store went away).
EXIT_INCOMPLETE = 3
# Undecided: a test INCONCLUSIVE at its seed cap, an untested claim, or too
# few seeds for a statistical verdict. Never a failure: more seeds would decide.
EXIT_NOT_JUDGED = 4
EXIT_INTERRUPTED = 130  # SIGINT; SIGTERM exits 143 (harness.run.interrupts)

# A verdict's exit code (harness.stats.verdict's words).
OF_VERDICT = {PASS: EXIT_PASS, FAIL: EXIT_FAILED, INCONCLUSIVE: EXIT_NOT_JUDGED, NOT_JUDGED: EXIT_NOT_JUDGED}


def of_verdict(verdict: str | None) -> int:
    """The exit code of a verdict (None, nothing to judge: 0)."""
    return EXIT_PASS if verdict is None else OF_VERDICT[verdict]
