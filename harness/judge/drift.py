"""What moving from one set of package versions to another (a JAX upgrade,
a new lock file) changes in a spec's runs: bits, the statistical verdict,
the spec's claims on the newer side, steady-state speed, compile time and
peak memory (`harness drift`), each of the last three judged by the speed
test (harness.stats.speed) on the rounds' pairs: is the newer side slower
(larger) by x, or not?

The runs are made by `harness.sessions.drift`, each side's in its own
environment, in rounds; this module compares their records: the older
side's first run is the reference, judged as `harness reproduce` judges a
reproduction (harness.judge.reproduce). Round i's older and newer runs
are one pair of the speed test, whose ratio (the median round's, the older's
figure over the newer's for a time: above 1 is better) is shown.
"""

from __future__ import annotations

import statistics
from typing import Any, NamedTuple

from harness.judge import claims, reproduce
from harness.judge.xla_flags import numerics_flags
from harness.record.schema import Results
from harness.stats import speed
from harness.stats import verdict as verdicts


class Side(NamedTuple):
    """One environment's runs of one spec, a record per round."""

    label: str  # e.g. "jax 0.10.2 (Python 3.11.7)"
    records: list[Results]


class Row(NamedTuple):
    spec: str
    iterations: int
    bits: str  # "identical", "differ" or "differ within a side" (a side not repeatable)
    verdict: str  # the newer side's first run judged against the older's: "statistical, PASS", ...
    speed_ratio: float | None  # newer / older, medians of env steps/s over the rounds (None: a run unfinished)
    speed_spread: tuple[float, float] | None  # the lowest and highest round-by-round ratio
    compile_ratio: float | None
    peak_memory_ratio: float | None  # None: a side's records lack the peak
    peak_memory: str | None  # where the peaks were measured ("device" or "host")
    claims: str = "-"  # the spec's claims on the newer side's first run: "2/2 hold", "1/2 hold: x fails", "-"
    # The verdict, typed: its mode ("exact" or "statistical") and outcome (OUTCOMES).
    mode: str | None = None
    outcome: str | None = None
    # The speed test of each figure (FIGURES), as SpeedVerdict.as_dict(); {} for an unfinished run.
    tests: dict[str, dict[str, Any]] = {}


# The figures the speed test judges, each a round's per side: steady-state speed
# (higher is better), compile seconds and peak memory (lower is better).
FIGURES = {"speed": "env steps/s", "compile": "compile seconds", "memory": "peak memory"}


def figure_values(records: list[Results], figure: str) -> list[float | None]:
    """Each round's figure of one side (None where a record lacks it)."""
    speeds = [r.speed for r in records]
    if figure == "speed":
        return [s.sps for s in speeds]
    if figure == "compile":
        return [s.compile_seconds for s in speeds]
    return [s.peak_memory_bytes or None for s in speeds]


def tests(older: list[Results], newer: list[Results], test: speed.SpeedTest) -> dict[str, speed.SpeedVerdict]:
    """The speed test of each figure both sides have in every paired round."""
    out = {}
    for figure in FIGURES:
        pairs = list(zip(figure_values(older, figure), figure_values(newer, figure), strict=False))
        if not pairs or any(a is None or b is None or not a > 0 or not b > 0 for a, b in pairs):
            continue
        baseline, candidate = zip(*pairs, strict=True)
        out[figure] = speed.decide(speed.log_ratios(baseline, candidate, rates=figure == "speed"), test)
    return out


def decided(older: list[Results], newer: list[Results], test: speed.SpeedTest) -> bool:
    """Whether every figure's speed test has decided on these rounds."""
    return all(v.outcome != speed.UNDECIDED for v in tests(older, newer, test).values())


# A verdict's outcomes (harness.stats.verdict); only a pass is agreement. Reports written before
# the outcome was recorded keep their verdict as words ("statistical, PASS").
OUTCOMES = verdicts.OUTCOMES
AGREES = verdicts.PASS


def label(record: Results) -> str:
    """A side as its record names it: its JAX and Python, and the XLA flags
    it ran with where they can change its bits (a side that is the same
    environment with an XLA flag set)."""
    flags = numerics_flags(record.fingerprint.get("xla_flags", ""), record.fingerprint.get("platform", ""))
    return side_name(record.versions.get("jax", "?"), record.versions.get("python", "?"), flags)


def side_name(jax: str, python: str, xla_flags: str) -> str:
    """`jax 0.11.2 (Python 3.12.1)`, with `; XLA_FLAGS=...` where flags are set."""
    return f"jax {jax} (Python {python}" + (f"; XLA_FLAGS={xla_flags}" if xla_flags else "") + ")"


def _same_bits(a: Results, b: Results) -> bool:
    return a.curves == b.curves and a.per_seed_final == b.per_seed_final


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _ratio(new: float, old: float) -> float:
    return new / old if old else float("nan")


