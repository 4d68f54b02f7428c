"""Deterministic mode: `--deterministic` / `devices: {deterministic: true}`
sets XLA's deterministic-ops flag before JAX starts (so in a subprocess
here), the fingerprint records it, and `harness reproduce` knows what it
means on each platform."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path

import jax
import pytest
from support import TINY_SPEC, fresh_process, run_cli, write_spec

from harness.judge import reproduce
from harness.run import determinism

# What the harness does with a command line before it builds the plan, then
# the fingerprint a run records: in a fresh process, as `harness run` has.
SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from harness import cli
    from harness import experiment_spec as spec
    from harness.cli import options as cli_options
    from harness.run import determinism, provenance
    path, *flags = sys.argv[1:]
    args = cli.parser().parse_args(["run", path, *flags])
    cli_options.with_command_line(spec.load(path), args)
    fingerprint = provenance.fingerprint()
    print(json.dumps({"XLA_FLAGS": os.environ.get("XLA_FLAGS", ""), "xla_flags": fingerprint["xla_flags"],
                      "note": determinism.run_note(fingerprint)}))
    """
)


def _fresh_process(spec_path: Path, *flags: str) -> dict:
    return fresh_process(SCRIPT, str(spec_path), *flags)


@pytest.mark.parametrize("how", ["option", "spec"])
def test_deterministic_reaches_xla_flags_and_the_fingerprint(tmp_path, how):
    data = copy.deepcopy(TINY_SPEC)
    if how == "spec":
        data["devices"] = {"deterministic": True}
    seen = _fresh_process(write_spec(tmp_path, data), *(["--deterministic"] if how == "option" else []))
    # Added to the flags the user gave, which stay.
    assert seen["XLA_FLAGS"] == f"--xla_cpu_multi_thread_eigen=true {determinism.FLAG}"
    assert seen["xla_flags"] == seen["XLA_FLAGS"]
    if jax.default_backend() == "cpu":
        assert "a cpu run is run-to-run deterministic already" in seen["note"]
    else:  # the flag is what makes a GPU run deterministic: nothing to say
        assert seen["note"] is None


def test_without_it_nothing_is_added(tmp_path):
    seen = _fresh_process(write_spec(tmp_path, copy.deepcopy(TINY_SPEC)))
    assert seen["xla_flags"] == "--xla_cpu_multi_thread_eigen=true" and seen["note"] is None


def test_asked_for_after_jax_started_is_one_clear_error(tmp_path):
    jax.devices()  # this process's backends are up
    data = copy.deepcopy(TINY_SPEC)
    data["devices"] = {"deterministic": True}
    spec_path = write_spec(tmp_path, data)
    code, out, err = run_cli("run", str(spec_path), "--tracking-uri", f"sqlite:///{tmp_path}/m.db", "--no-progress")
    assert code == 2 and "Traceback" not in err
    assert "run the command in a new process" in " ".join(err.split())
    assert not (tmp_path / "m.db").exists(), "nothing is logged for a run that cannot start"
    # Already set (as the fresh process above sets it): nothing to do.
    environ = {"XLA_FLAGS": determinism.FLAG}
    determinism.enable(environ)
    assert environ == {"XLA_FLAGS": determinism.FLAG}


def test_the_flag_is_read_in_its_spellings():
    assert determinism.is_on("--xla_gpu_deterministic_ops=true")
    assert determinism.is_on("--a=1 --xla_gpu_deterministic_ops --b=2")
    assert not determinism.is_on("--xla_gpu_deterministic_ops=false")
    assert not determinism.is_on("")
    assert determinism.without_flag("--a=1 --xla_gpu_deterministic_ops=true --b=2") == "--a=1 --b=2"


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="a CPU's record; the GPU case is the next test")
def test_on_a_cpu_the_flag_does_not_stand_between_a_reproduction_and_an_exact_verdict(tiny_record):
    with_flag = tiny_record.model_copy(deep=True)
    with_flag.fingerprint["xla_flags"] = f"{tiny_record.fingerprint['xla_flags']} {determinism.FLAG}".strip()
    assert reproduce.judge(tiny_record, with_flag, "reference.json").mode == "exact"
    assert reproduce.judge(with_flag, tiny_record, "reference.json").mode == "exact"


def test_on_a_gpu_an_exact_verdict_needs_deterministic_ops_on_both_sides(tiny_record):
    def on_gpu(flags: str):
        record = tiny_record.model_copy(deep=True)
        record.fingerprint.update(platform="gpu", device_kind="NVIDIA H100 80GB HBM3", xla_flags=flags)
        return record

    plain, deterministic = on_gpu(""), on_gpu(determinism.FLAG)
    reasons = reproduce.not_exact_because(plain, plain)
    assert len(reasons) == 1 and "an exact verdict on a GPU needs deterministic ops" in reasons[0]
    assert "harness reproduce --deterministic" in reasons[0]
    assert reproduce.not_exact_because(deterministic, deterministic) == []
    # A reference made without them: the flags differ, which says why.
    assert any("device.xla_flags" in r for r in reproduce.not_exact_because(plain, deterministic))
