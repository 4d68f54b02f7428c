"""`harness drift SPEC... --older PYTHON --newer PYTHON`: the same specs
trained in two environments on this machine (two JAX versions, two lock
files), one process per run, alternating, and what the newer changes
(harness.judge.drift).

Each environment is a Python with its own packages; both run this
checkout's harness (PYTHONPATH), so only the packages differ. Every run is
`harness run --deterministic --no-compile-cache` (compile time measured,
GPU bits repeatable) into one MLflow store, under one parent run `drift`
(experiment `drift`, tagged with both sides); with `iterations`, each spec is
cut to that many iterations (claims dropped: a short run answers the
speed, compile and bits questions, not the returns). Rounds alternate the
order (older first, then newer first) so that neither side always runs on
a warmer machine. The report goes to the terminal, to `out` (JSON, with
its Markdown beside) and to that parent run's artifacts.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import yaml

from harness import build, exit_codes
from harness import experiment_spec as spec
from harness.console import err_console, out_console, print_table
from harness.judge import drift, machines
from harness.record import runs, schema, tracking
from harness.record.command_run import command_run
from harness.stats import speed

ROOT = Path(__file__).resolve().parent.parent.parent
BENCH_FOLDER = ("benchmarks", "specs")  # where the bench's spec entries are
STOP_SECONDS = 60  # after SIGINT, for a stopped run to end as it does on Ctrl-C


class DriftError(ValueError):
    """A side that cannot run (its Python missing, a run failing)."""


class DriftOptions(NamedTuple):
    older: str  # the Python of the older environment
    newer: str
    specs: list[Path]
    rounds: int  # at most: a spec's rounds stop once the speed tests of its figures decide
    iterations: int | None  # None: each spec's own budget
    uri: str
    out: Path
    max_seconds: float | None = None  # a run that takes longer is stopped and reported as not finished
    slower_by: float = speed.SLOWER_BY  # x of the speed tests

    def speed_test(self) -> speed.SpeedTest:
        """Each figure's test: its share of the drift's alpha, over every spec's figures."""
        comparisons = len(self.specs) * len(drift.FIGURES)
        return speed.SpeedTest(self.slower_by, speed.alpha_each(comparisons), cap=self.rounds).check()


# Rounds every spec runs before its speed tests may stop it: a side run twice shows whether its
# bits repeat.
MIN_ROUNDS = 2


