"""Judging a reproduction against a reference, and where references live.
The messages for what cannot be used are in test_reproduce_errors.py,
end-to-end runs through `harness reproduce` against a real MLflow server
in test_reproduce_e2e.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from support import TINY_SPEC, record_of, train

from harness import experiment_spec as S
from harness.judge import machines, references, reproduce, verdict_report

# ------------------------------------------------------------------- judging


def test_the_same_record_is_judged_exact_and_passes(tiny_record):
    verdict = reproduce.judge(tiny_record, tiny_record.model_copy(deep=True), "reference.json")
    assert verdict.mode == "exact" and verdict.not_exact_because == []
    assert verdict.passed and all(m.passed and m.gates for m in verdict.metrics)
    assert {m.name for m in verdict.metrics} == set(tiny_record.final)


def test_a_planted_change_of_one_seeds_curve_fails_the_exact_verdict(tiny_record):
    reference = tiny_record.model_copy(deep=True)
    curve = reference.curves.metrics["episode_return"]["1"]
    curve[7] = curve[7] + 1e-3
    verdict = reproduce.judge(reference, tiny_record, "reference.json")
    assert verdict.mode == "exact" and not verdict.passed
    failed = [m for m in verdict.metrics if not m.passed]
    assert [m.name for m in failed] == ["episode_return"]
    step = tiny_record.curves.env_steps[7]
    assert failed[0].first_difference["seed"] == 1 and failed[0].first_difference["env_step"] == step
    assert f"seed 1 differs first at env step {step}" in failed[0].detail
    # The interval barely moves: bit for bit, not statistics, decides here.
    assert "statistically, intervals overlap" in failed[0].detail


def test_a_changed_final_value_fails_the_exact_verdict(tiny_record):
    reference = tiny_record.model_copy(deep=True)
    reference.per_seed_final["0"]["loss"] += 1e-6
    verdict = reproduce.judge(reference, tiny_record, "reference.json")
    failed = {m.name: m for m in verdict.metrics if not m.passed}
    assert list(failed) == ["loss"] and "the final value" in failed["loss"].detail


@pytest.mark.parametrize(
    "where,key,value,reason",
    [
        ("fingerprint", "cpu_model", "Some Other CPU", "device.cpu_model"),
        # The same model name, another generation (a VM's "AMD EPYC"): no AVX-512.
        ("fingerprint", "cpu_isa", "AuthenticAMD family 25 model 1: avx avx2 fma", "device.cpu_isa"),
        ("fingerprint", "device_count", "4", "device.device_count"),
        ("versions", "jaxlib", "0.0.1", "jaxlib 0.0.1 in the reference"),
    ],
)
def test_another_machine_or_version_is_judged_statistically(tiny_record, where, key, value, reason):
    reference = tiny_record.model_copy(deep=True)
    getattr(reference, where)[key] = value
    verdict = reproduce.judge(reference, tiny_record, "reference.json")
    assert verdict.mode == "statistical" and any(reason in r for r in verdict.not_exact_because)
    assert verdict.passed
    assert [m.name for m in verdict.metrics if m.gates] == ["episode_return"]


def test_a_reference_on_another_jax_line_names_the_line_to_install(tiny_record):
    reference, record = tiny_record.model_copy(deep=True), tiny_record.model_copy(deep=True)
    reference.versions["jax"], record.versions["jax"] = "0.11.2", "0.10.2"
    reasons = reproduce.judge(reference, record, "reference.json").not_exact_because
    assert "jax 0.11.2 in the reference, 0.10.2 here (the reference is on the jax 0.11 line: install " in reasons[0]


def test_the_host_name_does_not_matter(tiny_record):
    reference = tiny_record.model_copy(deep=True)
    reference.fingerprint["host"] = "another-box"
    verdict = reproduce.judge(reference, tiny_record, "reference.json")
    assert verdict.mode == "exact" and verdict.speed.hardware == "same machine"


def test_exact_layouts_are_judged_bit_for_bit_across_data_devices(tiny_record):
    """Records of one spec on exact layouts (the same `devices.shards`): a
    reference on the plain program judges a reproduction on 4 simulated
    data devices bit for bit; other shards, a split seed axis or another XLA
    flag do not."""
    reference = tiny_record.model_copy(deep=True)
    record = tiny_record.model_copy(deep=True)
    reference.fingerprint.update(shards="8", mesh="none", device_count="1", local_device_count="1", xla_flags="")
    record.fingerprint.update(
        shards="8",
        mesh="seed=1,data=4",
        device_count="4",
        local_device_count="4",
        xla_flags="--xla_force_host_platform_device_count=4",
    )
    assert reproduce.not_exact_because(reference, record) == []
    for key, value, reason in (
        ("shards", "4", "device.shards"),
        ("mesh", "seed=2,data=2", "device.mesh"),
        ("xla_flags", "--xla_force_host_platform_device_count=4 --xla_cpu_enable_fast_math=true", "device.xla_flags"),
    ):
        changed = record.model_copy(deep=True)
        changed.fingerprint[key] = value
        assert [r for r in reproduce.not_exact_because(reference, changed) if reason in r], key
    # Without shards, the layout is part of the exact fingerprint.
    del reference.fingerprint["shards"], record.fingerprint["shards"]
    reasons = reproduce.not_exact_because(reference, record)
    assert any("device.mesh" in r for r in reasons) and any("device.device_count" in r for r in reasons)


@pytest.mark.parametrize("key", ["cpu_model", "cpu_isa"])
def test_a_reference_without_the_cpu_model_or_isa_is_not_judged_bit_for_bit(tiny_record, key):
    reference = tiny_record.model_copy(deep=True)
    del reference.fingerprint[key]
    verdict = reproduce.judge(reference, tiny_record, "reference.json")
    assert verdict.not_exact_because == [f"device.{key} is not recorded in the reference"]


def test_speed_is_reported_with_both_devices_and_never_judged(tiny_record):
    reference = tiny_record.model_copy(deep=True)
    reference.fingerprint.update(platform="gpu", device_kind="NVIDIA A100", host="gpu-box")
    reference.speed.sps = tiny_record.speed.sps * 100
    verdict = reproduce.judge(reference, tiny_record, "reference.json")
    assert verdict.passed, "a 100x slower reproduction is not a failure"
    assert verdict.speed.hardware == "another machine: device_kind NVIDIA A100 -> cpu"
    text = verdict.speed.describe()
    assert "1x NVIDIA A100 on gpu-box" in text and "cpu (" in text and "0.01x" in text and "not judged" in text
    logged = verdict_report.to_dict(verdict)["speed"]
    assert logged["judged"] is False and logged["ratio"] == pytest.approx(0.01)


# The published CPU references' machine (a VM's "AMD EPYC", Zen 3) and a
# Zen 4 that calls itself the same, with AVX-512.
ZEN3_ISA = "AuthenticAMD family 25 model 1: adx avx avx2 bmi1 bmi2 f16c fma sha_ni sse sse2 sse4_1 sse4_2 ssse3 vaes"
ZEN4_ISA = ZEN3_ISA.replace("model 1:", "model 17:") + " avx512bw avx512f avx512vl"
ZEN3 = {
    "platform": "cpu",
    "device_kind": "cpu",
    "device_count": "1",
    "host": "vm",
    "cpu": "x86_64",
    "cpu_model": "AMD EPYC",
    "cpu_isa": ZEN3_ISA,
}


def changed(**keys: str | None) -> dict[str, str]:
    """ZEN3's fingerprint with `keys` set (None: left out)."""
    out = {**ZEN3, **keys}
    return {key: value for key, value in out.items() if value is not None}


