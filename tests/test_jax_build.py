"""The JAX build the nox sessions install (harness/jax_build.py, noxfile.py):
detection stood in for by files and a stand-in session, the choice and the
install it leads to checked for each kind of machine."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from harness import jax_build
from harness.run import provenance

ROOT = Path(__file__).resolve().parent.parent


def _driver_file(tmp_path: Path, version: str) -> Path:
    path = tmp_path / "version"
    path.write_text(f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Release Build  (dvs-builder)\n")
    return path


def test_the_driver_is_read_from_the_kernel_module(tmp_path):
    found = jax_build.nvidia_driver(_driver_file(tmp_path, "580.159.04"), which=lambda name: None)
    assert found == "580.159.04"
    assert jax_build.nvidia_driver(tmp_path / "absent", which=lambda name: None) is None


def test_a_tpu_vm_is_told_by_its_chips_or_its_runtime(tmp_path):
    assert not jax_build.tpu_present(tmp_path, environ={})
    assert jax_build.tpu_present(tmp_path, environ={"TPU_ACCELERATOR_TYPE": "v5litepod-8"})
    (tmp_path / "accel0").touch()
    assert jax_build.tpu_present(tmp_path, environ={})


@pytest.mark.parametrize(
    ("driver", "tpu", "build"),
    [("580.159.04", False, "cuda12"), ("470.82.01", False, "cpu"), (None, False, "cpu"), (None, True, "tpu")],
)
def test_the_build_fits_what_is_found(driver, tpu, build):
    assert jax_build.detect(driver, tpu).build == build


def test_an_explicit_choice_overrides_detection():
    assert jax_build.choose("cpu", driver="580.159.04").build == "cpu"
    assert jax_build.choose("system").build == "system"
    with pytest.raises(ValueError, match="--accelerator rocm: one of cpu, cuda12, tpu, system"):
        jax_build.choose("rocm")


@pytest.mark.parametrize("line", list(jax_build.LINES))
def test_every_package_a_build_adds_is_pinned_at_the_line_s_jax_version(line):
    constraints = jax_build.LINES[line].constraints
    pins = dict(entry.split("==") for entry in (ROOT / constraints).read_text().split() if "==" in entry)
    for build in jax_build.PACKAGES:
        for package in jax_build.requirements(build):
            name = package.split("[")[0]
            assert name in pins, f"{name} ({build}) is not pinned in {constraints}"
    assert pins["jax-cuda12-plugin"] == pins["jax-cuda12-pjrt"] == pins["jax"] == pins["jaxlib"]
    assert pins["jax"].startswith(line + "."), (line, pins["jax"])


def test_a_jax_line_names_its_constraints_or_why_it_cannot_be_used():
    assert jax_build.line_constraints(None, (3, 11)) == "constraints.txt"
    assert jax_build.line_constraints("0.11", (3, 13)) == "constraints-jax0.11.txt"
    with pytest.raises(ValueError, match=r"--jax 0.11 needs Python 3.12 or newer .* this is Python 3.11: run nox"):
        jax_build.line_constraints("0.11", (3, 11))
    assert jax_build.line_constraints("0.12", (3, 12)) == "constraints-jax0.12.txt"
    with pytest.raises(ValueError, match=r"--jax 0.4: no such JAX line; the JAX lines are 0.10 \(constraints.txt\)"):
        jax_build.line_constraints("0.4", (3, 12))


def test_a_reference_on_another_jax_line_says_how_to_install_that_line():
    """A GPU reference made on jax 0.11.2, reproduced on the README's 0.10
    line: the reason it is not judged bit for bit names the line to install."""
    hint = jax_build.line_hint("0.11.2", "0.10.2")
    assert "jax 0.11 line: install constraints-jax0.11.txt, on Python 3.12 or newer" in hint
    assert "`-- --jax 0.11`" in hint
    assert "constraints.txt" in jax_build.line_hint("0.10.2", "0.11.2")
    # The same line, an unknown line or a version not recorded: nothing to add.
    assert jax_build.line_hint("0.10.2", "0.10.3") == jax_build.line_hint("0.4.30", "0.10.2") == ""
    assert jax_build.line_hint(None, "0.10.2") == ""


def test_a_system_install_keeps_the_machine_s_jax():
    kept = jax_build.without_jax("jax==0.10.2\njax-tqdm==0.4.0\njaxlib==0.10.2\nlibtpu==0.0.42.1\noptax==0.2.6\n")
    assert kept.split() == ["jax-tqdm==0.4.0", "optax==0.2.6"]


def test_a_missing_gpu_names_its_cause_and_the_command_that_mends_it():
    assert "no NVIDIA driver" in jax_build.gpu_missing(["cpu"], "cpu", None)
    cpu_build = jax_build.gpu_missing(["cpu"], "cpu", "580.159.04")
    assert "CPU build" in cpu_build and "nox -s bench -- --accelerator cuda12" in cpu_build
    assert "CUDA plugin's error" in jax_build.gpu_missing(["cpu"], "cuda12", "580.159.04")


def test_runs_record_how_jax_was_installed(monkeypatch):
    monkeypatch.setenv(jax_build.ENV, "cuda12")
    assert provenance.fingerprint()["jax_build"] == "cuda12"
    monkeypatch.delenv(jax_build.ENV)
    assert provenance.fingerprint()["jax_build"] == "own environment"


# ------------------------------------------------------- the nox sessions


class Session:
    """What noxfile's install step asks of a nox session, recorded."""

    def __init__(self, posargs: list[str], backend: str = "virtualenv"):
        self.posargs, self.venv_backend, self.name = posargs, backend, "bench"
        self.env: dict[str, str] = {}
        self.installed: list[tuple] = []
        self.ran: list[tuple] = []
        self.run_options: list[dict] = []
        self.logged: list[str] = []

    def install(self, *args):
        self.installed.append(args)

    def run(self, *args, **kwargs):
        self.ran.append(args)
        self.run_options.append(kwargs)

    def log(self, message):
        self.logged.append(message)

    def error(self, message):
        raise SystemExit(message)