def cut_short(path: Path, iterations: int, folder: Path) -> Path:
    """The spec at `path` cut to `iterations` iterations in chunks of a
    quarter of them (a warm-up chunk and timed ones), without its claims.
    Nothing is built here: this process starts no device (on a GPU, XLA
    would hold its memory while the sides run)."""
    data = yaml.safe_load(path.read_text())
    data["budget"] = {"env_steps": iterations * build.env_steps_per_iteration(spec.load(path))}
    data.setdefault("logging", {})["interval"] = max(1, iterations // 4)
    data.pop("claims", None)
    short = folder / f"{path.parent.name}-{path.name}"
    short.write_text(yaml.safe_dump(data, sort_keys=False))
    return short


def _run(python: str, spec_path: Path, out: Path, options: DriftOptions, parent: str) -> schema.Results | None:
    """One `harness run` of the spec in `python`'s environment, under the
    MLflow run `parent`: its record, or None when it did not finish within
    `options.max_seconds` (it is then interrupted as Ctrl-C would, so its
    MLflow run ends KILLED). The run has a session of its own, so that a
    signal reaches it once, from here: when the drift is stopped (Ctrl-C,
    or a signal to this process alone), so is the run it waits on."""
    max_seconds = options.max_seconds
    env = _side_env()
    argv = [python, "-m", "harness", "run", str(spec_path), "--results-out", str(out), "--no-progress"]
    argv += ["--deterministic", "--no-compile-cache", "--no-system-metrics", "--tracking-uri", options.uri]
    argv += ["--parent-run", parent]
    try:
        process = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
    except OSError as error:
        raise DriftError(f"cannot start {python}: {error}") from None
    try:
        output, _ = process.communicate(timeout=max_seconds)
    except subprocess.TimeoutExpired:
        _stop(process, signal.SIGINT, options.uri, parent)
        return None
    except KeyboardInterrupt as stopped:  # harness.run.interrupts.Interrupted names SIGINT or SIGTERM
        _stop(process, getattr(stopped, "signum", signal.SIGINT), options.uri, parent)
        raise
    # A side's run that trained and wrote its results may still end 1 (a claim's test FAILED) or 4
    # (undecided): the report judges the claims itself.
    tail = "\n".join(output.strip().splitlines()[-12:]) or "(it printed nothing)"
    if process.returncode not in (0, 1, 4):
        raise DriftError(f"{python}: harness run {spec_path.name} exited with {process.returncode}:\n{tail}")
    if not out.exists():
        raise DriftError(
            f"{python}: harness run {spec_path.name} exited {process.returncode} without its results:\n{tail}"
        )
    try:
        return schema.parse(out.read_text(), str(out))
    except ValueError as error:  # SpecError included: a record this harness cannot read
        raise DriftError(
            f"{python}: harness run {spec_path.name} wrote results this harness cannot read: {error}"
        ) from None


def _stop(process: subprocess.Popen, signum: int, uri: str, parent: str) -> None:
    """Stop a side's run with `signum` as a user's signal would; one that
    does not end within STOP_SECONDS (inside a compile, where Python's
    handler cannot run) is killed. Its MLflow runs still RUNNING then end
    KILLED (a killed run's; a run that stopped itself left none)."""
    process.send_signal(signum)
    try:
        process.communicate(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
    _end_killed(uri, parent)


def _end_killed(uri: str, parent: str) -> None:
    """A run killed before it could end its MLflow runs: those still RUNNING
    under `parent` (its own and its seeds') end KILLED."""
    client = tracking.open_client(uri)
    experiment = client.get_run(parent).info.experiment_id
    below = [parent]
    while below:
        query = f"tags.mlflow.parentRunId = '{below.pop()}' and attributes.status = 'RUNNING'"
        for run in client.search_runs([experiment], query):
            client.set_terminated(run.info.run_id, status="KILLED")
            below.append(run.info.run_id)


def _side_env() -> dict[str, str]:
    """A side's environment: this checkout's harness first on its path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


# What a side must be able to do: import the harness (and with it JAX, MLflow
# and the rest) and say which JAX and Python it has and its XLA flags.
_PROBE = (
    "import json, os, sys, jax, harness.cli.dispatch;"
    " print('drift-side ' + json.dumps([jax.__version__, sys.version.split()[0], os.environ.get('XLA_FLAGS', '')]))"
)


def side_label(python: str) -> str:
    """The JAX and Python of `python`'s environment ("jax 0.11.2 (Python
    3.12.1)"), and the XLA flags it sets, if any (`python` may be a script
    that sets XLA_FLAGS and starts a Python: a side that differs from the
    other by a flag); or a DriftError saying, in one line, why it cannot be
    a side (not found, not a Python, without the harness or its packages)."""
    where = f"--older/--newer {python}"
    try:
        done = subprocess.run([python, "-c", _PROBE], env=_side_env(), capture_output=True, text=True, check=False)
    except OSError as error:
        raise DriftError(f"{where}: cannot start it ({error.strerror})") from None
    said = [line for line in done.stdout.splitlines() if line.startswith("drift-side ")]
    if done.returncode == 0 and said:
        try:
            return drift.side_name(*json.loads(said[-1].removeprefix("drift-side ")))
        except (ValueError, TypeError):
            pass
    errors = done.stderr.strip().splitlines()
    why = errors[-1] if errors else f"it exited {done.returncode} and printed no error"
    if done.returncode == 0:
        why = "it ran, but did not answer as a Python with JAX and the harness does"
    raise DriftError(f"{where}: not a Python that can run the harness here ({why})")


def row_names(paths: list[Path]) -> list[str]:
    """Each spec's name in the report: its file's stem, or its path as
    given without the suffix where two folders hold that stem (a published
    spec and the bench's entry of the same name) and for the bench's entries
    (`benchmarks/specs/ppo_cartpole`: not the published spec of that name)."""
    stems = [path.stem for path in paths]
    folders = [path.resolve().parent.parts[-2:] for path in paths]
    return [
        p.with_suffix("").as_posix() if stems.count(p.stem) > 1 or folder == BENCH_FOLDER else p.stem
        for p, folder in zip(paths, folders, strict=True)
    ]


def _name_side_runs(client, parent: str, name: str, side: str, round_: int) -> None:
    """The side's run just made under `parent` (and any other not yet
    named) named for its spec, side and round, and tagged with them: in
    the UI's table the runs say which is which."""
    experiment = client.get_run(parent).info.experiment_id
    for run in client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parent}'"):
        if "drift.side" not in run.data.tags:
            tags = {"mlflow.runName": f"{name} {side} round {round_ + 1}", "drift.side": side}
            runs.set_tags(client, run.info.run_id, {**tags, "drift.round": str(round_ + 1), "drift.spec": name})


def _log_rows(client, run_id: str, document: dict, word: str) -> None:
    """Each spec's verdict, bits and claims as tags of the drift's run, and
    its ratios as metrics (`<spec>/speed_ratio`, ...): sortable and drawn in
    the UI's runs table; the whole result, `word`, as the `verdict` tag every judging
    run has (harness.stats.verdict)."""
    from mlflow.entities import Metric

    tags, metrics, now = {}, [], int(time.time() * 1000)
    for row in document["specs"]:
        key = row["spec"]
        tags[f"drift.{key}.verdict"] = drift.shown_verdict(row, document["settings"])
        tags[f"drift.{key}.outcome"] = drift.shown_outcome(row, document["settings"])
        tags[f"drift.{key}.bits"] = row["bits"]
        tags[f"drift.{key}.claims"] = row.get("claims", "-")
        for figure, test in row.get("tests", {}).items():
            tags[f"drift.{key}.{figure}"] = test["outcome"]
        for figure in ("speed_ratio", "compile_ratio", "peak_memory_ratio"):
            value = row.get(figure)
            if value is not None and math.isfinite(value):
                metrics.append(Metric(f"{key}/{figure}", float(value), now, 0))
    runs.set_tags(client, run_id, {**tags, **runs.verdict_tags(word)})
    if metrics:
        client.log_batch(run_id, metrics=metrics)