@pytest.mark.parametrize(
    "reproduction,said",
    [
        (changed(host="another-vm", cpu="amd64"), "same machine"),
        (changed(cpu_isa=ZEN4_ISA), "another machine: cpu_isa avx2 -> avx512"),
        (
            changed(cpu_isa=ZEN3_ISA.replace("model 1:", "model 17:")),
            "another machine: cpu_isa family 25 model 1 -> family 25 model 17",
        ),
        (changed(cpu_isa=ZEN3_ISA + " gfni vpclmulqdq"), "another machine: cpu_isa +gfni +vpclmulqdq"),
        (changed(cpu_isa=ZEN3_ISA.replace(" sha_ni", "") + " a b c"), "another machine: cpu_isa +a +b +c ..."),
        (changed(device_count="4"), "another machine: device_count 1 -> 4"),
        # Another model name says enough: its instruction set is not named too.
        (
            changed(cpu_model="Intel(R) Xeon(R) Processor", cpu_isa="GenuineIntel family 6 model 207: avx512f"),
            "another machine: cpu_model AMD EPYC -> Intel(R) Xeon(R) Processor",
        ),
        (
            changed(platform="gpu", device_kind="NVIDIA H100 80GB HBM3"),
            "another machine: device_kind cpu -> NVIDIA H100 80GB HBM3",
        ),
        (changed(cpu_isa=None), "another machine: cpu_isa avx2 -> ?"),
    ],
)
def test_same_machine_only_where_what_decides_speed_agrees(reproduction, said):
    assert machines.same_machine(ZEN3, reproduction) == said


def test_a_key_neither_records_is_not_taken_as_agreement():
    assert (
        machines.same_machine(changed(cpu_isa=None), changed(cpu_isa=None)) == "another machine: cpu_isa not recorded"
    )


