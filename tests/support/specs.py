"""The tiny specs the suite trains, and the files and stores of a test."""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path

import yaml

TINY_SPEC = {
    "name": "tiny_reinforce",
    "algorithm": "reinforce",
    "env": {"suite": "gymnax", "id": "CartPole-v1"},
    "seeds": [0, 1],
    # 80 iterations of 16 envs x 32 steps.
    "budget": {"env_steps": 80 * 16 * 32},
    "hyperparameters": {"num_envs": 16, "num_steps": 32},
    "optimizer": {"learning_rate": 0.003, "max_grad_norm": 0.5},
    "logging": {"interval": 20},
}


TINY_PPO = {
    "name": "tiny_ppo",
    "algorithm": "ppo",
    "env": {"suite": "gymnax", "id": "CartPole-v1"},
    "seeds": [0, 1],
    "budget": {"env_steps": 60 * 4 * 128},
    "hyperparameters": {"num_envs": 4, "num_steps": 128},
    "optimizer": {"learning_rate": 0.001, "max_grad_norm": 0.5, "adam_eps": 1e-5},
    "logging": {"interval": 20},
}

# Continuous actions, observation and reward normalisation: learns within
# its 60 iterations (about -1300 to about -500 on both seeds).
TINY_PENDULUM = {
    "name": "tiny_pendulum",
    "algorithm": "ppo",
    "env": {"suite": "gymnax", "id": "Pendulum-v1"},
    "seeds": [0, 1],
    "budget": {"env_steps": 60 * 16 * 64},
    "hyperparameters": {
        "num_envs": 16,
        "num_steps": 64,
        "num_minibatches": 8,
        "update_epochs": 5,
        "gamma": 0.95,
        "entropy_coef": 0.0,
        "normalize_observations": True,
        "normalize_rewards": True,
    },
    "optimizer": {"learning_rate": 0.001, "max_grad_norm": 0.5},
    "logging": {"interval": 20},
}

TINY_AZ = {
    "name": "tiny_alphazero",
    "algorithm": "alphazero",
    "env": {"suite": "pgx", "id": "tic_tac_toe"},
    "seeds": [0, 1],
    # 12 iterations (4 chunks), so that the checkpoint tests have chunks
    # after their interrupt and can reuse this run.
    "budget": {"env_steps": 12 * 32 * 12},
    "network": {"kind": "mlp", "hidden_sizes": [32], "activation": "relu"},
    "optimizer": {"learning_rate": 0.003},
    "hyperparameters": {
        "num_envs": 32,
        "collection_steps": 12,
        "num_simulations": 8,
        "train_steps": 2,
        "train_batch_size": 64,
        "capacity": 24,
        # The published tic-tac-toe spec's search (mctx's, the default, is
        # on tests/device_runs.py's layouts).
        "tree_search": "batched",
        "evaluation": {"games": 4, "pool_size": 2},
    },
    "logging": {"interval": 3},
}


@functools.cache
def _store_template() -> Path:
    path = Path(tempfile.mkdtemp(prefix="mlflow-template-")) / "mlflow.db"
    from harness.record.store import open_client

    open_client(f"sqlite:///{path}")  # made and migrated by MLflow itself
    return path


def new_store(directory: Path, name: str = "mlflow.db") -> str:
    """The URI of the MLflow SQLite store `name` in `directory`, made empty
    if it is not there yet: a copy of one that MLflow made for the session,
    since making and migrating a store takes about 3 s (the tests of store
    creation make their own)."""
    path = directory / name
    if not path.exists():
        shutil.copyfile(_store_template(), path)
    return f"sqlite:///{path}"


def write_spec(directory: Path, data: dict, name: str = "spec.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
