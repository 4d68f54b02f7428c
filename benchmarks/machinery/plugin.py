"""The benchmark suite's pytest plugin (`nox -s bench`): `benchmarks/conftest.py`
loads it, and `benchmarks/` holds the entries.

Options (after `nox -s bench --`):
  --full [SPEC,...]     the published specs in experiments/ and the
                        accelerator-size specs in benchmarks/specs/full/
                        (all, or these), at their own seeds and budgets,
                        instead of the small benchmark specs in
                        benchmarks/specs/; also runs the
                        long benchmarks (harness overhead, AlphaZero at the
                        pgx example's size)
  --spec PATH           bench this spec file (its own seeds and budget)
                        instead of the benchmark specs; repeatable
  --device PLATFORM     cpu, gpu or tpu (default: JAX's default device)
  --tracking-uri URI    MLflow store (default: MLFLOW_TRACKING_URI, else
                        sqlite:///<bench dir>/mlflow.db)
  --bench-dir DIR       where results go (default: .bench/ in the repository)
  --fail-on-regression  exit 1 when an entry is more than 10% slower than
                        its last run on this device
  --against PATH        a local checkout of a peer (PureJaxRL, xland-minigrid
                        or pgx): also run its side-by-side entries
                        (`against_*`), its training and the project's at the
                        same configuration, alternately in one process;
                        repeatable
  --profile             trace one steady-state chunk of each spec entry with
                        JAX's profiler into <bench dir>/profiles/
and pytest's own `-k NAME` to select entries.

Every entry records a `benchmarks.machinery.measure.Result`; at the end of the session the
entries are compared with their last run on the same device, printed as one
table, saved under <bench dir>/history/<device key>/ and logged to MLflow
(`benchmarks.machinery.report`).
"""

from __future__ import annotations

import json
import os
import time
import traceback
import uuid
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import pytest


def bench_specs(config: pytest.Config) -> Path:
    """The small benchmark specs, in the repository's `benchmarks/specs/`."""
    return config.rootpath / "benchmarks" / "specs"


def published_specs(config: pytest.Config) -> Path:
    """The published specs, in the repository's `experiments/`."""
    return config.rootpath / "experiments"


def full_only_specs(config: pytest.Config) -> Path:
    """Benchmark specs at the sizes accelerator users run (thousands of
    envs), too long for a CPU's default suite: `--full` runs them beside the
    published specs."""
    return bench_specs(config) / "full"


class SpecEntry(NamedTuple):
    id: str  # the pytest id: the entry is named spec[<id>]
    path: Path
    seeds: tuple[int, ...] | None  # None: the spec's own
    evaluate: bool  # run the algorithm's evaluation, as harness run does
    cores: bool = False  # the seeds spread over the CPU's cores (devices: {host_devices: cores})

    def plan(self):
        from harness import build
        from harness import spec as spec_module

        loaded = spec_module.load(self.path)
        if self.seeds is not None:
            loaded = loaded.model_copy(update={"seeds": self.seeds})
        if self.cores:
            loaded = build.with_devices(loaded, {"host_devices": "cores"})
        return build.build(loaded, str(self.path))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness bench")
    group.addoption(
        "--full",
        nargs="?",
        const="all",
        default=None,
        metavar="SPEC[,SPEC]",
        help="run the published specs of experiments/ (all, or these) instead of the benchmark specs",
    )
    group.addoption("--spec", action="append", default=[], metavar="PATH", help="bench this spec file; repeatable")
    group.addoption("--device", default=None, metavar="PLATFORM", help="cpu, gpu or tpu (default: JAX's default)")
    group.addoption("--tracking-uri", default=None, help="MLflow tracking URI (default: sqlite in the bench dir)")
    group.addoption("--bench-dir", default=None, help="where results go (default: .bench/ in the repository)")
    group.addoption(
        "--fail-on-regression", action="store_true", help="exit 1 when an entry is >10%% slower than its last run"
    )
    group.addoption(
        "--against",
        action="append",
        default=[],
        metavar="PATH",
        help="a PureJaxRL, xland-minigrid or pgx checkout: run its side-by-side entries too; repeatable",
    )
    group.addoption(
        "--profile", action="store_true", help="trace one steady-state chunk of each spec entry (bench dir, profiles/)"
    )