def test_a_cpu_is_labelled_by_its_model_and_vector_level():
    assert machines.device_label(ZEN3) == "1x cpu (AMD EPYC, avx2) on vm"
    assert machines.device_label(changed(cpu_isa=ZEN4_ISA)) == "1x cpu (AMD EPYC, avx512) on vm"
    assert machines.device_label(changed(cpu_isa=None)) == "1x cpu (AMD EPYC) on vm"


def test_the_speed_line_names_another_cpu_generation():
    speed = reproduce.Speed(
        reference_sps=1000.0,
        reproduction_sps=2100.0,
        reference_seeds=8,
        reproduction_seeds=8,
        reference_compile_seconds=3.0,
        reproduction_compile_seconds=2.0,
        reference_device=machines.device_label(ZEN3),
        reproduction_device=machines.device_label(changed(cpu_isa=ZEN4_ISA)),
        hardware=machines.same_machine(ZEN3, changed(cpu_isa=ZEN4_ISA)),
    )
    assert "2.10x, another machine: cpu_isa avx2 -> avx512; compile" in speed.describe()
    assert "same machine" not in speed.describe()


def test_statistical_verdict_fails_when_the_learning_rate_is_broken(tiny_record):
    data = copy.deepcopy(TINY_SPEC)
    data["seeds"] = [2, 3, 4, 5]
    data["optimizer"]["learning_rate"] = 1e-6  # the agent cannot learn in 80 iterations
    broken = record_of(*train(data))
    verdict = reproduce.judge(tiny_record, broken, "reference.json")
    assert verdict.mode == "statistical" and not verdict.passed
    by_name = {m.name: m for m in verdict.metrics}
    ret = by_name["episode_return"]
    assert not ret.passed and ret.gates
    assert ret.reproduction.high < ret.reference.low
    assert "reproduction below the reference" in ret.detail
    tags = verdict_report.verdict_tags(verdict)
    assert (
        verdict.outcome == "fail" and tags["verdict.episode_return"] == "fail" and tags["verdict.mode"] == "statistical"
    )
    markdown = verdict_report.to_markdown(verdict)
    assert "FAIL (episode_return)" in markdown and "| episode_return | yes |" in markdown


def test_one_seed_on_a_side_gives_no_statistical_verdict(tiny_record):
    """A one-seed interval is a point that other bits would miss: with one
    seed on either side a statistical verdict is "not judged" and says which
    side; bit for bit, one seed is judged as any other."""
    one = tiny_record.model_copy(deep=True)
    one.seeds = one.seeds[:1]
    elsewhere = one.model_copy(deep=True)
    elsewhere.fingerprint["cpu_isa"] = "AuthenticAMD family 25 model 1: avx avx2 fma"
    verdict = reproduce.judge(elsewhere, one, "reference.json")
    assert verdict.mode == "statistical" and not verdict.passed and verdict.outcome == "not judged"
    assert verdict.not_judged.startswith("1 seed in the reference and 1 seed in the reproduction: ")
    assert "NOT JUDGED" in verdict_report.headline(
        verdict
    ) and "Not judged statistically" in verdict_report.to_markdown(verdict)
    assert verdict_report.to_dict(verdict)["verdict"] == verdict.outcome == "not judged"
    assert reproduce.judge(elsewhere, tiny_record, "reference.json").not_judged.startswith("1 seed in the reference:")
    exact = reproduce.judge(one, one, "reference.json")
    assert exact.mode == "exact" and exact.passed and not exact.not_judged


def test_verdict_json_is_complete(tiny_record):
    verdict = verdict_report.to_dict(reproduce.judge(tiny_record, tiny_record, "results/tiny.json"))
    assert verdict["verdict"] == "pass" and verdict["mode"] == "exact" and "bit-identical" in verdict["rule"]
    ret = verdict["metrics"]["episode_return"]
    assert (
        ret["reference"]["n"] == 2 and ret["reference"]["low"] <= ret["reference"]["point"] <= ret["reference"]["high"]
    )
    json.dumps(verdict)


# ---------------------------------------------------------------- references


def test_reference_path_is_beside_experiments(tmp_path, monkeypatch):
    (tmp_path / "experiments").mkdir()
    monkeypatch.chdir(tmp_path / "experiments")
    assert references.reference_path("x.yaml") == Path("../results/x.json")
    monkeypatch.chdir(tmp_path)
    assert references.reference_path("experiments/x.yaml") == Path("results/x.json")
    assert references.reference_path("elsewhere/x.yaml") == Path("results/x.json")


def test_published_specs_have_their_references_where_reproduce_looks():
    root = Path(__file__).resolve().parent.parent
    for spec_path in (root / "experiments").glob("*.yaml"):
        loaded = S.load(spec_path)
        path = references.reference_path(spec_path)
        reference = references.load_reference(path, str(spec_path), S.spec_hash(loaded), S.canonical(loaded))
        assert reference.spec_hash == S.spec_hash(loaded)