def claims_held(older: Results, newer: Results) -> str:
    """The spec's claims judged on the newer side's run: `2/2 hold`, or
    `1/2 hold: name fails` (`, also on the older` where the older side's
    run fails it too); `-` where the run judged none (a cut spec)."""
    judged = newer.claims or {}
    if not judged:
        return "-"
    held = sum(outcome.holds for outcome in judged.values())
    out = f"{held}/{len(judged)} hold"
    broken = [name for name, outcome in judged.items() if claims.broken(outcome)]
    if broken:
        before = older.claims or {}
        also = [name for name in broken if name in before and claims.broken(before[name])]
        out += ": " + ", ".join(broken) + (" fails" if len(broken) == 1 else " fail")
        out += f" (also on the older: {', '.join(also)})" if also else ""
    if undecided := [name for name, outcome in judged.items() if not outcome.holds and not claims.broken(outcome)]:
        out += ("; " if broken else ": ") + ", ".join(undecided) + " undecided"
    return out


def compare(spec: str, older: Side, newer: Side, test: speed.SpeedTest | None = None) -> Row:
    """The row of one spec: the newer side against the older, its figures
    judged by `test` (default: the speed test at its defaults)."""
    old, new = older.records, newer.records
    if not all(_same_bits(old[0], r) for r in old[1:]) or not all(_same_bits(new[0], r) for r in new[1:]):
        bits = "differ within a side"
    else:
        bits = "identical" if _same_bits(old[0], new[0]) else "differ"
    verdict = reproduce.judge(old[0], new[0], older.label)
    ratios = [_ratio(n.speed.sps, o.speed.sps) for o, n in zip(old, new, strict=False)]
    peaks_old = [r.speed.peak_memory_bytes for r in old if r.speed.peak_memory_bytes]
    peaks_new = [r.speed.peak_memory_bytes for r in new if r.speed.peak_memory_bytes]
    return Row(
        spec=spec,
        iterations=new[0].iterations,
        bits=bits,
        verdict=f"{verdict.mode}, {verdict.outcome.upper()}",
        speed_ratio=_ratio(_median([r.speed.sps for r in new]), _median([r.speed.sps for r in old])),
        speed_spread=(min(ratios), max(ratios)),
        compile_ratio=_ratio(
            _median([r.speed.compile_seconds for r in new]), _median([r.speed.compile_seconds for r in old])
        ),
        peak_memory_ratio=_ratio(_median(peaks_new), _median(peaks_old)) if peaks_old and peaks_new else None,
        peak_memory=new[0].speed.peak_memory,
        claims=claims_held(old[0], new[0]),
        mode=verdict.mode,
        outcome=verdict.outcome,
        tests={k: v.as_dict() for k, v in tests(old, new, test or speed.SpeedTest()).items()},
    )


def unfinished(spec: str, side: str, seconds: float | None, records: dict[str, list[Results]]) -> Row:
    """The row of a spec whose run on `side` did not finish in `seconds`
    (what the other side's runs took is in the verdict's words)."""
    other = records["newer" if side == "older" else "older"]
    took = f"; the {'newer' if side == 'older' else 'older'} took {other[0].speed.wall_seconds:.0f} s" if other else ""
    return Row(spec, 0, "-", f"the {side} did not finish in {seconds:.0f} s{took}", None, None, None, None, None)