def _spec_rows(options: DriftOptions, path: Path, name: str, number: int, folder: Path, client, parent: str):
    """One spec's runs, round by round (the order alternating) until the
    speed tests of its figures decide (at least MIN_ROUNDS, at most
    `options.rounds`), and its row (`name`) of the report; and the device
    its older side ran on."""
    run_path = cut_short(path, options.iterations, folder) if options.iterations else path
    records: dict[str, list[schema.Results]] = {"older": [], "newer": []}
    test = options.speed_test()
    for round_ in range(options.rounds):
        for side in ["older", "newer"] if round_ % 2 == 0 else ["newer", "older"]:
            err_console.print(
                f"[{number}/{len(options.specs)}] {name}: round {round_ + 1}/{options.rounds}, {side}",
                highlight=False,
            )
            python = options.older if side == "older" else options.newer
            out = folder / f"{number}-{side}-{round_}.json"
            record = _run(python, run_path, out, options, parent)
            _name_side_runs(client, parent, name, side, round_)
            if record is None:
                return drift.unfinished(name, side, options.max_seconds, records), None
            records[side].append(record)
        if round_ + 1 >= MIN_ROUNDS and drift.decided(records["older"], records["newer"], test):
            break
    older = drift.Side(drift.label(records["older"][0]), records["older"])
    newer = drift.Side(drift.label(records["newer"][0]), records["newer"])
    return drift.compare(name, older, newer, test), machines.device_label(records["older"][0].fingerprint)


def drift_report(options: DriftOptions, sides: dict[str, str], client, parent: str) -> dict:
    """Every spec's runs on both sides (named in `sides`), under the MLflow
    run `parent`, and the report of what the newer side changes."""
    rows, machine, names = [], "", row_names(options.specs)
    budget = f"{options.iterations} iterations per spec" if options.iterations else "each spec's own budget"
    settings = {
        "rounds": options.rounds,
        "budget": budget,
        "iterations": options.iterations,
        "slower_by": options.slower_by,
        "alpha_each": options.speed_test().alpha,
    }
    with tempfile.TemporaryDirectory(prefix="drift-") as tmp:
        for number, (path, name) in enumerate(zip(options.specs, names, strict=True), 1):
            row, device = _spec_rows(options, path, name, number, Path(tmp), client, parent)
            rows.append(row)
            machine = device or machine
            if number < len(names):  # the report so far, should the rest not come
                pending = {**settings, "machine": machine, "not run yet": names[number:]}
                _write(options.out, drift.to_dict(sides["older"], sides["newer"], rows, pending))
    return drift.to_dict(sides["older"], sides["newer"], rows, {**settings, "machine": machine})


def _write(out: Path, document: dict) -> str:
    """The report as JSON at `out` and as Markdown beside it; the Markdown."""
    markdown = drift.to_markdown(document)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown)
    return markdown


def drift_command(options: DriftOptions) -> int:
    """Run, print, write and log the report; 0 when every verdict passes, 1
    when one fails, 4 when none fails but one is undecided (not judged, or a
    claim's test inconclusive: never counted as agreement).
    The parent run is opened first (an unusable store is reported before
    any training) and ends FINISHED with the report, or FAILED or KILLED."""
    # Each side's environment checked before any run.
    sides = {"older": side_label(options.older), "newer": side_label(options.newer)}
    tags = {"harness.kind": "drift", "drift.older": sides["older"], "drift.newer": sides["newer"]}
    with command_run(options.uri, "drift", "drift", tags) as (client, run_id):
        document = drift_report(options, sides, client, run_id)
        print_table(drift.table(document))
        markdown = _write(options.out, document)
        runs.log_texts(client, run_id, {"drift.json": json.dumps(document, indent=1), "drift.md": markdown})
        word = drift.outcome(document)
        _log_rows(client, run_id, document, word)
    out_console.print(
        f"report written to {options.out} (and {options.out.with_suffix('.md').name}); logged to MLflow run"
        f" {run_id} ({options.uri}), with every side's runs under it",
        soft_wrap=True,
    )
    if failed := drift.failed(document):
        err_console.print(
            f"the newer side fails its verdict or a claim, is SLOWER (LARGER) by the speed test, or a run did not"
            f" finish, on: {', '.join(failed)}",
            soft_wrap=True,
        )
    elif undecided := drift.undecided(document):
        err_console.print(
            f"no agreement shown (not judged, or a claim undecided) on: {', '.join(undecided)}", soft_wrap=True
        )
    return exit_codes.of_verdict(word)
