"""Sessions: `nox` (= tests), `nox -s bench`, `nox -s peers`, `nox -s lint`, `nox -s docs`,
`nox -s publish`, `nox -s unseen`.

Every session installs the project with `constraints.txt`, the exact package
versions the CPU references in `results/` were made with (or, with `-- --jax
0.11`, `constraints-jax0.11.txt`, the GPU references'), so that a fresh
machine runs what the project was tested with; the sessions that run JAX
add the build that fits the machine (harness/jax_build.py): the CUDA plugin
where an NVIDIA driver is found, the TPU runtime on a TPU VM, or the one
`-- --accelerator cpu|cuda12|tpu|system` names.
"""

import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
# uv makes the sessions' environments where it is installed (`pip install nox
# uv`): the project's packages in seconds rather than a minute and a half of
# pip; else virtualenv and pip.
nox.options.default_venv_backend = "uv|virtualenv"
# Compiled to bytecode as pip does: the suite starts a hundred Python
# processes, and where PYTHONDONTWRITEBYTECODE is set each would compile
# every module it imports (a few CPU seconds for JAX and MLflow) again.
os.environ.setdefault("UV_COMPILE_BYTECODE", "1")


def _load(name: str, *parts: str):
    """A standard-library-only module of the project, loaded by its path
    (the project is not installed yet)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent.joinpath(*parts))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _jax_build():
    return _load("jax_build", "harness", "jax_build.py")


# The published specs' folder (harness.judge.references.PUBLISHED; nox's own
# Python has no harness to import it from).
PUBLISHED = Path("experiments")

# Ctrl-C (or a time limit's SIGINT) reaches the harness and pytest as well as
# nox: nox then waits this long for them to end as they do on SIGINT (the
# bench's report, results and MLflow run written; `harness run`'s checkpoint
# saved and its run marked KILLED) before it terminates them. Its own default,
# 0.3 s, cuts that short and loses the interrupted bench's measurements.
STOP_SECONDS = 60.0


def _run(session: nox.Session, module: str, *args: str, success_codes: tuple[int, ...] = (0,)) -> None:
    """`python -m MODULE ARGS` in the session's environment, given the time
    to stop cleanly on SIGINT."""
    session.run(
        *_python(session, module),
        *args,
        external=True,
        interrupt_timeout=STOP_SECONDS,
        success_codes=list(success_codes),
    )


def _python(session: nox.Session, module: str) -> list[str]:
    """`python -m MODULE` in the session's environment: its venv's, or with
    `--no-venv` the very Python nox runs in (not whichever is first on PATH)."""
    return [sys.executable if session.venv_backend == "none" else "python", "-m", module]


def _take_option(session: nox.Session, args: list[str], name: str, takes: str) -> str | None:
    """The value of `name VALUE` in a session's arguments after `--`, taken
    out of `args`; None without it."""
    if name not in args:
        return None
    at = args.index(name)
    if at + 1 == len(args):
        session.error(f"{name} takes {takes}")
    value = args[at + 1]
    del args[at : at + 2]
    return value


def _install(session: nox.Session, extras: str = "test") -> list[str]:
    """Install the project with constraints.txt (or, with `-- --jax LINE`,
    that JAX line's constraints file: harness/jax_build.py's LINES) and the
    JAX build that fits this machine (the CUDA plugin where an NVIDIA driver
    is found, the TPU runtime on a TPU VM, else the CPU build), or the one
    `-- --accelerator cpu|cuda12|tpu|system` names; `system` keeps the
    machine's own JAX and runs in it (`nox --no-venv -s NAME -- --accelerator
    system`). Returns the session's other arguments."""
    build = _jax_build()
    args = list(session.posargs)
    requested = _take_option(session, args, "--accelerator", "one of: " + ", ".join(build.PACKAGES))
    line = _take_option(session, args, "--jax", "a JAX line: " + ", ".join(build.LINES))
    try:
        choice = build.choose(requested, driver=build.nvidia_driver(), tpu=build.tpu_present())
        constraints = build.line_constraints(line, sys.version_info[:2])
    except ValueError as error:
        session.error(str(error))
    entry = build.LINES[line or build.DEFAULT_LINE]
    own = session.venv_backend == "none"
    if own != (choice.build == "system"):
        session.error(
            "--accelerator system installs into the Python nox runs in: nox --no-venv -s "
            f"{session.name} -- --accelerator system"
        )
    session.log(f"JAX build: {choice.build} ({choice.reason})")
    session.env[build.ENV] = choice.build
    if own and os.environ.get("PIP_NO_INDEX"):
        # No package index (scripts/accelerator-run --wheels): the packages
        # the machine lacks were installed from the wheels as they are; the
        # project goes in beside them, without resolving anything.
        if line:
            session.error(f"--jax {line}: without a package index (PIP_NO_INDEX) the installed JAX is used as it is")
        session.log("no package index (PIP_NO_INDEX): the project only, around the packages installed")
        session.run(
            sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", ".", external=True
        )
        return args
    session.log(f"versions: {constraints}")
    overrides: list[str] = []
    if entry.overrides:
        session.log(f"overrides: {entry.overrides} ({entry.why})")
        if session.venv_backend not in ("uv", "none") or (own and shutil.which("uv") is None):
            session.error(
                f"--jax {line}: {entry.why}, and only uv can install overrides (pip cannot): pip install uv, "
                "or see the README's JAX paragraph for the same install by hand with pip"
            )
        overrides = ["--overrides", entry.overrides]
    if own:
        folder = Path(tempfile.mkdtemp())
        kept = folder / "constraints.txt"
        kept.write_text(build.without_jax(Path(constraints).read_text()))
        if overrides:  # uv into this Python, the caps lifted but the machine's JAX kept
            (folder / "overrides.txt").write_text(build.overridden(Path(entry.overrides).read_text()))
            install = ["uv", "pip", "install", "--python", sys.executable, "--overrides", str(folder / "overrides.txt")]
        else:
            install = [sys.executable, "-m", "pip", "install"]
        session.run(*install, "-c", str(kept), "-e", f".[{extras}]", external=True)
        return args
    others = [p.split("[")[0] for b, packages in build.PACKAGES.items() if b != choice.build for p in packages]
    if others:  # a reused environment may hold another build's plugin
        if session.venv_backend == "uv":  # no pip of its own there: uv's
            session.run("uv", "pip", "uninstall", "--quiet", *others, silent=True, external=True)
        else:
            session.run("python", "-m", "pip", "uninstall", "--yes", "--quiet", *others, silent=True)
    session.install("-c", constraints, *overrides, "-e", f".[{extras}]", *build.requirements(choice.build))
    return args


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (CPU; simulated devices where a test needs several)."""
    args = _install(session)
    _run(session, "pytest", *args)


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmark suite: small-budget benchmark specs through the runner
    (1 seed and many), micro-benchmarks of the jitted parts, and a device
    ceiling; one table at the end, compared with the last run on this device.

    Results go to the git-ignored `.bench/` folder (JSON per device, table,
    chart, MLflow store) and to MLflow's experiment `bench`. Options after
    `--`: `--full` (the published specs instead), `-k NAME`, `--device gpu`,
    `--tracking-uri URI`, `--against PEER`, `--baseline REV` (this commit
    against REV, interleaved round by round, each entry judged by the speed
    test), `--fail-on-regression` (exit 1 on SLOWER against REV); see
    benchmarks/machinery/plugin.py.
    """
    # The side-by-side entries import the peers' code, which needs a few
    # packages of its own (the `peers` extra).
    line = session.posargs[session.posargs.index("--jax") + 1] if "--jax" in session.posargs[:-1] else None
    # The bench is one Python process (its baseline a second), which imports
    # a part of what the environment holds: compiled as they are imported,
    # into the bench's folder where PYTHONDONTWRITEBYTECODE is set (kept for
    # the next run), those modules cost less than all of them compiled at
    # install, as the suite's hundred processes need.
    session.env["UV_COMPILE_BYTECODE"] = "0"
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        session.env["PYTHONDONTWRITEBYTECODE"] = None
        session.env["PYTHONPYCACHEPREFIX"] = str(Path(".bench", "pycache").resolve())
    args = _install(session, "test,peers" if "--against" in session.posargs else "test")
    # Some pytest-benchmark versions open --benchmark-json while parsing options.
    Path(".bench").mkdir(exist_ok=True)
    if (rev := _take_option(session, args, "--baseline", "a commit of this repository (REV)")) is not None:
        args += _baseline(session, rev, line)
    _run(
        session, "pytest", "benchmarks", "-p", "no:cacheprovider", "--benchmark-only",
        "--benchmark-json", ".bench/benchmark.json", *args,
    )  # fmt: skip


def _baseline(session: nox.Session, rev: str, line: str | None) -> list[str]:
    """`--baseline REV`: REV's worktree and environment
    (benchmarks/machinery/baseline_checkout.py), and the bench's options
    that start REV's bench in lockstep with this one."""
    checkout = _load("baseline_checkout", "benchmarks", "machinery", "baseline_checkout.py")
    build = _jax_build()
    root = Path(__file__).parent
    try:
        commit = checkout.commit_of(root, rev)
        python = session.run("python", "-c", "import sys; print(sys.executable)", silent=True).strip()
        constraints = build.line_constraints(line, sys.version_info[:2])
        extra = build.requirements(session.env.get(build.ENV, "cpu"))
        folder = checkout.prepare(root, rev, commit, python, constraints, extra, session.log)
    except checkout.BaselineError as error:
        session.error(str(error))
    session.log(f"baseline {commit[:10]}: {folder / 'tree'}, its bench in lockstep with this one")
    return checkout.options(folder, commit)


@nox.session(venv_backend="none")
def peers(session: nox.Session) -> None:
    """Clone the peers the side-by-side entries run (PureJaxRL,
    xland-minigrid, pgx) into the git-ignored `.peers/`, each at the commit
    its entries were checked against; then `nox -s bench -- --against all`.
    `-- --from DIR` clones from local mirrors (DIR/purejaxrl, ...) instead of
    GitHub; names after `--` clone only those."""
    checkouts = _load("peer_checkouts", "benchmarks", "machinery", "peer_checkouts.py")
    args = list(session.posargs)
    source = _take_option(session, args, "--from", "a folder of mirrors")
    unknown = [name for name in args if name not in checkouts.CHECKOUTS]
    if unknown:
        session.error(f"no peer {', '.join(unknown)}; the peers are: {', '.join(checkouts.CHECKOUTS)}")
    for name in args or list(checkouts.CHECKOUTS):
        for command in checkouts.clone_commands(name, Path(__file__).parent, source):
            session.run(*command, external=True)
        session.log(
            f"{name}: {checkouts.folder(Path(__file__).parent) / name} at {checkouts.CHECKOUTS[name].commit[:10]}"
        )


@nox.session
def lint(session: nox.Session) -> None:
    session.install("-c", "constraints.txt", "ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site: the generated pages current
    (scripts/docs_pages/), then `mkdocs build --strict` into `site/`."""
    session.install("-c", "constraints.txt", "-e", ".[docs]")
    session.run("python", "scripts/docs_pages", "--check")
    session.run("mkdocs", "build", "--strict")


@nox.session
def publish(session: nox.Session) -> None:
    """Re-make references: each published spec (all of `experiments/`, or the
    names given after `--`) trained with `harness run --deterministic` from a
    clean commit, then written to `results/` with `harness publish` (the
    reference of this machine's device class). `harness reproduce` on the
    same machine is then judged bit for bit (on a GPU, a reproduction with
    `--deterministic` too; a CPU or TPU is deterministic without it)."""
    args = _install(session)
    _require_clean_commit(session)
    names = args or sorted(p.stem for p in PUBLISHED.glob("*.yaml"))
    missing = [n for n in names if not (PUBLISHED / f"{n}.yaml").exists()]
    if missing:
        session.error(f"no published spec {', '.join(missing)} in {PUBLISHED}/")
    for name in names:
        spec = str(PUBLISHED / f"{name}.yaml")
        # A claim's test undecided on the reference's own seeds (4) still makes a reference.
        _run(session, "harness", "run", spec, "--deterministic", "--no-progress", success_codes=(0, 4))
        _run(session, "harness", "publish", spec, "--random-baseline")


@nox.session
def unseen(session: nox.Session) -> None:
    """Check each published spec's claims on seeds no faithful record used:
    `harness reproduce --adaptive`, batches of the reference's seed count
    until every claim's test decides (or four batches: INCONCLUSIVE), each
    batch's results written to `results/unseen/<spec>@seeds-A-B.json`, where
    they join the seeds the claims' levels are learned from, and confirm
    claims frozen before them (`harness validate SPEC --freeze`). Every
    batch is kept whatever its verdict: a FAIL or an undecided spec is
    named and the next one runs (a faithful run fails alpha of the time;
    a pool that kept only passing batches would not be a sample). Names
    after `--` check only those specs."""
    args = _install(session)
    _require_clean_commit(session)
    # Only a spec with a test claim (a claim with delta) has a verdict to stop on.
    names = args or _specs_with_a_test(session)
    for name in names:
        if not Path("results", f"{name}.json").exists():
            session.error(f"no reference results/{name}.json for {name}")
        _run(
            session, "harness", "reproduce", str(PUBLISHED / f"{name}.yaml"), "--adaptive", "--no-progress",
            "--results-out", "results/unseen", success_codes=(0, 1, 4),
        )  # fmt: skip


def _specs_with_a_test(session: nox.Session) -> list[str]:
    """The published specs with a test claim (a claim with delta), as the
    harness reads them (`Claim.is_test`), in the session's environment."""
    listed = session.run(
        "python", "-c",
        "from pathlib import Path; from harness import experiment_spec as spec;"
        f"print(' '.join(p.stem for p in sorted(Path('{PUBLISHED}').glob('*.yaml'))"
        " if any(c.is_test for c in spec.load(p).claims.values())))",
        silent=True,
    )  # fmt: skip
    return listed.split()


def _require_clean_commit(session: nox.Session) -> None:
    """Records in results/ come from committed code: stop if any other file
    differs from the commit."""
    changed = session.run(
        "git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results",
        silent=True, external=True,
    )  # fmt: skip
    if changed and changed.strip():
        session.error(f"run from a clean commit; these files differ from it:\n{changed}")