def _times(value: float | None, spread: tuple[float, float] | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" + (f" ({spread[0]:.2f}-{spread[1]:.2f})" if spread and spread[0] != spread[1] else "")


def _too_short(row: dict[str, Any], settings: dict[str, Any]) -> bool:
    """A run cut to a few iterations (`--iterations`) is too short for its
    returns to be judged: only identical bits (an exact PASS) are a verdict."""
    return bool(settings.get("iterations") and row["iterations"] and row["bits"] != "identical")


def shown_verdict(row: dict[str, Any], settings: dict[str, Any]) -> str:
    """The verdict as the report shows it (`_too_short`: not judged)."""
    if _too_short(row, settings):
        return f"not judged ({settings['iterations']} iterations)"
    return row["verdict"]


def shown_outcome(row: dict[str, Any], settings: dict[str, Any]) -> str:
    """The outcome the report shows (OUTCOMES; `_too_short`: not judged)."""
    if _too_short(row, settings):
        return "not judged"
    if row.get("outcome"):
        return row["outcome"]
    verdict = row["verdict"].rsplit(", ", 1)[-1].lower()  # a report from before outcomes were typed
    return verdict if verdict in OUTCOMES else "not judged"


def failed(document: dict[str, Any]) -> list[str]:
    """The specs whose newer run did not finish, fails a verdict shown, or
    fails one of its claims."""
    return [
        row["spec"]
        for row in document["specs"]
        if row["speed_ratio"] is None
        or shown_outcome(row, document["settings"]) == "fail"
        or " fail" in row.get("claims", "-")
        or slower(row)
    ]


def slower(row: dict[str, Any]) -> list[str]:
    """The figures the speed test found SLOWER (larger) on the newer side."""
    return [figure for figure, test in row.get("tests", {}).items() if test["outcome"] == speed.SLOWER]


def shown_test(row: dict[str, Any], figure: str, ratio_key: str) -> str:
    """A figure's cell: its test's ratio, interval and word, or the ratio
    alone for a report from before the tests."""
    test = row.get("tests", {}).get(figure)
    if test is None:
        return _times(row.get(ratio_key), row.get("speed_spread") if figure == "speed" else None)
    low, high = test["interval"]
    word = {speed.SLOWER: "SLOWER" if figure != "memory" else "LARGER", speed.UNDECIDED: "undecided"}
    return f"{test['ratio']:.2f}x [{low:.2f}-{high:.2f}] {word.get(test['outcome'], 'ok')}"


def undecided(document: dict[str, Any]) -> list[str]:
    """The specs not failed whose verdict is not a PASS (not judged, or a
    claim's test inconclusive): never counted as agreement."""
    failing = set(failed(document))
    return [
        row["spec"]
        for row in document["specs"]
        if row["spec"] not in failing
        and (shown_outcome(row, document["settings"]) != AGREES or "undecided" in row.get("claims", "-"))
    ]


def outcome(document: dict[str, Any]) -> str:
    """The drift's verdict (harness.stats.verdict): fail when a spec fails,
    not judged when one is undecided, else pass."""
    return verdicts.FAIL if failed(document) else verdicts.NOT_JUDGED if undecided(document) else verdicts.PASS


def _rounds(n: int) -> str:
    return "1 round" if n == 1 else f"{n} rounds"


def to_dict(older: str, newer: str, rows: list[Row], settings: dict[str, Any]) -> dict[str, Any]:
    return {
        "older": older,
        "newer": newer,
        "settings": settings,
        "specs": [row._asdict() for row in rows],
    }


def to_markdown(document: dict[str, Any]) -> str:
    """The report as a Markdown table (the MLflow artifact and the docs page)."""
    if any(row.get("tests") for row in document["specs"]):
        what = (
            "how much faster (smaller) the newer is, the median round's ratio and its 95% interval, over at most"
            f" {_rounds(document['settings']['rounds'])} ({document['settings']['budget']}); SLOWER (LARGER), ok"
            f" (not by {document['settings'].get('slower_by', speed.SLOWER_BY):.0%}) or undecided: the speed test"
        )
    else:  # a report from before the speed test
        what = (
            f"the newer's figure over the older's, medians over {_rounds(document['settings']['rounds'])}"
            f" ({document['settings']['budget']})"
        )
    lines = [
        f"{document['newer']} against {document['older']}: {what}.",
        "",
        "| spec | iterations | bits | verdict | claims | env steps/s | compile | peak memory |",
        "|---|---:|---|---|---|---:|---:|---:|",
    ]
    for row in document["specs"]:
        lines.append(
            f"| {row['spec']} | {row['iterations']} | {row['bits']} | {shown_verdict(row, document['settings'])} |"
            f" {row.get('claims', '-')} | {shown_test(row, 'speed', 'speed_ratio')} |"
            f" {shown_test(row, 'compile', 'compile_ratio')} | {shown_test(row, 'memory', 'peak_memory_ratio')}"
            f"{' (' + row['peak_memory'] + ')' if row['peak_memory'] else ''} |"
        )
    if pending := document["settings"].get("not run yet"):
        lines += ["", f"Not run yet (the report stopped before them): {', '.join(pending)}."]
    return "\n".join(lines) + "\n"


def table(document: dict[str, Any]):
    """The report for the terminal (fits 100 columns)."""
    from rich.table import Table

    out = Table(title=f"drift: {document['newer']} against {document['older']}", title_justify="left")
    for header, justify in [
        ("spec", "left"),
        ("bits", "left"),
        ("verdict", "left"),
        ("claims", "left"),
        ("steps/s", "right"),
        ("compile", "right"),
        ("peak", "right"),
    ]:
        out.add_column(header, justify=justify)
    for row in document["specs"]:
        out.add_row(
            row["spec"],
            row["bits"],
            shown_verdict(row, document["settings"]),
            row.get("claims", "-"),
            *(
                shown_test(row, figure, key).replace(" [", "\n[").replace("] ", "]\n")
                for figure, key in (
                    ("speed", "speed_ratio"),
                    ("compile", "compile_ratio"),
                    ("memory", "peak_memory_ratio"),
                )
            ),
        )
    return out
