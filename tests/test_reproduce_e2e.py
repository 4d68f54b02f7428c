"""`harness reproduce` and `harness compare` end to end, against a real
`mlflow server` on 127.0.0.1 (SQLite backend, proxied artifacts).

One tiny run is made and published as the reference; the module's fixtures
then reproduce it through each path once, and the tests read what those
reproductions printed and logged.
"""

from __future__ import annotations

import copy
import json
import os
import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mlflow.tracking import MlflowClient
from support import TINY_SPEC, run_cli, write_spec

from harness import cli
from harness.judge import compare, compare_report, differences
from harness.record import tracking


@pytest.fixture(scope="module", autouse=True)
def _in_a_scratch_directory(tmp_path_factory):
    """With a server's URI, run directories go to checkpoints/ in the
    working directory: keep them out of the repository."""
    previous = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    try:
        yield
    finally:
        os.chdir(previous)


class Reproduction:
    """What one `harness reproduce` printed and its logged parent run."""

    def __init__(self, client: MlflowClient, code: int, out: str, err: str, before: set[str]):
        self.code, self.out, self.err = code, out, err
        self.flat = " ".join(out.split())  # rich wraps long lines
        experiment = client.get_experiment_by_name(TINY_SPEC["name"])
        parents = [
            r
            for r in client.search_runs([experiment.experiment_id])
            if "mlflow.parentRunId" not in r.data.tags and r.info.run_id not in before
        ]
        assert len(parents) == 1, (out, err)
        self.run = parents[0]
        self.tags = self.run.data.tags

    def artifact(self, client: MlflowClient, name: str) -> str:
        return tracking.read_text_artifact(client, self.run.info.run_id, name)


def _parent_ids(client: MlflowClient) -> set[str]:
    experiment = client.get_experiment_by_name(TINY_SPEC["name"])
    return {r.info.run_id for r in client.search_runs([experiment.experiment_id])} if experiment else set()


@pytest.fixture(scope="module")
def published(server, tmp_path_factory):
    """The tiny spec run once into the server and published as its reference."""
    server = server.uri
    tmp = tmp_path_factory.mktemp("published")
    spec = write_spec(tmp, TINY_SPEC, "tiny.yaml")
    assert cli.main(["run", str(spec), "--tracking-uri", server, "--no-progress"]) == 0
    reference = tmp / "reference.json"
    assert cli.main(["publish", str(spec), "--tracking-uri", server, "--out", str(reference)]) == 0
    return spec, reference, json.loads(reference.read_text()), MlflowClient(tracking_uri=server)


@pytest.fixture(scope="module")
def reproductions(server, published, tmp_path_factory):
    """Each reproduction path run once (compiles are the slow part):

    - `run_id`: the run-id path, judged against the run on the server;
    - `planted`: the spec path against the published reference with one
      curve point of one seed changed;
    - `every_iteration`: the spec path against the published reference with
      one value changed in its iterations file;
    - `other_seeds`: the spec path with other seeds (statistical);
    - `one_seed`: the spec path with one other seed (statistical, not judged).
    """
    spec, reference_path, reference, client = published
    tmp = tmp_path_factory.mktemp("reproductions")
    planted = copy.deepcopy(reference)
    curve = planted["curves"]["metrics"]["episode_return"]["1"]
    curve[12] += 0.5
    planted_path = tmp / "planted.json"
    planted_path.write_text(json.dumps(planted))
    # The reference as published, with every iteration beside it, one value
    # changed there: seed 1's loss at iteration 2, neither a curve point nor
    # in the final 10%, so that only the iterations file can show it.
    every_path = tmp / "every.json"
    every_path.write_text(reference_path.read_text())
    table = pq.read_table(differences.beside(reference_path))
    loss = table.column("loss").to_numpy().copy()
    loss[1 * len(reference["seeds"]) + 1] += 0.5
    table = table.set_column(table.column_names.index("loss"), "loss", pa.array(loss))
    pq.write_table(table, differences.beside(every_path))
    cases = {
        "run_id": ["--run-id", reference["mlflow_run_id"]],
        "planted": [str(spec), "--reference", str(planted_path)],
        "every_iteration": [str(spec), "--reference", str(every_path)],
        "other_seeds": [str(spec), "--reference", str(reference_path), "--seeds", "2", "3", "4", "5"],
        "one_seed": [str(spec), "--reference", str(reference_path), "--seeds", "7"],
    }
    out = {}
    for name, argv in cases.items():
        before = _parent_ids(client)
        code, stdout, stderr = run_cli(*["reproduce", *argv, "--tracking-uri", server.uri, "--no-progress"])
        out[name] = Reproduction(client, code, stdout, stderr, before)
    return out