# ------------------------------------------------------------------ session


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

    def profile_dir(self, name: str) -> Path | None:
        """Where an entry's trace goes with --profile; None without."""
        if not self.config.getoption("profile"):
            return None
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        return self.bench_dir / "profiles" / f"{self.started:%Y%m%dT%H%M%S}" / safe

    def record(self, benchmark, result) -> None:
        """Keep an entry's result: in the report and in pytest-benchmark's JSON."""
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
        from benchmarks.machinery import mlflow_log
        from benchmarks.machinery import report as bench_report
        from harness.run import provenance

        fingerprint = provenance.fingerprint(device=self.device)
        key = bench_report.device_key(fingerprint)
        runs, notes = bench_report.load_runs(bench_report.history_dir(self.bench_dir, key))
        current = [r.to_dict() for r in self.results]
        changes = bench_report.compare(current, bench_report.previous_entries(runs))
        self.regressions = [name for name, change in changes.items() if change.regression]
        self.info = {
            "format": bench_report.FORMAT,
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
        saved = bench_report.save_run(self.bench_dir, document)

        title = f"harness bench ({self.mode}), {self.started:%Y-%m-%d %H:%M} UTC"
        previous_ceiling = runs[-1]["harness"].get("ceiling") if runs else None
        started = {c.previous_started for c in changes.values() if c.previous_started}
        text = bench_report.render(
            *bench_report.header(self.info, self.ceiling, previous_ceiling),
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
            lines.append(f"MLflow: {self.uri}, experiment {bench_report.EXPERIMENT!r}, session run {run_id}")
        except Exception as error:  # noqa: BLE001  (the store can fail in many ways)
            self.errors.append(f"logging to MLflow at {self.uri} failed: {error}")
        if profiles := [r.extra["profile"] for r in self.results if "profile" in r.extra]:
            lines.append(
                f"profiles: {Path(profiles[0]).parent}/ (a trace of one steady-state chunk per spec entry, left out"
                " of its repeats): xprof --logdir DIR, or a .trace.json.gz in https://ui.perfetto.dev"
            )
        if self.regressions:
            lines.append(
                f"REGRESSION (more than {100 * bench_report.REGRESSION_THRESHOLD:.0f}% slower than the last run "
                f"on this device): {', '.join(self.regressions)}"
            )
        self.report = "\n".join(lines)


def _load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


_KEY = pytest.StashKey[BenchSession]()


# The benchmark specs whose many-seed run is benched over the cores too in
# the default suite: those the peers are compared on side by side (the
# CartPole configuration is REINFORCE's too); the rest stay out to keep the
# suite under 10 minutes on a 2-core CPU.
CORES_SPECS = ("ppo_cartpole", "reinforce_cartpole", "ppo_minatar_breakout")


def _split_host() -> None:
    """One CPU device per core (`harness.run.host_devices`), set before JAX
    starts, for the entries that spread seeds over the cores; a split that
    XLA_FLAGS sets, or devices already started, stay as they are."""
    from harness.run import host_devices

    try:
        host_devices.enable(host_devices.cores())
    except host_devices.HostDevicesError:
        pass


def _spread_over_cores(device: Any, seeds: int) -> bool:
    """Whether a CPU bench has host devices to spread `seeds` seeds over."""
    import jax

    from harness.run import host_devices

    if device.platform != "cpu":
        return False
    return host_devices.resolve(host_devices.CORES, seeds, devices=len(jax.devices("cpu"))) > 1


def _spec_entries(config: pytest.Config, device: Any) -> tuple[str, list[SpecEntry]]:
    """The mode and the spec entries the options ask for; bad names and bad
    spec files are usage errors."""
    from harness import spec as spec_module

    full, paths = config.getoption("full"), config.getoption("spec")
    entries: list[SpecEntry] = []
    if full:
        published = {
            p.stem: p
            for folder in (published_specs(config), full_only_specs(config))
            for p in sorted(folder.glob("*.yaml"))
        }
        names = list(published) if full == "all" else [n.strip() for n in full.split(",") if n.strip()]
        unknown = [n for n in names if n not in published]
        if unknown:
            raise pytest.UsageError(
                f"--full: no published spec {', '.join(map(repr, unknown))}; the specs in {published_specs(config)} "
                f"and {full_only_specs(config)} are: "
                f"{', '.join(published)}"
            )
        entries += [SpecEntry(name, published[name], None, True) for name in names]
    for raw in paths:
        path = Path(raw)
        entries.append(SpecEntry(path.stem, path, None, True))
    if full or paths:
        mode = "full" if full else "spec"
    else:
        mode = "default"
        for path in sorted(bench_specs(config).glob("*.yaml")):
            seeds = spec_module.load(path).seeds
            for count in sorted({1, len(seeds)}):
                label = "1seed" if count == 1 else f"{count}seeds"
                # The default bench times training alone: AlphaZero's
                # evaluation games compile for about a minute on a CPU.
                entries.append(SpecEntry(f"{path.stem}-{label}", path, tuple(seeds[:count]), False))
                # On a CPU the many-seed run again, its seeds spread over the cores.
                if count > 1 and path.stem in CORES_SPECS and _spread_over_cores(device, count):
                    entries.append(SpecEntry(f"{path.stem}-{label}-cores", path, tuple(seeds), False, cores=True))
    if mode != "default":
        # Files from the command line: build each (no compiling) so that a
        # bad spec or env is a usage error, not a failed entry.
        from benchmarks.machinery.measure import chunk_lengths

        for entry in entries:
            try:
                plan = entry.plan()
            except spec_module.SpecError as error:
                raise pytest.UsageError(str(error)) from None
            if len(chunk_lengths(plan.num_iterations, plan.spec.logging.interval)) < 2:
                raise pytest.UsageError(
                    f"{entry.path}: {plan.num_iterations} iteration(s) in chunks of {plan.spec.logging.interval} "
                    "(logging.interval) make one chunk; a benchmark needs a warm-up chunk and timed ones"
                )
    return mode, entries


def _device(platform: str | None):
    import jax

    if platform is None:
        return jax.devices()[0]
    try:
        return jax.devices(platform)[0]
    except RuntimeError as error:
        present = sorted({d.platform for d in jax.devices()})
        raise pytest.UsageError(
            f"--device {platform}: no such device here ({error}); this machine has: {', '.join(present)}"
        ) from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "full_only: a long benchmark that runs with --full only")
    config.addinivalue_line(
        "markers", "against(peer): a side-by-side entry that runs with --against PATH (that peer's checkout) only"
    )
    if config.option.help:
        return
    # The report times every entry; pytest's slowest-durations list (on in
    # the test suite's options) would only repeat the entries' names.
    config.option.durations = None
    bench_dir = Path(config.getoption("bench_dir") or config.rootpath / ".bench").resolve()
    bench_dir.mkdir(parents=True, exist_ok=True)
    # pytest-benchmark writes its JSON (which the report extends and saves per
    # device) and prints no table of its own: the report is the table.
    if config.option.benchmark_json is None:
        config.option.benchmark_json = bench_dir / "benchmark.json"
    config.option.benchmark_quiet = True
    # When nothing ran (a usage error, or every entry failed) the report says
    # so; pytest-benchmark's own warning about it would be a second message.
    warnings.filterwarnings("ignore", message="Not saving anything, no benchmarks have been run")

    import jax

    # Compile seconds are part of the report: a persistent compilation cache
    # would turn them into cache reads.
    jax.config.update("jax_enable_compilation_cache", False)
    _split_host()
    device = _device(config.getoption("device"))
    jax.config.update("jax_default_device", device)
    mode, entries = _spec_entries(config, device)

    from harness.record import tracking

    uri = (
        config.getoption("tracking_uri")
        or os.environ.get("MLFLOW_TRACKING_URI")
        or f"sqlite:///{bench_dir / 'mlflow.db'}"
    )
    try:
        tracking.open_client(uri)
    except tracking.TrackingError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[_KEY] = BenchSession(config, device, mode, entries, uri, bench_dir)
    if paths := config.getoption("against"):
        from benchmarks.machinery import peers

        try:
            for path in paths:
                name, folder = peers.check(path)
                config.stash[_KEY].against[name] = folder
        except peers.PeerError as error:
            raise pytest.UsageError(str(error)) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "spec_entry" in metafunc.fixturenames and _KEY in metafunc.config.stash:
        entries = metafunc.config.stash[_KEY].spec_entries
        metafunc.parametrize("spec_entry", entries, ids=[e.id for e in entries])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    session = config.stash.get(_KEY, None)
    if session is None:
        return
    # Spec entries first: they are the suite's point, and the table's top.
    order = {"test_bench_specs.py": 0, "test_bench_micro.py": 1}
    items.sort(key=lambda item: order.get(item.path.name, 2))
    session.all_names = [_entry_name(item) for item in items]
    left_out = {"full_only"} if session.mode != "full" else set()

    def kept_item(item: pytest.Item) -> bool:
        against = item.get_closest_marker("against")
        if against is not None and against.args[0] not in session.against:
            return False
        return not any(item.get_closest_marker(m) for m in left_out)

    kept = [item for item in items if kept_item(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def pytest_collection_finish(session: pytest.Session) -> None:
    bench = session.config.stash.get(_KEY, None)
    if bench is None or session.items or session.config.option.collectonly:
        return
    keyword = session.config.option.keyword
    what = f"-k {keyword!r} matches no benchmark entry" if keyword else "no benchmark entry selected"
    only = " or ".join([*([] if bench.mode == "full" else ["--full"]), *([] if bench.against else ["--against PATH"])])
    raise pytest.UsageError(
        f"{what}{f' (some run with {only} only)' if only else ''}; the entries are: {', '.join(bench.all_names)}"
    )


def _entry_name(item: pytest.Item) -> str:
    return item.name.removeprefix("test_")


def pytest_benchmark_update_json(config: pytest.Config, benchmarks, output_json: dict) -> None:
    bench = config.stash.get(_KEY, None)
    if bench is not None:
        bench.finalize(output_json)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    bench = session.config.stash.get(_KEY, None)
    if bench is None:
        return
    bench.finalize(None)
    if bench.errors or (bench.regressions and session.config.getoption("fail_on_regression")):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:
    bench = terminalreporter.config.stash.get(_KEY, None)
    if bench is None or not (bench.report or bench.errors):
        return
    terminalreporter.section("harness bench")
    for line in bench.report.splitlines():
        terminalreporter.write_line(line)
    for error in bench.errors:
        terminalreporter.write_line(f"error: {error}", red=True, bold=True)


# ----------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def bench(request: pytest.FixtureRequest) -> BenchSession:
    return request.config.stash[_KEY]


@pytest.fixture(scope="session", autouse=True)
def device_ceiling(bench: BenchSession):
    """The device's matmul GFLOP/s and bandwidth, measured once per session."""
    from harness.run.ceiling import measure_ceiling

    bench.ceiling = measure_ceiling(bench.device)
    return bench.ceiling


class Entry(NamedTuple):
    name: str  # the entry's name in the table, MLflow and the JSON
    bench: BenchSession
    benchmark: Any

    def record(self, result) -> None:
        self.bench.record(self.benchmark, result)


@pytest.fixture
def entry(request: pytest.FixtureRequest, bench: BenchSession, benchmark) -> Entry:
    return Entry(_entry_name(request.node), bench, benchmark)
