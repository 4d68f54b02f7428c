"""Claims in a spec (`claims:`, harness.experiment_spec.claims.Claim) and their
judging on a results record (harness.judge.claims): parsing and refusing
bad claims with file, key and line; the value, interval and verdict on a
synthetic record; the table's width; and `harness run` / `compare`
printing and recording them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from rich.console import Console
from rich.measure import Measurement
from support import TINY_SPEC, new_store, run_cli, write_spec

from harness import experiment_spec as S
from harness.experiment_spec.claims import Claim
from harness.judge import claims, claims_table, compare
from harness.record import schema
from harness.record.schema import Curves, Results, Speed
from harness.stats import intervals

SEEDS = list(range(8))
RETURNS = [480.0, 490.0, 500.0, 470.0, 300.0, 495.0, 485.0, 476.0]  # per seed, over the final window


def claim(**fields) -> Claim:
    return Claim.model_validate({"metric": "episode_return", **fields})


def record(returns: list[float] = RETURNS, **extra) -> Results:
    """A results record of 8 seeds: final returns `returns`, curves of 4 points."""
    curve = {str(s): [10.0 + s, 100.0, 200.0 + s, returns[s]] for s in SEEDS}
    return Results(
        spec_name="synthetic",
        spec_hash="0" * 64,
        spec={},
        seeds=SEEDS,
        iterations=40,
        env_steps_per_seed=4000,
        per_seed_final={str(s): {"episode_return": returns[s], "loss": 0.1} for s in SEEDS},
        final={"episode_return": float(np.mean(returns)), "loss": 0.1},
        curves=Curves(env_steps=[1000, 2000, 3000, 4000], metrics={"episode_return": curve}),
        speed=Speed(sps=1.0, sps_per_seed=0.125, compile_seconds=1.0),
        fingerprint={},
        versions={},
        git={"commit": "0" * 40, "dirty": "false"},
        **extra,
    )


# ------------------------------------------------------------------ parsing

SPEC_TEXT = S.to_yaml(S.parse(copy.deepcopy(TINY_SPEC)))
CLAIMS_TEXT = """claims:
  solves:
    metric: episode_return
    over_iterations: final
    over_seeds: {fraction_at_least: 475}
    above: 0.5
    outside:
      value: 500
      source: github.com/someone/somewhere
      file: README.md
      line: 12
      configuration: the same PPO at 500k env steps