# ---------------------------------------------------------------- reproduce


def test_same_machine_reproduction_of_a_logged_run_is_exact_and_passes(reproductions, published):
    r = reproductions["run_id"]
    _, _, reference, client = published
    assert r.code == 0, r.out + r.err
    assert f"against run {reference['mlflow_run_id']}: exact, PASS" in r.flat
    assert "bit-identical" in r.flat and "differs" not in r.flat
    assert r.tags["verdict"] == "pass" and r.tags["verdict.mode"] == "exact"
    assert r.tags["verdict.episode_return"] == "pass" and r.tags["verdict.loss"] == "pass"
    assert r.tags["reproduces"] == f"run {reference['mlflow_run_id']}"
    assert r.tags["reproduces.run_id"] == reference["mlflow_run_id"]
    assert r.tags["spec_hash"] == reference["spec_hash"] == r.tags["reproduces.spec_hash"]
    verdict = json.loads(r.artifact(client, "verdict.json"))
    assert verdict["verdict"] == "pass" and verdict["mode"] == "exact"
    assert verdict["speed"]["judged"] is False and verdict["speed"]["hardware"] == "same machine"
    assert "exact, PASS" in r.artifact(client, "verdict.md")
    assert r.run.info.status == "FINISHED"


def test_a_planted_change_in_the_reference_fails_with_exit_code_1(reproductions, published):
    r = reproductions["planted"]
    _, _, reference, client = published
    step = reference["curves"]["env_steps"][12]
    assert r.code == 1, r.out + r.err
    assert "exact, FAIL (episode_return)" in r.flat
    assert f"seed 1 differs first at env step {step}" in r.flat
    assert r.tags["verdict"] == "fail" and r.tags["verdict.mode"] == "exact"
    assert r.tags["verdict.episode_return"] == "fail"
    # Everything else of the same-machine reproduction is bit-identical.
    others = {
        k: v for k, v in r.tags.items() if k.startswith("verdict.") and k not in ("verdict.mode", "verdict.speed_ratio")
    }
    assert {k for k, v in others.items() if v != "pass"} == {"verdict.episode_return"} and len(others) == 8
    difference = json.loads(r.artifact(client, "verdict.json"))["metrics"]["episode_return"]["first_difference"]
    assert difference["seed"] == 1 and difference["env_step"] == step and difference["count"] == 1
    # The run itself trained fine; only the verdict failed.
    assert r.run.info.status == "FINISHED"
    assert r.tags["reproduces"].endswith("planted.json") and r.tags["spec_hash"] == reference["spec_hash"]


def test_an_exact_verdict_sees_every_iteration(reproductions, published):
    r = reproductions["every_iteration"]
    _, reference_path, reference, _ = published
    assert differences.beside(reference_path).exists(), "harness publish puts every iteration beside the reference"
    assert r.code == 1, r.out + r.err
    assert "exact, FAIL (loss)" in r.flat
    steps = reference["env_steps_per_seed"] // reference["iterations"]
    assert f"seed 1 differs first at iteration 2 (env step {2 * steps})" in r.flat
    assert r.tags["verdict.loss"] == "fail" and r.tags["verdict.episode_return"] == "pass"
    assert "bit-identical at every iteration" in r.flat


def test_other_seeds_are_judged_statistically_and_pass(reproductions, published):
    r = reproductions["other_seeds"]
    _, _, reference, client = published
    assert r.code == 0, r.out + r.err
    assert "statistical, PASS" in r.flat and "seeds 0,1 in the reference, 2..5 here" in r.flat
    assert r.tags["verdict.mode"] == "statistical" and r.tags["verdict.episode_return"] == "pass"
    # Another list of seeds is another spec; the tag says what it reproduces.
    assert r.tags["spec_hash"] != reference["spec_hash"] == r.tags["reproduces.spec_hash"]
    assert r.run.data.params["seeds"] == "[2, 3, 4, 5]"
    verdict = json.loads(r.artifact(client, "verdict.json"))
    ret = verdict["metrics"]["episode_return"]
    assert ret["reference"]["n"] == 2 and ret["reproduction"]["n"] == 4


