"""The bench's peers (`nox -s peers`, `--against`): a checkout shaped like
each peer's is identified and imported with its shims, what every peer
lacks is told at once, and a side-by-side entry whose peer runs other work
fails."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import pytest

ROOT = Path(__file__).resolve().parent.parent


# A PureJaxRL-shaped checkout made here: ppo.py imports its wrappers (which
# import Brax and navix, as PureJaxRL's do) and steps a gymnax env the way
# PureJaxRL does, expecting the pre-1.0 five values.
PEER_PPO = """
import gymnax
from wrappers import LogWrapper


def make_train(config):
    env, env_params = gymnax.make(config["ENV_NAME"])
    env = LogWrapper(env)

    def train(rng):
        obs, state = env.reset(rng, env_params)
        obs, state, reward, done, info = env.step(rng, state, 0, env_params)
        return {"metrics": {"reward": reward, "done": done}}

    return train
"""
PEER_WRAPPERS = """
from brax import envs
from brax.envs.wrappers.training import EpisodeWrapper, AutoResetWrapper
import navix as nx


class LogWrapper:
    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)
"""


def _needing(monkeypatch, name: str, needs: dict[str, str]) -> None:
    """Peer `name`'s entries taken to import `needs` (module -> package)."""
    from benchmarks.machinery import peer_checkouts

    checkout = peer_checkouts.CHECKOUTS[name]
    monkeypatch.setitem(peer_checkouts.CHECKOUTS, name, checkout._replace(needs=needs))


def test_a_peer_checkout_is_imported_with_its_shims(tmp_path, monkeypatch):
    from benchmarks.machinery import peers

    folder = tmp_path / "purejaxrl" / "purejaxrl"
    folder.mkdir(parents=True)
    (folder / "ppo.py").write_text(PEER_PPO)
    (folder / "wrappers.py").write_text(PEER_WRAPPERS)
    assert peers.peer_dir("purejaxrl", tmp_path / "purejaxrl") == folder.resolve()
    # What `--against` reports (the plugin turns it into a usage error, exit 4).
    with pytest.raises(peers.PeerError, match="--against no/such/checkout: no PureJaxRL checkout there"):
        peers.ready("purejaxrl", "no/such/checkout")
    _needing(monkeypatch, "purejaxrl", {"no_such_module": "no-such-package"})
    with pytest.raises(peers.MissingPackages, match=r"not installed here: no-such-package \(purejaxrl\)"):
        peers.load_purejaxrl_ppo(folder)  # before anything of it is imported
    _needing(monkeypatch, "purejaxrl", {})
    make_train = peers.load_purejaxrl_ppo(tmp_path / "purejaxrl")
    out = make_train({"ENV_NAME": "CartPole-v1"})(jax.random.PRNGKey(0))["metrics"]
    assert float(out["reward"]) == 1.0 and not bool(out["done"])
    assert "brax" not in sys.modules or sys.modules["brax"].__spec__ is not None  # stand-ins removed


def test_the_packages_every_peer_lacks_are_told_at_once():
    # What `--against all` says on a machine without the `peers` extra: the
    # GPU image lacked three packages of two kinds, found one run at a time.
    from benchmarks.machinery import peer_checkouts, peers

    by_peer = {name: list(c.needs.values()) for name, c in peer_checkouts.CHECKOUTS.items()}
    message = str(peers.MissingPackages(by_peer))
    assert "distrax (purejaxrl, xland-minigrid), dm-haiku (pgx), omegaconf (pgx)" in message
    assert "pip install distrax dm-haiku omegaconf" in message
    # The `peers` extra (what `nox -s bench -- --against ...` installs) has them all.
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["peers"]
    assert {p for packages in by_peer.values() for p in packages} <= {r.split(">")[0].split("=")[0] for r in extra}


XMINIGRID_SCRIPT = """
import jax
import pyrallis
import wandb
from nn import width
from utils import Stats

jax.config.update("jax_threefry_partitionable", True)


class TrainConfig:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


@pyrallis.wrap()
def train(config):
    return Stats().reward + width
"""
XMINIGRID_UTILS = """
import jax.numpy as jnp
from flax import struct


class Stats(struct.PyTreeNode):
    reward: jnp.ndarray = jnp.asarray(1.5)
"""


def test_an_xminigrid_checkout_is_identified_and_imported_with_its_shims(tmp_path, monkeypatch):
    from benchmarks.machinery import peers

    folder = tmp_path / "xland-minigrid" / "training"
    folder.mkdir(parents=True)
    (folder / "train_single_task.py").write_text(XMINIGRID_SCRIPT)
    (folder / "nn.py").write_text("width = 2.0\n")
    (folder / "utils.py").write_text(XMINIGRID_UTILS)
    assert peers.identify(tmp_path / "xland-minigrid") == ("xland-minigrid", folder.resolve())
    _needing(monkeypatch, "xland-minigrid", {})
    assert peers.check(tmp_path / "xland-minigrid") == ("xland-minigrid", folder.resolve())
    with pytest.raises(peers.PeerError, match="no checkout of a peer there; looked for PureJaxRL .*, xland-minigrid"):
        peers.identify(tmp_path)
    module = peers.load_xminigrid_single_task(tmp_path / "xland-minigrid")
    # pyrallis.wrap gave the function back; the array default came through a factory.
    assert float(module.train(module.TrainConfig())) == 3.5
    assert not {"nn", "utils"} & set(sys.modules)  # its plain-named files are not left for other imports
    assert "wandb" not in sys.modules or sys.modules["wandb"].__spec__ is not None  # stand-ins removed


PGX_TRAIN = """
import sys

import pgx
import wandb
from network import width

config = dict(argument.split("=") for argument in sys.argv[1:])
baseline = pgx.make_baseline_model(config["env_id"] + "_v0")
"""


def test_a_pgx_checkout_is_identified_and_imported_with_its_command_line(tmp_path, monkeypatch):
    from benchmarks.machinery import peers

    folder = tmp_path / "pgx" / "examples" / "alphazero"
    folder.mkdir(parents=True)
    (folder / "train.py").write_text(PGX_TRAIN)
    (folder / "network.py").write_text("width = 2\n")
    assert peers.identify(tmp_path / "pgx") == ("pgx", folder.resolve())
    _needing(monkeypatch, "pgx", {})
    argv = list(sys.argv)
    import pgx

    make_baseline = pgx.make_baseline_model
    module = peers.load_pgx_alphazero(tmp_path / "pgx", {"env_id": "connect_four", "num_layers": 2})
    assert module.config == {"env_id": "connect_four", "num_layers": "2"}  # its command line
    assert (sys.argv, pgx.make_baseline_model) == (argv, make_baseline)  # both given back
    with pytest.raises(peers.PeerError, match="baseline connect_four_v0 is not loaded"):
        module.baseline(None)  # nothing downloaded
    assert "network" not in sys.modules


def test_a_side_by_side_entry_fails_when_the_peer_runs_other_work():
    """Each side's env steps per call come from its own configuration; an
    entry whose peer steps fewer envs than the entry counts (as
    xland-minigrid's script did on split host devices) fails, naming both."""
    from benchmarks.machinery import peers

    peers.same_work("against_xminigrid_ppo", "xland-minigrid", 16_384, 16_384)
    with pytest.raises(AssertionError, match="xland-minigrid takes 8,192 env steps per call .* the project 16,384"):
        peers.same_work("against_xminigrid_ppo", "xland-minigrid", 16_384, 8_192)
