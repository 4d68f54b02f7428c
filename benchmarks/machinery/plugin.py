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
  --baseline-python PY, --baseline-dir DIR, --baseline-rev REV
                        compare with REV's bench in lockstep (what
                        `nox -s bench -- --baseline REV` prepares: REV's
                        worktree in DIR/tree, its environment's PY):
                        every entry's rounds interleaved with REV's until
                        the speed test decides (harness.stats.speed)
  --fail-on-regression  exit 1 when the speed test finds an entry SLOWER
                        than the baseline (with --baseline only)
  --against PEER        a peer (purejaxrl, xland-minigrid or pgx, as cloned
                        into .peers/ by `nox -s peers`; `all`: every one of
                        them; or the PATH of a checkout): also run its side-by-side entries
                        (`against_*`), its training and the project's at the
                        same configuration, alternately in one process;
                        repeatable
  --slower-by X         the slowdown every speed test asks about, as a
                        share (default 0.1): is the candidate slower, or
                        not slower by X? (harness.stats.speed)
  --fill-seconds S      the time all probes for the size that fills the
                        device share (`filled[...]` entries of workloads with
                        no record for this machine in results/scale/, or
                        an unfinished probe's in the bench dir; default 240)
  --profile             trace one steady-state chunk of each spec entry with
                        JAX's profiler into <bench dir>/profiles/
and pytest's own `-k NAME` to select entries.

Every entry records a `benchmarks.machinery.measure.Result`; at the end of the session the
entries are compared with their last run on the same device, printed as one
table, saved under <bench dir>/history/<device key>/ and logged to MLflow
(`benchmarks.machinery.history`, `report`, `mlflow_log`).

The plugin is this module's hooks; what they use is in the modules beside it:
what the options select (`selection`), the session that collects the entries'
results and writes the report at its end (`session`), and the fixtures the
entries take (`fixtures`). `benchmarks/conftest.py` imports the hooks and
fixtures from here (`__all__`), where pytest finds them by name.
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

import pytest

from benchmarks.machinery import peer_checkouts, selection
from benchmarks.machinery.fixtures import bench, device_ceiling, entry, entry_name
from benchmarks.machinery.session import KEY, BenchSession

__all__ = [
    "bench",
    "device_ceiling",
    "entry",
    "pytest_addoption",
    "pytest_benchmark_update_json",
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_generate_tests",
    "pytest_report_header",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
]


def _positive_seconds(text: str) -> float:
    """--fill-seconds: a number of seconds above 0 (argparse reports the rest in one line)."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}")
    return seconds


def _share(text: str) -> float:
    """--slower-by: a share above 0 (0.1 is 10%)."""
    try:
        share = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (a share: 0.1 is 10%)") from None
    if not 0 < share < 10:
        raise argparse.ArgumentTypeError(f"must be a share above 0 (0.1 is 10%), not {text}")
    return share


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
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when the speed test finds an entry SLOWER than the baseline (--baseline)",
    )
    group.addoption("--baseline-python", default=None, metavar="PY", help="the baseline's Python (lockstep)")
    group.addoption("--baseline-dir", default=None, metavar="DIR", help="the baseline's folder: DIR/tree, its worktree")
    group.addoption("--baseline-rev", default=None, metavar="REV", help="the baseline's commit")
    group.addoption("--lockstep-follower", default=None, metavar="R,W", help=argparse.SUPPRESS)
    group.addoption(
        "--against",
        action="append",
        default=[],
        metavar="PEER",
        help=f"{', '.join(peer_checkouts.CHECKOUTS)} (cloned by `nox -s peers`), all, or a checkout's PATH: "
        "run its side-by-side entries too; repeatable",
    )
    group.addoption(
        "--slower-by",
        type=_share,
        default=None,
        metavar="X",
        help="the slowdown the speed tests are asked about, as a share (default 0.1: 10%%, harness.stats.speed)",
    )
    group.addoption(
        "--fill-seconds",
        type=_positive_seconds,
        default=240.0,
        metavar="S",
        help="the time the probes for device-filling sizes share (filled[...] entries without a record; default 240)",
    )
    group.addoption(
        "--profile", action="store_true", help="trace one steady-state chunk of each spec entry (bench dir, profiles/)"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "full_only: a long benchmark that runs with --full only")
    config.addinivalue_line("markers", "off_cpu: measures what acts on accelerators only; left out on a CPU")
    config.addinivalue_line(
        "markers", "against(peer): a side-by-side entry that runs with --against PEER (that peer's checkout) only"
    )
    if config.option.help:
        return
    config.pluginmanager.register(KeepMeasured(), "harness-bench-keep-measured")
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
    selection.split_host()
    device = selection.device(config.getoption("device"))
    jax.config.update("jax_default_device", device)
    mode, entries = selection.spec_entries(config, device)

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
    config.stash[KEY] = BenchSession(config, device, mode, entries, uri, bench_dir)
    if value := config.getoption("lockstep_follower"):
        from benchmarks.machinery import baseline

        config.stash[KEY].lockstep = baseline.follower(value)
    elif config.getoption("fail_on_regression") and not config.getoption("baseline_python"):
        raise pytest.UsageError(
            "--fail-on-regression judges against a baseline: add --baseline REV (a stored run cannot be"
            " interleaved with this one, so the last run gives a ratio, never a verdict)"
        )
    if values := config.getoption("against"):
        from benchmarks.machinery import peers

        lacking: dict[str, list[str]] = {}  # every peer's missing packages, told at once
        try:
            for path in [path for value in values for path in peer_checkouts.resolve(value, config.rootpath)]:
                try:
                    name, folder = peers.check(path)
                except peers.MissingPackages as error:
                    lacking.update(error.by_peer)
                    continue
                config.stash[KEY].against[name] = folder
            if lacking:
                raise peers.MissingPackages(lacking)
        except (peers.PeerError, peer_checkouts.MissingCheckout) as error:
            raise pytest.UsageError(str(error)) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "spec_entry" in metafunc.fixturenames and KEY in metafunc.config.stash:
        entries = metafunc.config.stash[KEY].spec_entries
        metafunc.parametrize("spec_entry", entries, ids=[e.id for e in entries])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    session = config.stash.get(KEY, None)
    if session is None:
        return
    # Spec entries first: they are the suite's point, and the table's top.
    order = {"test_bench_specs.py": 0, "test_bench_filled.py": 1, "test_bench_micro.py": 2}
    items.sort(key=lambda item: order.get(item.path.name, 2))
    session.all_names = [entry_name(item) for item in items]
    left_out = {"full_only"} if session.mode != "full" else set()
    if session.device.platform == "cpu":
        left_out.add("off_cpu")

    def kept_item(item: pytest.Item) -> bool:
        against = item.get_closest_marker("against")
        if against is not None and against.args[0] not in session.against:
            return False
        return not any(item.get_closest_marker(m) for m in left_out)

    kept = [item for item in items if kept_item(item)]
    session.filled_stems = [item.callspec.params["stem"] for item in kept if item.path.name == "test_bench_filled.py"]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def pytest_report_header(config: pytest.Config) -> str | None:
    """Before the first entry: the platform and devices the bench measures."""
    bench = config.stash.get(KEY, None)
    return None if bench is None else selection.describe(bench.device)


def pytest_collection_finish(session: pytest.Session) -> None:
    bench = session.config.stash.get(KEY, None)
    if bench is None or session.config.option.collectonly:
        return
    if session.items:
        # The comparisons the run's alpha is split over, once -k has chosen: against a baseline
        # every entry may be one; else only the side-by-side entries.
        python = session.config.getoption("baseline_python")
        bench.comparisons = sum(1 for i in session.items if python or i.get_closest_marker("against") is not None)
        if python:  # and the compile and memory figures' tests, the entries as rounds
            from benchmarks.machinery.baseline_figures import TESTS

            bench.comparisons += TESTS
            _start_baseline(session, bench, python)
        return
    keyword = session.config.option.keyword
    what = f"-k {keyword!r} matches no benchmark entry" if keyword else "no benchmark entry selected"
    only = " or ".join([*([] if bench.mode == "full" else ["--full"]), *([] if bench.against else ["--against PEER"])])
    raise pytest.UsageError(
        f"{what}{f' (some run with {only} only)' if only else ''}; the entries are: {', '.join(bench.all_names)}"
    )


def _start_baseline(session: pytest.Session, bench: BenchSession, python: str) -> None:
    """Start the baseline's bench beside this one (benchmarks.machinery.baseline)."""
    from benchmarks.machinery import baseline

    folder = session.config.getoption("baseline_dir")
    rev = session.config.getoption("baseline_rev") or "baseline"
    if not folder or not Path(folder, "tree").is_dir():
        raise pytest.UsageError("--baseline-python needs --baseline-dir DIR with the baseline's worktree in DIR/tree")
    order = [entry_name(item) for item in session.items]
    started = baseline.Baseline(python, Path(folder), rev, session.config.invocation_params.args, order)
    bench.lockstep = started.leader
    bench.baseline = {"rev": rev, "folder": str(folder), "log": str(started.log), "process": started}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """In the baseline's bench: an entry that fails tells the leader why."""
    outcome = yield
    bench = item.config.stash.get(KEY, None)
    report = outcome.get_result()
    if bench is not None and bench.following and report.failed:
        text = str(report.longrepr).strip().splitlines()
        bench.lockstep.failed(entry_name(item), text[-1] if text else report.when)


def pytest_benchmark_update_json(config: pytest.Config, benchmarks, output_json: dict) -> None:
    bench = config.stash.get(KEY, None)
    if bench is not None:
        bench.finalize(output_json)


class KeepMeasured:
    """An interrupted session (Ctrl-C, a time limit's SIGINT) keeps what it
    measured: the entry cut short has no rounds, and pytest-benchmark would
    fail on it while writing the JSON, losing every other entry too. Its
    wrapper runs before pytest-benchmark's own session finish."""

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):
        measured = getattr(session.config, "_benchmarksession", None)
        if measured is not None:
            cut = [b for b in measured.benchmarks if not (b.stats and b.stats.data)]
            if cut:
                measured.benchmarks[:] = [b for b in measured.benchmarks if b not in cut]
                names = ", ".join(b.name for b in cut)
                session.config.get_terminal_writer().line(f"not measured (interrupted): {names}", yellow=True)
        yield


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    bench = session.config.stash.get(KEY, None)
    if bench is None:
        return
    bench.finalize(None)
    if bench.errors or (bench.regressions and session.config.getoption("fail_on_regression")):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:
    bench = terminalreporter.config.stash.get(KEY, None)
    if bench is None or not (bench.report or bench.errors):
        return
    terminalreporter.section("harness bench")
    for line in bench.report.splitlines():
        terminalreporter.write_line(line)
    for error in bench.errors:
        terminalreporter.write_line(f"error: {error}", red=True, bold=True)
