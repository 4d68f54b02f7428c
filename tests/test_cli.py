"""The command line: validate, and one clear message for each bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support import TINY_SPEC, run_cli, write_spec

from harness import experiment_spec as S


def test_validate_prints_the_resolved_spec_and_its_hash(tmp_path, tiny_spec_data):
    path = write_spec(tmp_path, tiny_spec_data)
    code, out, err = run_cli("validate", str(path))
    assert code == 0, err
    resolved = yaml.safe_load(out)
    assert resolved["hyperparameters"]["gamma"] == 0.99, "defaults are filled in"
    assert f"# spec_hash: {S.spec_hash(S.load(path))}" in out
    assert S.parse(resolved) == S.load(path)


def _with(data: dict, dotted: str, value) -> dict:
    *parents, last = dotted.split(".")
    node = data
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return data


BAD = {
    "unknown key": (lambda d: _with(d, "colour", "red"), "colour", "unknown key"),
    "unknown nested key": (lambda d: _with(d, "optimizer.lr", 0.1), "optimizer.lr", "unknown key"),
    "wrong type": (lambda d: _with(d, "budget.env_steps", "lots"), "budget.env_steps", "valid integer"),
    "zero budget": (lambda d: _with(d, "budget.env_steps", 0), "budget.env_steps", "greater than 0"),
    "negative budget": (lambda d: _with(d, "budget.env_steps", -5), "budget.env_steps", "greater than 0"),
    "budget below one iteration": (
        lambda d: _with(d, "budget.env_steps", 100),
        "budget.env_steps",
        "less than one iteration",
    ),
    "unknown algorithm": (lambda d: _with(d, "algorithm", "dqn"), "algorithm", "unknown algorithm 'dqn'"),
    "unknown env id": (lambda d: _with(d, "env.id", "CartPole-v9"), "env.id", "gymnax has no env 'CartPole-v9'"),
    "unknown suite": (
        lambda d: _with(d, "env.suite", "atari"),
        "env.suite",
        "'gymnax', 'jumanji', 'pgx', 'xminigrid' or 'brax'",
    ),
    "minibatches": (
        lambda d: _with(d, "hyperparameters.num_minibatches", 3),
        "hyperparameters.num_minibatches",
        "does not divide",
    ),
    "continuous actions on a grid network": (
        lambda d: _with(_with(d, "env.id", "Pendulum-v1"), "network", {"kind": "grid_gru"}),
        "network.kind",
        "has continuous actions",
    ),
    "two players": (lambda d: _with(d, "env", {"suite": "pgx", "id": "tic_tac_toe"}), "env.id", "2 players"),
    "missing key": (lambda d: {k: v for k, v in d.items() if k != "budget"}, "budget", "required key is missing"),
    "duplicate seeds": (lambda d: _with(d, "seeds", [1, 1]), "seeds", "distinct"),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_spec_gets_one_clear_message_and_no_mlflow_run(tmp_path, tiny_spec_data, case):
    mutate, key, fragment = BAD[case]
    path = write_spec(tmp_path, mutate(tiny_spec_data))
    db = tmp_path / "mlflow.db"
    code, out, err = run_cli("run", str(path), "--tracking-uri", f"sqlite:///{db}", "--no-progress")
    assert code == 2
    assert str(path) in err and key in err and fragment in err, err
    assert "(line " in err or case == "missing key" and "budget" in err
    assert "Traceback" not in err + out
    assert not db.exists(), "no MLflow store is touched for a bad spec"


@pytest.mark.parametrize(
    "content,fragment",
    [(None, "no such file"), ("name: [unclosed\n", "invalid YAML: line 2"), ("- just\n- a list\n", "YAML mapping")],
    ids=["missing file", "invalid yaml", "not a mapping"],
)
def test_unreadable_spec_files(tmp_path, content, fragment):
    path = tmp_path / "bad.yaml"
    if content is not None:
        path.write_text(content)
    code, out, err = run_cli("validate", str(path))
    assert code == 2
    assert str(path) in err and fragment in err, err
    assert "Traceback" not in err + out


def test_published_spec_validates():
    spec = Path(__file__).parent.parent / "experiments" / "reinforce_cartpole.yaml"
    code, out, err = run_cli("validate", str(spec))
    assert code == 0, err
    assert yaml.safe_load(out)["name"] == TINY_SPEC["name"].replace("tiny_reinforce", "reinforce_cartpole")
