"""`harness reproduce --adaptive` end to end on the tiny spec with a test
claim: fresh seeds after every faithful record's, batches that reuse one
compiled program, the verdict and its evidence on the last batch's MLflow
run; `--set` naming what it changed; bad options refused before anything
runs; `harness validate --errors` writing its record."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from support import TINY_SPEC, new_store, run_cli, write_spec

# A delta far below the tiny run's spread across seeds: no batch can decide it, so the
# reproduction adds its second batch and stops INCONCLUSIVE at the cap the spec states
# (batches of 2 seeds, up to 4). The reference has the 16 faithful seeds a test needs,
# trained 20 iterations (one chunk, as the tiny spec's): no assertion reads how far.
UNDECIDABLE = {
    "seeds": list(range(16)),
    "budget": {"env_steps": 20 * 16 * 32},
    "reproduction": {"batch": 2, "max_seeds": 4},
    "claims": {
        "learns": {
            "metric": "episode_return",
            "over_seeds": "mean",
            "at_least": "reference",
            "delta": 0.5,
            "range": [0, 500],
        }
    },
}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """The tiny spec with a test claim, run and published beside it as
    experiments/ and results/, in its own working directory and store."""
    root = tmp_path_factory.mktemp("adaptive")
    (root / "experiments").mkdir()
    spec = write_spec(root / "experiments", {**TINY_SPEC, **UNDECIDABLE}, "tiny.yaml")
    uri = new_store(root)
    previous = os.getcwd()
    os.chdir(root)
    try:
        assert run_cli("run", str(spec), "--tracking-uri", uri, "--no-progress")[0] in (0, 4)
        code, out, err = run_cli("publish", str(spec), "--tracking-uri", uri, "--out", "results/tiny.json")
        assert code == 0, out + err
        yield root, spec, uri
    finally:
        os.chdir(previous)


@pytest.fixture(scope="module")
def adaptive(published):
    root, spec, uri = published
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(TINY_SPEC["name"]).experiment_id
    before = {r.info.run_id for r in client.search_runs([experiment])}
    code, out, err = run_cli("reproduce", str(spec), "--adaptive", "--tracking-uri", uri, "--no-progress")
    new = [r for r in client.search_runs([experiment]) if r.info.run_id not in before]
    (reproduction,) = [r for r in new if "mlflow.parentRunId" not in r.data.tags]
    batches = [r for r in new if r.data.tags.get("mlflow.parentRunId") == reproduction.info.run_id]
    return (
        code,
        " ".join(out.split()),
        err,
        [reproduction, *sorted(batches, key=lambda r: r.data.tags["adaptive.batch"])],
    )


def test_an_undecided_reproduction_adds_batches_to_the_cap_and_exits_4(adaptive):
    code, out, err, runs = adaptive
    assert code == 4, out + err
    assert "batch 1, 2 seeds" in out and "batch 2, 4 seeds" in out
    # Each test's evidence beside the bound that decides it: log(1/0.2) to pass, log(1/0.01) to fail.
    assert re.search(r"learns INCONCLUSIVE pass -?\d+\.\d\d of 1\.61 fail -?\d+\.\d\d of 4\.61", out), out
    assert "INCONCLUSIVE after 4 fresh seeds (16-19" in out  # after the reference's seeds 0 to 15
    assert [r.data.tags["adaptive.seeds"] for r in runs[1:]] == ["16-17", "18-19"]


def test_later_batches_reuse_the_compiled_programs(adaptive):
    _, _, _, (reproduction, *batches) = adaptive
    first, second = (r.data.metrics["compile_seconds"] for r in batches)
    assert first > 0 and second < first / 100  # found again, not compiled
    assert int(reproduction.data.tags["adaptive.compiles"]) >= 2  # the init and the chunk, once each


def test_the_reproductions_one_run_carries_the_verdict_and_its_evidence(adaptive, published):
    _, _, _, runs = adaptive
    assert runs[0].info.status == "FINISHED" and all("verdict" not in r.data.tags for r in runs[1:])
    last = runs[0].data.tags
    assert last["verdict"] == "inconclusive" and last["adaptive.seeds_used"] == "4"  # the guide's filters match it
    assert last["claim.learns"] == "inconclusive"
    assert last["claim.learns.alpha"] == "0.01" and last["claim.learns.delta"] == "0.5"
    client = MlflowClient(tracking_uri=published[2])
    history = client.get_metric_history(runs[0].info.run_id, "adaptive_learns_against_faithful")
    assert [m.step for m in history] == [2, 4]
    to_fail = client.get_metric_history(runs[0].info.run_id, "adaptive_learns_evidence_to_fail")
    bound = client.get_metric_history(runs[0].info.run_id, "adaptive_learns_fail_bound")
    assert [m.value for m in to_fail] == [m.value for m in history] and {m.value for m in bound} == {np.log(100)}


def test_the_runs_table_shows_the_verdict_and_the_guides_filter_finds_it(adaptive, published):
    """Without configuring the UI: the reproduction is one run, named by its
    command and verdict, its page opening on the verdict table, its batches
    nested under it and its seeds under them, each naming itself; and
    `tags.verdict = '...'` finds the reproduction's run."""
    _, _, _, (last, first, _) = adaptive
    client = MlflowClient(tracking_uri=published[2])
    assert last.info.run_name == "reproduce · INCONCLUSIVE"
    assert first.info.run_name == "batch 1 · seeds 16-17"
    note = last.data.tags["mlflow.note.content"]
    assert note.startswith("verdict: INCONCLUSIVE after 4 fresh seeds") and "| `learns` (episode_return) |" in note
    children = client.search_runs(
        [first.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{first.info.run_id}'"
    )
    assert sorted(c.info.run_name for c in children) == [
        "seed=16 · batch 1 · seeds 16-17",
        "seed=17 · batch 1 · seeds 16-17",
    ]
    found = client.search_runs([first.info.experiment_id], filter_string="tags.verdict = 'inconclusive'")
    assert last.info.run_id in {r.info.run_id for r in found} and first.info.run_id not in {
        r.info.run_id for r in found
    }


def test_a_changed_spec_is_judged_with_its_changes_named(published):
    root, spec, uri = published
    code, out, err = run_cli(
        "reproduce", str(spec), "--adaptive", "--set", "optimizer.learning_rate=0.0003",
        "--batch", "2", "--max-seeds", "2", "--tracking-uri", uri, "--no-progress",
    )  # fmt: skip
    flat = " ".join(out.split())
    # Two seeds can neither FAIL nor PASS it: each seed's bet at most about doubles the evidence, and
    # the bounds are 100 (alpha 1%) and 5 (power 80%) away, so it ends INCONCLUSIVE on any machine.
    assert code == 4, out + err
    assert "optimizer.learning_rate: 0.003 -> 0.0003" in flat and "INCONCLUSIVE after 2 fresh seeds" in flat


@pytest.mark.parametrize(
    "options, message",
    [
        (["--adaptive", "--batch", "0"], "--batch must be at least 1"),
        (["--adaptive", "--batch", "4", "--max-seeds", "2"], "--max-seeds (2) is below one batch (--batch 4)"),
        (["--set", "optimizer.learning_rate=1"], "add --adaptive"),
        (["--adaptive", "--seeds", "7"], "leave out --run-id and --seeds"),
        (["--adaptive", "--set", "seeds.count=3"], "tiny.yaml (--set): seeds.count: an adaptive reproduction runs"),
        (["--adaptive", "--set", "budget.env_steps.x=3"], "(--set): budget.env_steps.x: budget.env_steps is not a"),
        (["--adaptive", "--results-out", "experiments/tiny.yaml"], "is a file; an adaptive reproduction writes"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(published, options, message):
    _, spec, uri = published
    client = MlflowClient(tracking_uri=uri)

    def runs() -> int:
        return len(client.search_runs([e.experiment_id for e in client.search_experiments()]))

    before = runs()
    code, out, err = run_cli("reproduce", str(spec), *options, "--tracking-uri", uri)
    assert code == 2 and message in " ".join(err.split()) and "Traceback" not in err
    assert runs() == before  # nothing run


def test_a_bit_identical_plain_reproduction_passes_whatever_its_claims_can_decide(published):
    """Its own 16 seeds leave the claim no faithful seeds (untested), but the
    run is the reference's bits on the same machine: a PASS, exit 0."""
    _, spec, uri = published
    code, out, err = run_cli("reproduce", str(spec), "--tracking-uri", uri, "--no-progress")
    flat = " ".join(out.split())
    assert code == 0, out + err
    assert "rule (exact)" in flat and "verdict: PASS" in flat


def test_validate_measures_the_claims_errors(published, tmp_path):
    _, spec, _ = published
    out_file = tmp_path / "errors.json"
    code, out, err = run_cli("validate", str(spec), "--errors", "--errors-out", str(out_file))
    assert code == 0, out + err
    record = json.loads(out_file.read_text())
    row = record["claims"]["learns"]
    assert row["faithful_seeds"] == 16 and set(row["faithful"]) >= {"resampled", "smoothed", "wider"}
    assert row["alpha"] == 0.01 and record["alpha_per_reproduction"] == 0.01 and record["tests"] == 1
    assert (row["batch"], row["cap"]) == (2, 4)  # the spec's reproduction section, simulated
    assert record["claims_hash"] and record["rules"] and "learns" in out and "too weak" in out


def test_frozen_claims_are_confirmed_by_the_seeds_recorded_after(published, tmp_path):
    """`validate --freeze` names the seeds the claim was designed on; the
    faithful batches an adaptive reproduction records after it confirm the
    claim, and `--errors` says which are which. Freezing the same claims
    again is refused: it would make confirming seeds design seeds."""
    root, spec, uri = published
    code, out, err = run_cli("validate", str(spec), "--freeze")
    assert code == 0 and (root / "results" / "frozen" / "tiny.json").exists(), out + err
    code, _, err = run_cli("validate", str(spec), "--freeze")
    assert code == 2 and "already freezes these claims" in " ".join(err.split())
    argv = ["reproduce", str(spec), "--adaptive", "--results-out", "results/unseen", "--tracking-uri", uri]
    assert run_cli(*argv, "--no-progress")[0] in (0, 4)
    out_file = tmp_path / "errors.json"
    code, out, err = run_cli("validate", str(spec), "--errors", "--errors-out", str(out_file))
    row = json.loads(out_file.read_text())["claims"]["learns"]
    assert code == 0 and row["design_seeds"] == "0-15" and row["confirming_seeds"].startswith("16-"), row
    assert "designed on seeds 0-15, confirmed on 16-" in " ".join(out.split())


def test_a_freeze_holds_under_rules_that_design_alike_and_not_under_others(published):
    """A freeze made under an earlier version of the test rules that designs
    claims alike (verdict.SAME_DESIGNS: 3 changed only how ranks break
    ties) still holds; under any other version the claims start again."""
    from harness import experiment_spec as S
    from harness.sessions import freeze
    from harness.stats import verdict

    root, spec, _ = published
    loaded = S.load(spec)
    made = freeze.record(loaded, spec)
    assert freeze.current(made, loaded) and made["rules"] == verdict.RULES
    assert all(freeze.current({**made, "rules": rules}, loaded) for rules in verdict.SAME_DESIGNS)
    assert not freeze.current({**made, "rules": "1"}, loaded)
