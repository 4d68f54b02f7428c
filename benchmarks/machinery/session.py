"""`BenchSession`: what one `nox -s bench` collects (every entry's
`benchmarks.machinery.measure.Result`) and, once all entries have run,
reports: the entries compared with their last run on this device, saved to
that device's history, rendered as the table and chart (`report`), and logged
to MLflow (`mlflow_log`). The plugin keeps the one session on pytest's
config, under `KEY`."""

from __future__ import annotations

import json
import os
import time
import traceback
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from benchmarks.machinery.selection import SpecEntry


class BenchSession:
    """What one `nox -s bench` collects and reports."""

    def __init__(self, config: pytest.Config, device: Any, mode: str, specs: list[SpecEntry], uri: str, bench_dir):
        self.config = config
        self.device = device
        self.mode = mode
        self.spec_entries = specs
        self.uri = uri
        self.bench_dir = bench_dir
        self.session = uuid.uuid4().hex
        self.started = datetime.now(UTC)
        self.started_clock = time.perf_counter()
        self.started_cpu = time.process_time()
        self.load_start = _load_average()
        self.results: list = []
        self.ceiling = None
        self.all_names: list[str] = []
        self.finalized = False
        self.info: dict = {}
        self.report: str = ""
        self.errors: list[str] = []
        self.regressions: list[str] = []
        self.against: dict[str, Path] = {}  # peer name -> its checkout's folder (--against)
        self.fills: dict = {}  # published spec -> filling.Fill, found once per session
        self.fill_seconds_left = config.getoption("fill_seconds")  # what the probes have left
        self.filled_stems: list[str] = []  # the workloads of the filled[...] entries selected
        self.comparisons = 0  # the speed tests this run makes: the run's alpha is split over them
        # --baseline: a lockstep.Leader (this bench drives a baseline's), a lockstep.Follower (this is
        # the baseline's bench), or None; what each entry's rounds against the baseline gave.
        self.lockstep = None
        self.baseline: dict[str, Any] = {}  # the baseline's rev, folder and log (leader)
        self.compared: dict[str, Any] = {}  # entry name -> lockstep.Compared

    @property
    def following(self) -> bool:
        from benchmarks.machinery.lockstep import Follower

        return isinstance(self.lockstep, Follower)

    def lockstep_rounds(self, name: str, call, rounds: int) -> list[float]:
        """An entry's timed calls in lockstep with the other bench: the
        candidate's seconds (its comparison kept in `compared`), or the
        baseline's."""
        if self.following:
            return self.lockstep.rounds(name, call)
        compared = self.lockstep.rounds(name, call, self.speed_test(), alone=rounds)
        self.compared[name] = compared
        return compared.own

    def speed_test(self, slower_by: float | None = None):
        """The speed test of one of this run's comparisons
        (harness.stats.speed): its share of the run's alpha, x from
        `--slower-by` unless the entry says otherwise."""
        from benchmarks.machinery.compat import speed

        x = slower_by or self.config.getoption("slower_by") or speed.SLOWER_BY
        return speed.SpeedTest(slower_by=x, alpha=speed.alpha_each(self.comparisons)).check()

    def fill(self, stem: str):
        """The size that fills this device for the published spec `stem`
        (`benchmarks.machinery.filling`), found once per session. The
        probes of the workloads with no record share `--fill-seconds`: each
        gets what is left over the workloads still to probe."""
        if stem not in self.fills:
            from benchmarks.machinery import filling
            from benchmarks.machinery.paths import PUBLISHED_SPECS, ROOT
            from harness.run import provenance

            machine = filling.machine(provenance.fingerprint(device=self.device))
            probes = self.bench_dir / "scale"
            folders = [ROOT / "results" / "scale", probes]

            def probe_record(stem: str) -> Path:
                return filling.record_path(probes, machine, stem)

            def recorded(stem: str):
                """The record to take as it is; None when a probe is due (none,
                or an unfinished probe's, to go on from)."""
                found = filling.recorded(folders, machine, stem)
                if (
                    found is not None
                    and found.source == str(probe_record(stem))
                    and filling.unfinished(Path(found.source))
                ):
                    return None
                return found

            found = recorded(stem)
            if found is None:
                ceiling = self.ceiling.matmul_gflops[0] if self.ceiling else None
                waiting = [s for s in self.filled_stems if s not in self.fills and recorded(s) is None]
                seconds = self.fill_seconds_left / max(1, len(waiting))
                started = time.perf_counter()
                found = filling.probe(PUBLISHED_SPECS / f"{stem}.yaml", seconds, ceiling, probe_record(stem))
                self.fill_seconds_left = max(0.0, self.fill_seconds_left - (time.perf_counter() - started))
            self.fills[stem] = found
        return self.fills[stem]

    def profile_dir(self, name: str) -> Path | None:
        """Where an entry's trace goes with --profile; None without."""
        if not self.config.getoption("profile"):
            return None
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        return self.bench_dir / "profiles" / f"{self.started:%Y%m%dT%H%M%S}" / safe

    def record(self, benchmark, result) -> None:
        """Keep an entry's result: in the report and in pytest-benchmark's JSON
        (with its speed test against the baseline, `extra["speed"]`)."""
        if (compared := self.compared.get(result.name)) is not None:
            result.extra["baseline"] = {"rev": self.baseline.get("rev"), "seconds": compared.baseline}
            if compared.verdict is not None:
                result.extra["speed"] = compared.verdict.as_dict()
            else:
                result.extra["baseline"]["missing"] = compared.why
        benchmark.extra_info["harness"] = result.to_dict()
        self.results.append(result)

    def finalize(self, document: dict | None) -> None:
        """Compare, save, log and render, once, when all entries have run.
        `document` is pytest-benchmark's JSON, when it writes one. A failure
        here is reported as an error of the session, not a traceback out of
        pytest-benchmark's hook."""
        if self.finalized:
            if document is not None and self.info:
                document["harness"] = self.info
            return
        if not self.results:
            return
        self.finalized = True
        try:
            self._finalize(document)
        except Exception:  # noqa: BLE001  (a report that fails must not hide the entries' figures)
            self.errors.append(f"the bench report failed:\n{traceback.format_exc()}")

    def _finalize(self, document: dict | None) -> None:
        from benchmarks.machinery import history, mlflow_log
        from benchmarks.machinery import report as bench_report
        from harness.run import provenance

        fingerprint = provenance.fingerprint(device=self.device)
        key = history.device_key(fingerprint)
        runs, notes = history.load_runs(history.history_dir(self.bench_dir, key))
        current = [r.to_dict() for r in self.results]
        changes = history.compare(current, history.previous_entries(runs))
        ended = self.baseline["process"].finish() if "process" in self.baseline else None
        figures = self._baseline_figures() if "process" in self.baseline else []
        self.regressions = [r.name for r in self.results if bench_report.slower(r)]
        self.regressions += [f.what for f in figures if f.regressed]
        if self.baseline and not any("speed" in r.extra for r in self.results if "baseline" in r.extra):
            self.errors.append(
                f"the baseline {self.baseline['rev'][:10]}'s bench ran none of the entries compared: no verdict"
                f" ({ended})"
            )
        self.info = {
            "format": history.FORMAT,
            "session": self.session,
            "mode": self.mode,
            "started": self.started.isoformat(),
            "wall_seconds": time.perf_counter() - self.started_clock,
            "cpu_seconds": time.process_time() - self.started_cpu,
            "cpu_count": os.cpu_count(),
            "load_average": {"start": self.load_start, "end": _load_average()},
            "device_key": key,
            "fingerprint": fingerprint,
            "versions": provenance.versions(),
            "git": provenance.git_state(),
            "ceiling": self.ceiling.as_dict() if self.ceiling else None,
            "changes": {name: change._asdict() for name, change in changes.items()},
            **({"baseline": {k: str(v) for k, v in self.baseline.items() if k != "process"}} if self.baseline else {}),
            **({"baseline_figures": [f.as_dict() for f in figures]} if figures else {}),
        }
        if document is None:
            document = {
                "machine_info": {},
                "commit_info": {},
                "benchmarks": [{"name": f"test_{r['name']}", "extra_info": {"harness": r}} for r in current],
                "datetime": self.started.isoformat(),
            }
        document["harness"] = self.info
        document.setdefault("machine_info", {})["device_fingerprint"] = fingerprint
        saved = history.save_run(self.bench_dir, document)

        title = f"harness bench ({self.mode}), {self.started:%Y-%m-%d %H:%M} UTC"
        previous_ceiling = runs[-1]["harness"].get("ceiling") if runs else None
        started = {c.previous_started for c in changes.values() if c.previous_started}
        summary = bench_report.against_summary(self.results)
        text = bench_report.render(
            *bench_report.header(self.info, self.ceiling, previous_ceiling),
            *([summary] if summary else []),
            bench_report.table(self.results, changes, self.ceiling, title),
            *bench_report.notes(self.results, self.ceiling, started, key),
            *notes,
        )
        report = self.bench_dir / "report.txt"
        report.write_text(text)
        chart = bench_report.plot_rates(self.results, changes, self.bench_dir / "sps.png", title)
        lines = [text.rstrip("\n"), f"saved: {saved} (and {chart}, {report})"]
        try:
            run_id = mlflow_log.log_to_mlflow(
                self.uri,
                document,
                self.results,
                changes,
                self.ceiling,
                {"sps.png": chart, "report.txt": text, "benchmark.json": json.dumps(document, indent=2, default=str)},
            )
            lines.append(f"MLflow: {self.uri}, experiment {mlflow_log.EXPERIMENT!r}, session run {run_id}")
        except Exception as error:  # noqa: BLE001  (the store can fail in many ways)
            self.errors.append(f"logging to MLflow at {self.uri} failed: {error}")
        if profiles := [r.extra["profile"] for r in self.results if "profile" in r.extra]:
            lines.append(
                f"profiles: {Path(profiles[0]).parent}/ (a trace of one steady-state chunk per spec entry, left out"
                " of its repeats): xprof --logdir DIR, or a .trace.json.gz in https://ui.perfetto.dev"
            )
        if ended:
            lines.append(ended)
        if self.baseline:
            lines.append(bench_report.speed_summary(self.results, f"the baseline {self.baseline['rev'][:10]}"))
            lines += [f"against the baseline, {f.line()}" for f in figures]
        self.report = "\n".join(lines)

    def _baseline_figures(self) -> list:
        """Compile seconds and peak memory against the baseline, the entries
        as rounds (benchmarks.machinery.baseline_figures), from its bench's JSON."""
        from benchmarks.machinery import baseline_figures

        theirs = baseline_figures.read_baseline(Path(self.baseline["folder"]) / "bench" / "benchmark.json")
        return baseline_figures.judge(self.results, theirs, self.speed_test()) if theirs else []


def _load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


KEY = pytest.StashKey[BenchSession]()