def test_one_seed_is_not_judged_statistically_and_exits_4(reproductions):
    """One seed has no spread: not a pass, not a failure, and its own exit
    code; the run is recorded and the verdict logged as `not judged`."""
    r = reproductions["one_seed"]
    assert r.code == cli.EXIT_NOT_JUDGED == 4, r.out + r.err
    assert "statistical, NOT JUDGED" in r.flat and "1 seed in the reproduction" in r.flat
    assert "Traceback" not in r.err and r.run.info.status == "FINISHED"
    assert r.tags["verdict"] == r.tags["verdict.episode_return"] == "not judged"


GPU_CLASS = {"platform": "gpu", "device_kind": "NVIDIA H100 80GB HBM3"}


@pytest.fixture(scope="module")
def device_classes(server, published, tmp_path_factory):
    """A spec in experiments/ whose first reference (results/tiny.json) was
    made on another device class (a GPU's): `harness publish` on this CPU,
    then `harness reproduce` without --reference."""
    spec, _, reference, client = published
    root = tmp_path_factory.mktemp("classes")
    (root / "experiments").mkdir()
    (root / "results").mkdir()
    spec_path = root / "experiments" / "tiny.yaml"
    spec_path.write_text(spec.read_text())
    gpu = copy.deepcopy(reference)
    gpu["fingerprint"].update(GPU_CLASS)
    gpu_text = json.dumps(gpu)
    (root / "results" / "tiny.json").write_text(gpu_text)
    run = reference["mlflow_run_id"]
    published_out = run_cli("publish", str(spec_path), "--run-id", run, "--tracking-uri", server.uri)
    before = _parent_ids(client)
    code, out, err = run_cli("reproduce", str(spec_path), "--tracking-uri", server.uri, "--no-progress")
    return root, gpu_text, published_out, Reproduction(client, code, out, err, before)


def test_publish_writes_the_reference_of_its_device_class_beside_another_class(device_classes, published):
    root, gpu_text, (code, out, err), _ = device_classes
    assert code == 0, out + err
    cpu_path = root / "results" / "tiny@cpu.json"
    assert "(device class cpu)" in " ".join(out.split()) and cpu_path.exists()
    assert json.loads(cpu_path.read_text())["mlflow_run_id"] == published[2]["mlflow_run_id"]
    # The GPU's reference is left as it was.
    assert (root / "results" / "tiny.json").read_text() == gpu_text


def test_reproduce_picks_the_reference_of_its_device_class_and_says_so(device_classes):
    root, _, _, r = device_classes
    assert r.code == 0, r.out + r.err
    flat_err = " ".join(r.err.split())
    assert "tiny@cpu.json: the reference of this device class, cpu (1 more for other device classes)" in flat_err
    assert "exact, PASS" in r.flat
    assert r.tags["reproduces"].endswith("tiny@cpu.json")


def test_without_a_reference_of_its_class_reproduce_takes_the_closest_and_judges_statistically(tmp_path, published):
    from harness.judge import references

    _, _, reference, _ = published
    first = tmp_path / "tiny.json"
    gpu = copy.deepcopy(reference)
    gpu["fingerprint"].update(GPU_CLASS)
    first.write_text(json.dumps(gpu))
    tpu = copy.deepcopy(reference)
    tpu["fingerprint"].update(platform="tpu", device_kind="TPU v4")
    references.class_path(first, "tpu TPU v4").write_text(json.dumps(tpu))
    here = {"platform": "gpu", "device_kind": "NVIDIA A100-SXM4-40GB"}
    choice = references.choose(first, here)
    assert choice.path == first and choice.device_class == "gpu NVIDIA H100 80GB HBM3"
    assert "no reference of this device class (gpu NVIDIA A100-SXM4-40GB)" in choice.why
    assert "statistical" in choice.why
    assert references.choose(first, {"platform": "tpu", "device_kind": "TPU v4"}).path.name == "tiny@tpu-tpu-v4.json"
    assert references.choose(tmp_path / "none.json", here) is None


def test_run_id_that_is_not_on_the_server(server):
    code, out, err = run_cli("reproduce", "--run-id", "f" * 32, "--tracking-uri", server.uri)
    assert code == 2 and "no run 'ffff" in err and "Traceback" not in out + err


