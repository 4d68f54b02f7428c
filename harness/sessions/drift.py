"""`harness drift SPEC... --older PYTHON --newer PYTHON`: the same specs
trained in two environments on this machine (two JAX versions, two lock
files), one process per run, alternating, and what the newer changes
(harness.judge.drift).

Each environment is a Python with its own packages; both run this
checkout's harness (PYTHONPATH), so only the packages differ. Every run is
`harness run --deterministic --no-compile-cache` (compile time measured,
GPU bits repeatable) into one MLflow store; with `iterations`, each spec is
cut to that many iterations (claims dropped: a short run answers the
speed, compile and bits questions, not the returns). Rounds alternate the
order (older first, then newer first) so that neither side always runs on
a warmer machine. The report goes to the terminal, to `out` (JSON, with
its Markdown beside) and to MLflow as a run `drift` in the experiment
`drift`, tagged with both sides.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

import yaml

from harness import build, spec
from harness.console import err_console, out_console, print_table
from harness.judge import drift, machines
from harness.record import runs, schema, store, tracking

ROOT = Path(__file__).resolve().parent.parent.parent
STOP_SECONDS = 60  # after SIGINT, for a stopped run to end as it does on Ctrl-C


class DriftError(ValueError):
    """A side that cannot run (its Python missing, a run failing)."""


class DriftOptions(NamedTuple):
    older: str  # the Python of the older environment
    newer: str
    specs: list[Path]
    rounds: int
    iterations: int | None  # None: each spec's own budget
    uri: str
    out: Path
    max_seconds: float | None = None  # a run that takes longer is stopped and reported as not finished


def _short(path: Path, iterations: int, folder: Path) -> Path:
    """The spec at `path` cut to `iterations` iterations in chunks of a
    quarter of them (a warm-up chunk and timed ones), without its claims."""
    plan = build.build(spec.load(path), str(path))
    data = yaml.safe_load(path.read_text())
    data["budget"] = {"env_steps": iterations * plan.env_steps_per_iteration}
    data.setdefault("logging", {})["interval"] = max(1, iterations // 4)
    data.pop("claims", None)
    short = folder / path.name
    short.write_text(yaml.safe_dump(data, sort_keys=False))
    return short


def _run(python: str, spec_path: Path, out: Path, uri: str, max_seconds: float | None) -> schema.Results | None:
    """One `harness run` of the spec in `python`'s environment: its record,
    or None when it did not finish within `max_seconds` (it is then
    interrupted as Ctrl-C would, so its MLflow run ends KILLED)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    argv = [python, "-m", "harness", "run", str(spec_path), "--results-out", str(out), "--no-progress"]
    argv += ["--deterministic", "--no-compile-cache", "--no-system-metrics", "--tracking-uri", uri]
    try:
        process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as error:
        raise DriftError(f"cannot start {python}: {error}") from None
    try:
        output, _ = process.communicate(timeout=max_seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
        return None
    if process.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-12:])
        raise DriftError(f"{python}: harness run {spec_path.name} exited with {process.returncode}:\n{tail}")
    return schema.parse(out.read_text(), str(out))


def check_python(python: str) -> None:
    """`python` runs and imports JAX, or a DriftError says why."""
    try:
        done = subprocess.run([python, "-c", "import jax"], capture_output=True, text=True, check=False)
    except OSError as error:
        raise DriftError(f"--older/--newer {python}: cannot start it ({error.strerror})") from None
    if done.returncode != 0:
        raise DriftError(f"--older/--newer {python}: it cannot import jax: {done.stderr.strip().splitlines()[-1]}")


def drift_report(options: DriftOptions) -> dict:
    for python in (options.older, options.newer):
        check_python(python)
    rows = []
    older_label = newer_label = machine = ""
    with tempfile.TemporaryDirectory(prefix="drift-") as tmp:
        folder = Path(tmp)
        for number, path in enumerate(options.specs, 1):
            run_path = _short(path, options.iterations, folder) if options.iterations else path
            sides: dict[str, list[schema.Results]] = {"older": [], "newer": []}
            unfinished = None
            for round_ in range(options.rounds):
                order = ["older", "newer"] if round_ % 2 == 0 else ["newer", "older"]
                for side in order:
                    python = options.older if side == "older" else options.newer
                    out = folder / f"{path.stem}-{side}-{round_}.json"
                    err_console.print(
                        f"[{number}/{len(options.specs)}] {path.stem}: round {round_ + 1}/{options.rounds}, {side}",
                        highlight=False,
                    )
                    record = _run(python, run_path, out, options.uri, options.max_seconds)
                    if record is None:
                        unfinished = side
                        break
                    sides[side].append(record)
                if unfinished:
                    break
            if unfinished:
                rows.append(drift.unfinished(path.stem, unfinished, options.max_seconds, sides))
                continue
            older = drift.Side(drift.label(sides["older"][0]), sides["older"])
            newer = drift.Side(drift.label(sides["newer"][0]), sides["newer"])
            older_label, newer_label = older.label, newer.label
            machine = machines.device_label(sides["older"][0].fingerprint)
            rows.append(drift.compare(path.stem, older, newer))
    budget = f"{options.iterations} iterations per spec" if options.iterations else "each spec's own budget"
    settings = {"rounds": options.rounds, "budget": budget, "iterations": options.iterations, "machine": machine}
    return drift.to_dict(older_label, newer_label, rows, settings)


def drift_command(options: DriftOptions) -> int:
    """Run, print, write and log the report; 0, or 1 when a verdict fails."""
    document = drift_report(options)
    print_table(drift.table(document))
    markdown = drift.to_markdown(document)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(document, indent=1) + "\n")
    options.out.with_suffix(".md").write_text(markdown)
    client = tracking.open_client(options.uri)
    experiment = store.get_or_create_experiment(client, options.uri, "drift")
    run = client.create_run(
        experiment,
        run_name="drift",
        tags={"harness.kind": "drift", "drift.older": document["older"], "drift.newer": document["newer"]},
    )
    runs.log_texts(client, run.info.run_id, {"drift.json": json.dumps(document, indent=1), "drift.md": markdown})
    client.set_terminated(run.info.run_id)
    out_console.print(
        f"report written to {options.out} (and {options.out.with_suffix('.md').name}); logged to MLflow run"
        f" {run.info.run_id} ({options.uri})",
        soft_wrap=True,
    )
    failed = [row["spec"] for row in document["specs"] if row["verdict"].endswith("FAIL") or row["speed_ratio"] is None]
    if failed:
        err_console.print(f"the newer side fails its verdict, or a run did not finish, on: {', '.join(failed)}")
    return 1 if failed else 0