"""


def test_claims_parse_and_leave_the_hash_and_params_alone():
    plain = S.parse_text(SPEC_TEXT)
    claimed = S.parse_text(SPEC_TEXT + CLAIMS_TEXT)
    solves = claimed.claims["solves"]
    assert (solves.over_seeds.name, solves.over_seeds.value, solves.bound) == (
        "fraction_at_least",
        475.0,
        ("above", 0.5),
    )
    assert solves.outside.line == 12
    assert S.spec_hash(claimed) == S.spec_hash(plain)
    assert S.canonical(claimed) == S.canonical(plain)
    assert not any(key.startswith("claims") for key in S.flatten(S.canonical(claimed)))  # MLflow params
    # Written out (a run's spec.yaml) and read back, and through a JSON dump (a sweep's points).
    assert S.parse_text(S.to_yaml(claimed)) == claimed
    assert S.parse(claimed.model_dump(mode="json")) == claimed


def test_defaults_and_every_statistic_parse():
    assert (claim(at_least=1).over_iterations.name, claim(at_least=1).over_seeds.name) == ("final", "mean")
    for over in ("final", "last", "first", {"mean_last": 0.25}):
        for seeds in ("mean", "iqm", "median", "min", "max", {"fraction_above": 3}, {"fraction_at_least": 3.5}):
            parsed = claim(over_iterations=over, over_seeds=seeds, at_most=1)
            assert Claim.model_validate(parsed.model_dump(mode="json")) == parsed


BAD_CLAIMS = [
    ("    over_seeds: average\n    at_least: 1\n", "claims.c.over_seeds", 4, "not a statistic over seeds"),
    ("    over_seeds: {fraction_at_least: high}\n    at_least: 1\n", "claims.c.over_seeds", 4, "statistic"),
    ("    over_iterations: best\n    at_least: 1\n", "claims.c.over_iterations", 4, "over iterations"),
    ("    over_iterations: {mean_last: 2}\n    at_least: 1\n", "claims.c.over_iterations", 4, "fraction"),
    ("    at_least: '400'\n", "claims.c.at_least", 4, "valid number"),
    ("    at_least: true\n", "claims.c.at_least", 4, "valid number"),
    ("    at_most: [1]\n", "claims.c.at_most", 4, "valid number"),
    ("    over_seeds: mean\n", "claims.c", 2, "exactly one bound"),
    ("    at_least: 1\n    below: 2\n", "claims.c", 2, "exactly one bound"),
    ("    at_least: 1\n    bound: 2\n", "claims.c.bound", 5, "unknown key"),
    ("    at_least: 1\n    outside: {value: 1, source: x}\n", "claims.c.outside.configuration", 5, "missing"),
    (
        "    at_least: 1\n    outside: {value: '1', source: x, configuration: y}\n",
        "claims.c.outside.value",
        5,
        "number",
    ),
    ("    at_least: .nan\n", "claims.c.at_least", 4, "finite number (got nan)"),
    ("    below: -.inf\n", "claims.c.below", 4, "finite number (got -inf)"),
    (
        "    at_least: 1\n    outside: {value: .inf, source: x, configuration: y}\n",
        "claims.c.outside.value",
        5,
        "finite number (got inf)",
    ),
    ("    over_seeds: {fraction_above: .nan}\n    at_least: 1\n", "claims.c.over_seeds", 4, "finite number"),
]


@pytest.mark.parametrize(("body", "key", "line", "message"), BAD_CLAIMS)
def test_bad_claims_are_refused_with_file_key_and_line(body, key, line, message):
    text = SPEC_TEXT + "claims:\n  c:\n    metric: episode_return\n" + body
    first = len(SPEC_TEXT.splitlines())  # the line before `claims:`
    with pytest.raises(S.SpecError) as error:
        S.parse_text(text, "spec.yaml")
    rendered = str(error.value)
    assert rendered.startswith(f"spec.yaml: {key} (line {first + line}): "), rendered
    assert message in rendered


def test_validate_refuses_a_nan_bound_in_one_message(tmp_path):
    path = tmp_path / "nan.yaml"
    path.write_text(SPEC_TEXT + "claims:\n  c: {metric: episode_return, at_least: .nan}\n")
    code, out, err = run_cli("validate", str(path))
    assert code == 2
    assert err.count(str(path)) == 1 and "claims.c.at_least (line " in err and "finite number" in err, err
    assert "Traceback" not in err + out and ".nan" not in out


def test_a_claim_name_that_cannot_be_a_tag_is_refused():
    with pytest.raises(S.SpecError, match=r"claims\.Solves-It \(line \d+\): claim name"):
        S.parse_text(SPEC_TEXT + "claims:\n  Solves-It: {metric: episode_return, at_least: 1}\n", "spec.yaml")


def test_unknown_metrics_are_named_by_key():
    stated = {"a": claim(at_least=1), "b": Claim(metric="episode_retrun", at_least=1)}
    assert claims.unknown_metrics(stated, {"episode_return", "loss"}) == [
        ("claims.b.metric", "'episode_retrun' is not a metric of this spec: episode_return, loss")
    ]


# ----------------------------------------------------------------- judging


def test_mean_claim_holds_with_its_bootstrap_interval():
    outcome = claims.judge(record(), claim(at_least=400))
    assert outcome.value == pytest.approx(np.mean(RETURNS))
    assert outcome.holds and outcome.consistent is None and outcome.seeds == 8
    rng = np.random.RandomState(intervals.RANDOM_STATE)
    means = np.array(RETURNS)[rng.randint(0, 8, size=(intervals.REPS, 8))].mean(axis=1)
    assert (outcome.low, outcome.high) == tuple(np.percentile(means, [2.5, 97.5]))
    assert outcome.low < outcome.value < outcome.high
    assert claims.judge(record(), claim(at_least=500)).holds is False


def test_iqm_interval_is_the_stratified_bootstraps():
    outcome = claims.judge(record(), claim(over_seeds="iqm", at_least=0))
    estimate = intervals.stratified_bootstrap_iqm(np.array(RETURNS))
    assert (outcome.value, outcome.low, outcome.high) == (estimate.point, estimate.low, estimate.high)


@pytest.mark.parametrize(
    ("fields", "value", "holds"),
    [
        ({"over_seeds": {"fraction_at_least": 476}, "above": 0.5}, 6 / 8, True),
        ({"over_seeds": {"fraction_above": 476}, "above": 0.75}, 5 / 8, False),
        ({"over_seeds": "min", "at_least": 400}, 300.0, False),
        ({"over_seeds": "max", "at_most": 500}, 500.0, True),
        ({"over_seeds": "median", "below": 483}, 482.5, True),
        ({"over_iterations": "first", "over_seeds": "max", "below": 20}, 17.0, True),
        ({"over_iterations": "last", "over_seeds": "min", "at_least": 300}, 300.0, True),
        # The last half of 4000 env steps: the points at 3000 and 4000 (seed 4: 204 and 300).
        ({"over_iterations": {"mean_last": 0.5}, "over_seeds": "min", "at_least": 0}, (204 + 300) / 2, True),
    ],
)
def test_statistics_and_bounds(fields, value, holds):
    outcome = claims.judge(record(), claim(**fields))
    assert outcome.value == pytest.approx(value)
    assert outcome.holds is holds
    assert outcome.low <= outcome.value <= outcome.high or fields.get("over_seeds") in ("min", "max")


def test_an_outside_figure_is_consistent_inside_the_interval_only():
    outside = {"source": "a paper", "configuration": "theirs"}
    inside = claims.judge(record(), claim(at_least=0, outside={**outside, "value": 470}))
    assert inside.low <= 470 <= inside.high and inside.consistent is True
    beyond = claims.judge(record(), claim(at_least=0, outside={**outside, "value": 500}))
    assert beyond.high < 500 and beyond.consistent is False


def test_a_metric_the_run_lacks_is_a_claim_error():
    with pytest.raises(claims.ClaimError, match=r"claims\.x\.metric: 'eval_return' is not a final metric"):
        claims.evaluate(record(), {"x": Claim(metric="eval_return", at_least=0)})
    with pytest.raises(claims.ClaimError, match="no curve"):
        claims.evaluate(record(), {"x": Claim(metric="loss", over_iterations="last", at_least=0)})


def test_outcomes_are_recorded_in_results_json_and_mlflow_form():
    stated = {"solves": claim(at_least=400, outside={"value": 470, "source": "s", "configuration": "c"})}
    judged = claims.with_claims(record(), stated)
    again = schema.parse(judged.to_json(), "results.json")
    assert again.claims == judged.claims and claims.stated(again) == stated
    assert claims.with_claims(record(), {}) == record()
    assert schema.parse(record().to_json(), "older results.json").claims is None
    assert "claims" not in json.loads(record().to_json())
    assert claims.tags(again.claims) == {"claim.solves": "holds", "claim.solves.outside": "consistent"}
    assert set(claims.metrics(again.claims)) == {"claim_solves_value", "claim_solves_low", "claim_solves_high"}


def test_compare_judges_every_runs_claims_again():
    stated = {"solves": claim(at_least=450)}
    good = compare.ComparedRun("a" * 32, "good", "0", {}, claims.with_claims(record(), stated))
    # An older run, recorded before claims: judged on the claims of the runs beside it.
    worse = compare.ComparedRun("b" * 32, "worse", "0", {}, record([r - 100 for r in RETURNS]))
    comparison = compare.compare([good, worse], allow_different_specs=False)
    assert comparison.claims["a" * 32]["solves"].holds and not comparison.claims["b" * 32]["solves"].holds
    assert [label for label, _ in claims_table.rows_by_run(comparison.claims)] == [
        f"solves\nrun {'a' * 12}",
        f"solves\nrun {'b' * 12}",
    ]
    assert compare.claim_tags(comparison) == {"claim.solves": "fails"}
    assert compare.claim_tags(compare.compare([good], allow_different_specs=False)) == {"claim.solves": "holds"}


def test_compare_judges_a_test_again_at_its_share_of_the_specs_alpha():
    """Two stated-level tests of one spec, judged again by compare on a run
    recorded before them: each at alpha over two, as `harness run` judges
    them (it judged each at the full alpha before)."""
    stated = {name: claim(at_least=400, delta=50, range=[0, 500]) for name in ("first", "second")}
    judged = claims.with_claims(record(), stated)
    older = compare.ComparedRun("b" * 32, "older", "0", {}, record())
    again = compare.judged_claims([compare.ComparedRun("a" * 32, "new", "0", {}, judged), older])["b" * 32]
    assert {outcome.alpha for outcome in again.values()} == {stated["first"].alpha / 2}
    assert again["first"].alpha == judged.claims["first"].alpha


def _width(table) -> int:
    console = Console(width=10_000)
    return Measurement.get(console, console.options, table).maximum


def test_the_table_fits_80_columns():
    outside = {"value": -123456.789, "source": "a repository", "configuration": "theirs"}
    judged = claims.evaluate(
        record(),
        {
            "most_seeds_solve": claim(over_seeds={"fraction_at_least": 475}, above=0.5),
            "no_worse_than_published": claim(over_iterations={"mean_last": 0.25}, at_least=-1e6, outside=outside),
        },
    )
    table = claims_table.table(list(judged.items()), "ppo_cartpole: claims")
    assert _width(table) <= 80
    long_name = "a_claim_with_a_name_far_longer_than_any_column_of_a_terminal_could_ever_hold"
    rows = [(f"{long_name}\nrun {'f' * 32}", judged["no_worse_than_published"])]
    assert _width(claims_table.table(rows)) <= 80
    console = Console(width=80, record=True)
    console.print(table)
    text = console.export_text()
    assert "most_seeds_solve" in text and "share of seeds ≥ 475, final" in text and "NOT consistent" in text


# -------------------------------------------------- the commands, end to end


def test_unknown_metric_is_refused_before_any_run(tmp_path):
    data = copy.deepcopy(TINY_SPEC) | {"claims": {"solves": {"metric": "eval_return", "at_least": 1}}}
    path = write_spec(tmp_path, data)
    line = path.read_text().splitlines().index("  solves:") + 2
    uri = new_store(tmp_path)
    for command in (["validate", str(path)], ["run", str(path), "--tracking-uri", uri, "--no-progress"]):
        code, out, err = run_cli(*command)
        assert code == 2, (command, out, err)
        assert f"{path}: claims.solves.metric (line {line}): 'eval_return' is not a metric of this spec" in err
    assert MlflowClient(tracking_uri=uri).get_experiment_by_name(TINY_SPEC["name"]) is None


def test_run_and_compare_print_and_record_the_claims(tmp_path):
    data = copy.deepcopy(TINY_SPEC) | {
        "claims": {
            "learns": {"metric": "episode_return", "over_seeds": "mean", "at_least": 1},
            "solves": {"metric": "episode_return", "over_seeds": "min", "at_least": 500},
        }
    }
    path = write_spec(tmp_path, data)
    uri = new_store(tmp_path)
    code, out, err = run_cli("run", str(path), "--tracking-uri", uri, "--no-progress")
    assert code == 0, err
    assert "tiny_reinforce: claims" in out and "holds" in out and "FAILS" in out
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(TINY_SPEC["name"])
    (parent,) = [r for r in client.search_runs([experiment.experiment_id]) if "mlflow.parentRunId" not in r.data.tags]
    assert parent.data.tags["claim.learns"] == "holds" and parent.data.tags["claim.solves"] == "fails"
    assert not any(key.startswith("claims") for key in parent.data.params)
    downloaded = client.download_artifacts(parent.info.run_id, "results.json", str(tmp_path))
    results = json.loads(Path(downloaded).read_text())
    assert results["claims"]["learns"]["holds"] is True and results["claims"]["solves"]["holds"] is False
    assert parent.data.metrics["claim_learns_value"] == pytest.approx(results["claims"]["learns"]["value"])
    assert results["claims"]["learns"]["value"] == pytest.approx(results["final"]["episode_return"])

    code, out, err = run_cli("compare", parent.info.run_id, "--tracking-uri", uri, "--out", str(tmp_path / "c.png"))
    assert code == 0, err
    assert f"run {parent.info.run_id[:12]}" in out and "claims: tiny_reinforce" in out
    comparison = [r for r in client.search_runs([experiment.experiment_id]) if r.info.run_name == "compare · 1 run"]
    assert "verdict" not in comparison[0].data.tags  # statements only: nothing to judge
    assert comparison[0].data.tags["claim.solves"] == "fails"
    assert comparison[0].data.tags["claim.learns"] == "holds"


@pytest.mark.parametrize("bound", [{"at_least": 400}, {"at_least": "reference"}], ids=["stated", "reference"])
def test_the_errors_simulation_builds_the_test_the_judge_runs(monkeypatch, bound):
    """One constructor (levels.test_of) for the judge and the simulation,
    given the faithful seeds alike: a stated level's stakes sized by them in
    both (the simulation passed none and sized them by delta before; this
    failed then)."""
    from harness.judge import errors, levels

    made = []
    test_of = levels.test_of
    monkeypatch.setattr(levels, "test_of", lambda c, f, t=1: made.append(np.shape(f)) or test_of(c, f, t))
    stated = claim(delta=50, range=[0, 500], **bound)
    faithful = np.array(RETURNS * 2, dtype=float)  # 16 faithful seeds
    pool = levels.Faithful(faithful, ("reference",), tuple(range(16)))
    claims.judge_values(stated, np.array(RETURNS, dtype=float), SEEDS, pool)
    errors.simulate(stated, faithful, 8, 16, sims=50)
    judged, *simulated = made
    assert judged == (16,) and simulated and all(shape == (50, 16) for shape in simulated), made