# ------------------------------------------------------------------ compare


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_compare_same_spec_runs_writes_and_logs_a_png(reproductions, published, tmp_path):
    _, _, reference, client = published
    ids = [reference["mlflow_run_id"], reproductions["run_id"].run.info.run_id]
    out_png = tmp_path / "plots" / "cmp.png"
    code, out, err = run_cli(*["compare", *ids, "--tracking-uri", client.tracking_uri, "--out", str(out_png)])
    assert code == 0, out + err
    data = out_png.read_bytes()
    assert _png_size(data) == (1280, 440) and len(data) > 20_000
    for run_id in ids:
        assert run_id[:12] in out
    assert "final episode_return IQM [95% CI]" in out and "1x cpu (" in out
    experiment = client.get_experiment_by_name(TINY_SPEC["name"])
    logged = [
        run
        for run in client.search_runs([experiment.experiment_id], "tags.`harness.kind` = 'compare'")
        if run.data.tags["compare.run_ids"] == ",".join(ids)
    ]
    assert len(logged) == 1 and logged[0].info.status == "FINISHED"
    said = logged[0].data.tags.get("verdict")
    assert logged[0].info.run_name == "compare · 2 runs" + (f" · {said.upper()}" if said else "")
    compare_id = logged[0].info.run_id
    assert {a.path for a in client.list_artifacts(compare_id)} == {"compare.png", "compare.md", "compare.json"}
    with open(client.download_artifacts(compare_id, "compare.png", str(tmp_path)), "rb") as png:
        assert png.read() == data
    summary = json.loads(tracking.read_text_artifact(client, compare_id, "compare.json"))
    assert [row["run_id"] for row in summary["runs"]] == ids and summary["spec_differences"] == {}


def test_compare_plot_overlays_mean_curves_with_bands(reproductions, published, tmp_path):
    _, _, reference, client = published
    ids = [reference["mlflow_run_id"], reproductions["other_seeds"].run.info.run_id]
    runs, _ = compare.fetch(client, client.tracking_uri, run_ids=ids)
    figure = compare_report.plot(runs, tmp_path / "p.png", "title")
    assert [ax.get_title() for ax in figure.axes] == ["episode_return", "loss"]
    for ax, metric in zip(figure.axes, ["episode_return", "loss"], strict=True):
        lines = ax.get_lines()
        assert len(lines) == 2 and len(ax.collections) == 2, "one mean line and one shaded band per run"
        for line, run in zip(lines, runs, strict=True):
            assert line.get_label().startswith(run.run_id[:8])
            assert f"{len(run.record.seeds)} seeds" in line.get_label()
            curves = run.record.curves
            assert list(line.get_xdata()) == curves.env_steps
            per_seed = [curves.metrics[metric][str(s)] for s in run.record.seeds]
            expected = [sum(column) / len(column) for column in zip(*per_seed, strict=True)]
            assert list(line.get_ydata()) == pytest.approx(expected)
        assert ax.get_xlabel() == "env steps per seed"
    legend = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert legend == [line.get_label() for line in figure.axes[0].get_lines()]
    assert (tmp_path / "p.png").read_bytes()[:8] == PNG_MAGIC


def test_compare_refuses_different_specs_and_lists_the_keys(reproductions, published, tmp_path):
    _, _, _, client = published
    argv = ["compare", "--experiment", TINY_SPEC["name"], "--tracking-uri", client.tracking_uri]
    code, out, err = run_cli(*[*argv, "--out", str(tmp_path / "refused.png")])
    assert code == 2 and "Traceback" not in out + err
    assert "3 different specs" in err and "seeds: [0, 1]" in err and "[2, 3, 4, 5]" in err and "[7]" in err
    assert "--allow-different-specs" in err
    assert not (tmp_path / "refused.png").exists()

    code, out, err = run_cli(*[*argv, "--allow-different-specs", "--out", str(tmp_path / "all.png")])
    assert code == 0, out + err
    assert "seeds: [0, 1]" in out and "(different specs)" in out
    assert (tmp_path / "all.png").read_bytes()[:8] == PNG_MAGIC
    # Comparisons are runs of their own, but are never compared themselves.
    compare_id = out.split("logged to MLflow run ")[1].split()[0]
    summary = json.loads(tracking.read_text_artifact(client, compare_id, "compare.json"))
    experiment = client.get_experiment_by_name(TINY_SPEC["name"])
    trained = [
        r.info.run_id
        for r in client.search_runs([experiment.experiment_id])
        if "mlflow.parentRunId" not in r.data.tags and r.data.tags.get("harness.kind") != "compare"
    ]
    assert sorted(row["run_id"] for row in summary["runs"]) == sorted(trained)
    assert len(trained) >= 1 + len(reproductions)
    assert {row["verdict"] for row in summary["runs"]} == {None, "pass", "fail", "not judged"}
