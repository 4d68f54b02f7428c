"""Host devices: `--host-devices N|cores` / `devices: {host_devices: ...}`
splits a CPU into XLA devices before JAX starts (so in a subprocess here),
and the seeds spread over them unless the spec lays the devices out itself."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path

import pytest
from support import TINY_SPEC, fresh_process, write_spec

from harness import cli
from harness import experiment_spec as S
from harness.run import devices, host_devices

# What `harness run` does with its command line before it trains, in a fresh
# process: the device options, then the plan (no compiling).
SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import jax
    from harness import build, cli
    from harness import experiment_spec as spec
    from harness.cli import options as cli_options
    from harness.run import provenance
    path, *flags = sys.argv[1:]
    args = cli.parser().parse_args(["run", path, *flags])
    plan = build.build(cli_options.with_command_line(spec.load(path), args), path)
    print(json.dumps({"XLA_FLAGS": os.environ.get("XLA_FLAGS", ""), "cpu_devices": len(jax.devices("cpu")),
                      "layout": plan.layout and plan.layout.describe(), "mesh": plan.mesh is not None,
                      "xla_flags": provenance.fingerprint()["xla_flags"]}))
    """
)


def _fresh_process(spec_path: Path, *flags: str) -> dict:
    return fresh_process(SCRIPT, str(spec_path), *flags)


@pytest.mark.parametrize("how", ["option", "spec"])
def test_host_devices_are_set_before_jax_starts_and_the_seeds_spread_over_them(tmp_path, how):
    data = copy.deepcopy(TINY_SPEC)
    if how == "spec":
        data["devices"] = {"host_devices": 2}
    seen = _fresh_process(write_spec(tmp_path, data), *(["--host-devices", "2"] if how == "option" else []))
    flag = f"{host_devices.FLAG}=2"
    # Added to the flags the user gave, which stay, and recorded with the run.
    assert seen["XLA_FLAGS"] == f"--xla_cpu_multi_thread_eigen=true {flag}" == seen["xla_flags"]
    assert seen["cpu_devices"] == 2
    assert seen["layout"] == "seed=2,data=1" and seen["mesh"]


def test_cores_splits_the_host_one_device_per_core(tmp_path):
    data = {**copy.deepcopy(TINY_SPEC), "seeds": [0, 1, 2, 3], "devices": {"host_devices": "cores"}}
    seen = _fresh_process(write_spec(tmp_path, data))
    cores = host_devices.cores()
    assert seen["cpu_devices"] == cores
    spread = host_devices.resolve("cores", 4, devices=cores)
    assert seen["layout"] == (f"seed={spread},data=1" if spread > 1 else None)


def _devices(**kwargs):
    return S.DevicesSpec(**kwargs)


def test_cores_spreads_the_seeds_over_as_many_devices_as_divide_them(monkeypatch):
    monkeypatch.setattr(host_devices, "cores", lambda: 4)
    cases = [(16, 4, 4), (6, 4, 3), (5, 4, 1), (1, 4, 1), (16, 2, 2)]
    for seeds, available, spread in cases:
        layout = devices.resolve(_devices(host_devices="cores"), seeds, available=available, platform="cpu")
        assert layout == devices.Layout(spread, 1), (seeds, available)


def test_the_spec_layout_and_accelerators_leave_host_devices_to_the_cpu_split():
    # A layout of the spec's own is used as it is, on the host devices.
    assert devices.resolve(_devices(host_devices=4, count="all"), 2, 4, "cpu") == devices.Layout(1, 4)
    assert devices.resolve(_devices(host_devices=4, count=2, seed_axis=2), 2, 4, "cpu") == devices.Layout(2, 1)
    # On an accelerator the CPU split does not place anything.
    assert devices.resolve(_devices(host_devices=4), 4, 1, "gpu") == devices.Layout(1, 1)
    assert devices.resolve(_devices(host_devices=2), 4, 2, "cpu") == devices.Layout(2, 1)


@pytest.mark.parametrize(
    "host, seeds, available, message",
    [
        (3, 4, 3, "3 host devices do not divide the 4 seeds"),
        (4, 4, 2, "4 host devices asked for, but this process has 2"),
    ],
)
def test_host_devices_that_cannot_work_are_named(host, seeds, available, message):
    with pytest.raises(devices.LayoutError) as error:
        devices.resolve(_devices(host_devices=host), seeds, available, "cpu")
    assert error.value.key == "devices.host_devices" and message in str(error.value)


def test_a_count_xla_flags_sets_already_is_the_users():
    environ = {"XLA_FLAGS": f"--xla_cpu_multi_thread_eigen=true {host_devices.FLAG}=4"}
    host_devices.enable(4, environ)
    assert environ["XLA_FLAGS"].count(host_devices.FLAG) == 1
    with pytest.raises(host_devices.HostDevicesError, match=f"XLA_FLAGS sets {host_devices.FLAG}=4"):
        host_devices.enable(2, environ)


def test_asked_for_after_jax_started_is_one_clear_error(tmp_path, capsys):
    import jax

    started = len(jax.devices("cpu"))  # this process's devices are up
    path = write_spec(tmp_path, copy.deepcopy(TINY_SPEC))
    tracking = f"sqlite:///{tmp_path}/m.db"
    for option, message in (
        (["--host-devices", "many"], "--host-devices takes a number or cores, not 'many'"),
        (["--host-devices", "0"], "--host-devices: host_devices must be at least 1, or cores"),
        (
            ["--host-devices", str(started + 1)],
            f"devices.host_devices: {started + 1} host devices are set before JAX starts its devices, and this"
            f" process has started {started} already",
        ),
    ):
        code = cli.main(["run", str(path), "--no-progress", "--tracking-uri", tracking, *option])
        err = capsys.readouterr().err
        assert code == 2 and message in " ".join(err.split()), err
        assert "Traceback" not in err
    assert not (tmp_path / "m.db").exists()  # refused before any run was created
