"""Sessions: `nox` (= tests), `nox -s bench`, `nox -s lint`.

Every session installs the project with `constraints.txt`, the exact package
versions the references in `results/` were made with, so that a fresh
machine runs what the project was tested with.
"""

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

INSTALL = ("-c", "constraints.txt", "-e", ".[test]")


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (CPU; simulated devices where a test needs several)."""
    session.install(*INSTALL)
    session.run("pytest", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: steady-state env steps/s, compile seconds, harness overhead.

    Results (pytest-benchmark JSON) go to the git-ignored `.bench/` folder.
    Pass pytest options after `--`, e.g. `nox -s bench -- -k overhead`.
    """
    session.install(*INSTALL)
    session.run(
        "pytest",
        "benchmarks",
        "-p",
        "no:cacheprovider",
        "--benchmark-only",
        "--benchmark-json",
        ".bench/benchmark.json",
        "--benchmark-columns=min,median,max,rounds",
        "--benchmark-sort=name",
        *session.posargs,
    )


@nox.session
def lint(session: nox.Session) -> None:
    session.install("-c", "constraints.txt", "ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