@pytest.fixture(scope="module")
def loaded_noxfile():
    """noxfile.py, loaded once (nox registers its sessions on loading)."""
    spec = importlib.util.spec_from_file_location("noxfile_under_test", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def noxfile(loaded_noxfile, monkeypatch):
    monkeypatch.chdir(ROOT)
    return loaded_noxfile


def _with_machine(monkeypatch, noxfile, driver: str | None, tpu: bool = False):
    """The stand-in for detection: this machine's driver and TPU."""
    real = noxfile._jax_build

    def stood_in():
        module = real()
        module.nvidia_driver = lambda: driver
        module.tpu_present = lambda: tpu
        return module

    monkeypatch.setattr(noxfile, "_jax_build", stood_in)


def test_a_gpu_machine_gets_the_cuda_plugin(noxfile, monkeypatch):
    _with_machine(monkeypatch, noxfile, "580.159.04")
    session = Session(["-k", "ppo"])
    assert noxfile._install(session) == ["-k", "ppo"]
    (installed,) = session.installed
    assert installed[:4] == ("-c", "constraints.txt", "-e", ".[test]")
    assert installed[4:] == ("jax-cuda12-plugin[with-cuda]", "jax-cuda12-pjrt")
    assert session.env[jax_build.ENV] == "cuda12"
    assert "JAX build: cuda12 (NVIDIA driver 580.159.04)" in session.logged


@pytest.mark.parametrize("backend", ["virtualenv", "uv"])
def test_a_cpu_machine_gets_the_cpu_build_and_loses_a_reused_plugin(noxfile, monkeypatch, backend):
    _with_machine(monkeypatch, noxfile, None)
    session = Session([], backend=backend)
    noxfile._install(session)
    assert session.installed == [("-c", "constraints.txt", "-e", ".[test]")]
    (uninstall,) = [args for args in session.ran if "uninstall" in args]
    assert "jax-cuda12-plugin" in uninstall
    # A uv environment has no pip of its own: uv's pip takes the plugin out.
    pip = ("uv", "pip") if backend == "uv" else ("python", "-m", "pip")
    assert uninstall[: len(pip)] == pip
    assert session.env[jax_build.ENV] == "cpu"


def test_the_accelerator_option_overrides_and_is_not_passed_on(noxfile, monkeypatch):
    _with_machine(monkeypatch, noxfile, "580.159.04")
    session = Session(["--accelerator", "cpu", "-k", "ppo"])
    assert noxfile._install(session) == ["-k", "ppo"]
    assert session.env[jax_build.ENV] == "cpu"
    with pytest.raises(SystemExit, match="nox --no-venv -s bench -- --accelerator system"):
        noxfile._install(Session(["--accelerator", "system"]))


def test_the_jax_option_picks_the_line_s_constraints_or_stops_with_why(noxfile, monkeypatch):
    _with_machine(monkeypatch, noxfile, None)
    monkeypatch.setattr(noxfile.sys, "version_info", (3, 12, 1, "final", 0))
    session = Session(["--jax", "0.11", "-k", "ppo"])
    assert noxfile._install(session) == ["-k", "ppo"]
    assert session.installed == [("-c", "constraints-jax0.11.txt", "-e", ".[test]")]
    monkeypatch.setattr(noxfile.sys, "version_info", (3, 11, 7, "final", 0))
    with pytest.raises(SystemExit, match="--jax 0.11 needs Python 3.12 or newer"):
        noxfile._install(Session(["--jax", "0.11"]))
    with pytest.raises(SystemExit, match="--jax takes a JAX line: 0.10, 0.11, 0.12"):
        noxfile._install(Session(["--jax"]))


def test_the_0_12_line_lifts_gymnax_s_cap_with_uv_s_overrides(noxfile, monkeypatch):
    """gymnax 1.0.1 declares jax<0.12: uv installs the line with
    overrides-jax0.12.txt, said at install; pip, which has no overrides,
    stops with one line that says why and what to do."""
    _with_machine(monkeypatch, noxfile, None)
    monkeypatch.setattr(noxfile.sys, "version_info", (3, 12, 1, "final", 0))
    session = Session(["--jax", "0.12"], backend="uv")
    noxfile._install(session)
    assert session.installed == [
        ("-c", "constraints-jax0.12.txt", "--overrides", "overrides-jax0.12.txt", "-e", ".[test]")
    ]
    assert any("gymnax 1.0.1" in line and "jax<0.12" in line for line in session.logged)
    with pytest.raises(SystemExit, match=r"--jax 0.12: gymnax 1.0.1.* only uv can install overrides"):
        noxfile._install(Session(["--jax", "0.12"], backend="virtualenv"))
    # A system install lifts the cap without replacing the machine's JAX.
    monkeypatch.setattr(noxfile.shutil, "which", lambda name: "/usr/bin/uv")
    session = Session(["--jax", "0.12", "--accelerator", "system"], backend="none")
    noxfile._install(session)
    (ran,) = session.ran
    assert ran[:5] == ("uv", "pip", "install", "--python", sys.executable)
    overrides = Path(ran[ran.index("--overrides") + 1]).read_text().split()
    assert overrides == ["jax", "jaxlib"]


def test_the_0_12_line_pins_what_0_11_pins_but_jax():
    """The 0.12 constraints are the 0.11 line's with JAX's packages moved,
    and the overrides name only JAX, at the constraints' versions."""

    def pins(name):
        return dict(e.split("==") for e in (ROOT / name).read_text().split() if "==" in e)

    older, newer = pins("constraints-jax0.11.txt"), pins("constraints-jax0.12.txt")
    moved = {name for name in newer if newer[name] != older.get(name)}
    assert moved == {"jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "libtpu"}
    assert set(older) == set(newer)
    overrides = pins("overrides-jax0.12.txt")
    assert overrides == {"jax": newer["jax"], "jaxlib": newer["jaxlib"]}


def test_the_system_build_installs_around_the_machine_s_jax(noxfile, monkeypatch):
    _with_machine(monkeypatch, noxfile, "580.159.04")
    session = Session(["--accelerator", "system"], backend="none")
    noxfile._install(session)
    assert not session.installed
    (ran,) = session.ran
    constraints = Path(ran[ran.index("-c") + 1]).read_text()
    assert "jax==" not in constraints and "optax==" in constraints
    # The Python nox runs in, not whichever `python` is first on PATH.
    assert ran[0] == sys.executable and ran[1:3] == ("-m", "pip") and ran[-1] == ".[test]"
    assert session.env[jax_build.ENV] == "system"


def test_without_a_package_index_the_system_build_installs_the_project_alone(noxfile, monkeypatch):
    # scripts/accelerator-run --wheels on a machine without network: the
    # wheels went in as they are; nothing is resolved.
    _with_machine(monkeypatch, noxfile, "580.159.04")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    session = Session(["--accelerator", "system", "-k", "ppo"], backend="none")
    assert noxfile._install(session) == ["-k", "ppo"]
    (ran,) = session.ran
    assert ran[0] == sys.executable and "--no-deps" in ran and "-c" not in ran and ran[-1] == "."
    # A JAX line cannot be chosen there: said, not ignored.
    with pytest.raises(SystemExit, match="without a package index"):
        noxfile._install(Session(["--accelerator", "system", "--jax", "0.10"], backend="none"))


@pytest.mark.parametrize("name", ["tests", "bench", "publish"])
def test_a_session_s_program_is_given_time_to_stop_on_sigint(noxfile, monkeypatch, name):
    # Ctrl-C reaches pytest and the harness too: nox must wait for the
    # bench's report and a run's final checkpoint, not kill them 0.3 s on.
    _with_machine(monkeypatch, noxfile, None)
    monkeypatch.setattr(noxfile, "_require_clean_commit", lambda session: None)
    session = Session(
        ["--accelerator", "system", "ppo_cartpole"] if name == "publish" else ["--accelerator", "system"],
        backend="none",
    )
    getattr(noxfile, name).func(session)
    programs = [o for args, o in zip(session.ran, session.run_options, strict=True) if "pip" not in args]
    assert programs and all(o.get("interrupt_timeout", 0) >= 30 for o in programs), programs
