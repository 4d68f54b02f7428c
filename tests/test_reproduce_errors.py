"""One clear message for each reference, run or option `harness reproduce`
and `harness compare` cannot use: the file or run named, exit 2, no
traceback."""

from __future__ import annotations

import copy

import pytest
from mlflow.tracking import MlflowClient
from support import TINY_SPEC, new_store, run_cli, write_spec

from harness import experiment_spec as S


def assert_user_error(code: int, out: str, err: str, *fragments: str) -> None:
    assert code == 2, (out, err)
    assert "Traceback" not in out + err
    flat = " ".join(err.split())  # rich wraps long lines
    for fragment in fragments:
        assert fragment in flat, err


def test_spec_without_a_reference(tmp_path, monkeypatch, tiny_spec_data):
    monkeypatch.chdir(tmp_path)
    write_spec(tmp_path, tiny_spec_data, "tiny.yaml")
    db = tmp_path / "mlflow.db"
    code, out, err = run_cli("reproduce", "tiny.yaml", "--tracking-uri", f"sqlite:///{db}", "--no-progress")
    assert_user_error(
        code, out, err, "tiny.yaml has no reference", "results/tiny.json does not exist", "harness publish"
    )
    assert not db.exists(), "nothing is trained or logged without a reference"


def test_reference_of_another_spec_lists_the_changed_keys(tmp_path, tiny_spec_data, tiny_record):
    reference = tmp_path / "reference.json"
    reference.write_text(tiny_record.to_json())
    tiny_spec_data["optimizer"]["learning_rate"] = 0.001
    path = write_spec(tmp_path, tiny_spec_data)
    code, out, err = run_cli(
        "reproduce", str(path), "--reference", str(reference), "--tracking-uri", f"sqlite:///{tmp_path}/m.db"
    )
    assert_user_error(
        code, out, err, "was made from another spec", "optimizer.learning_rate: 0.003 in the reference, 0.001 now"
    )


@pytest.mark.parametrize("content,fragment", [("{not json", "is not valid JSON"), ('{"spec_hash": "x"}', "missing")])
def test_reference_that_is_not_a_results_record(tmp_path, tiny_spec_data, content, fragment):
    reference = tmp_path / "reference.json"
    reference.write_text(content)
    path = write_spec(tmp_path, tiny_spec_data)
    code, out, err = run_cli("reproduce", str(path), "--reference", str(reference))
    assert_user_error(code, out, err, fragment)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite store for these tests (creating one takes seconds)."""
    uri = new_store(tmp_path_factory.mktemp("store"))
    client = MlflowClient(tracking_uri=uri)
    return uri, client, client.create_experiment("elsewhere")


def test_run_id_that_does_not_exist(store):
    uri, *_ = store
    code, out, err = run_cli("reproduce", "--run-id", "0123456789abcdef", "--tracking-uri", uri)
    assert_user_error(code, out, err, "no run '0123456789abcdef'", uri)


def test_run_without_a_logged_spec(store):
    uri, client, experiment = store
    run_id = client.create_run(experiment).info.run_id
    code, out, err = run_cli("reproduce", "--run-id", run_id, "--tracking-uri", uri)
    assert_user_error(code, out, err, f"run {run_id}", "has no logged spec")


def test_run_with_a_spec_but_no_results(store, tmp_path):
    uri, client, experiment = store
    run_id = client.create_run(experiment).info.run_id
    (tmp_path / "spec.yaml").write_text(S.to_yaml(S.parse(copy.deepcopy(TINY_SPEC))))
    client.log_artifact(run_id, str(tmp_path / "spec.yaml"))
    client.set_terminated(run_id, "FAILED")
    code, out, err = run_cli("reproduce", "--run-id", run_id, "--tracking-uri", uri)
    assert_user_error(code, out, err, f"run {run_id} (FAILED) has no results.json")


def test_run_whose_results_are_of_another_spec(store, tmp_path, tiny_record):
    uri, client, experiment = store
    run_id = client.create_run(experiment).info.run_id
    data = copy.deepcopy(TINY_SPEC)
    data["hyperparameters"]["gamma"] = 0.9
    (tmp_path / "spec.yaml").write_text(S.to_yaml(S.parse(data)))
    (tmp_path / "results.json").write_text(tiny_record.to_json())
    client.log_artifact(run_id, str(tmp_path / "spec.yaml"))
    client.log_artifact(run_id, str(tmp_path / "results.json"))
    code, out, err = run_cli("reproduce", "--run-id", run_id, "--tracking-uri", uri)
    assert_user_error(code, out, err, "was made from another spec", "hyperparameters.gamma: 0.99 in the reference")


@pytest.mark.parametrize(
    "argv,fragment",
    [
        ([], "give either a SPEC file or --run-id"),
        (["spec.yaml", "--run-id", "abc"], "give either a SPEC file or --run-id"),
        (["--run-id", "abc", "--reference", "x.json"], "--reference goes with a SPEC"),
    ],
    ids=["neither", "both", "reference with run id"],
)
def test_reproduce_argument_mistakes(argv, fragment):
    code, out, err = run_cli("reproduce", *argv)
    assert_user_error(code, out, err, fragment)


def test_compare_an_experiment_that_does_not_exist(store):
    uri, *_ = store
    code, out, err = run_cli("compare", "--experiment", "nope", "--tracking-uri", uri)
    assert_user_error(code, out, err, "no experiment 'nope'")


def test_compare_an_experiment_without_finished_runs(store):
    uri, client, _ = store
    experiment = client.create_experiment("unfinished")
    client.create_run(experiment)
    client.set_terminated(client.create_run(experiment).info.run_id, "FAILED")
    code, out, err = run_cli("compare", "--experiment", "unfinished", "--tracking-uri", uri)
    assert_user_error(code, out, err, "has no finished harness runs")


def test_compare_a_run_without_results(store):
    uri, client, experiment = store
    run_id = client.create_run(experiment).info.run_id
    code, out, err = run_cli("compare", run_id, "--tracking-uri", uri)
    assert_user_error(code, out, err, f"run {run_id} (RUNNING) has no results.json")
    code, out, err = run_cli("compare", "--tracking-uri", uri)
    assert_user_error(code, out, err, "give either --experiment NAME or run ids")
