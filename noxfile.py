"""Sessions: `nox` (= tests), `nox -s bench`, `nox -s lint`, `nox -s docs`.

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
    """The benchmark suite: small-budget benchmark specs through the runner
    (1 seed and many), micro-benchmarks of the jitted parts, and a device
    ceiling; one table at the end, compared with the last run on this device.

    Results go to the git-ignored `.bench/` folder (JSON per device, table,
    chart, MLflow store) and to MLflow's experiment `bench`. Options after
    `--`: `--full` (the published specs instead), `-k NAME`, `--device gpu`,
    `--tracking-uri URI`, `--fail-on-regression`; see
    benchmarks/machinery/plugin.py.
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
        *session.posargs,
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
