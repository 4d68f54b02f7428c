"""Devices: the mesh layout's checks. A layout that cannot work (too many
devices, sizes that do not divide, an exact layout a network cannot keep)
is named with its spec key before anything is compiled."""

from __future__ import annotations

import pytest
from support import write_spec

from harness import build, cli
from harness import experiment_spec as S
from harness.run import devices


def _devices(**kwargs):
    return S.DevicesSpec(**kwargs)


@pytest.mark.parametrize(
    "kwargs, seeds, key, message",
    [
        ({"count": 8}, 2, "devices.count", "8 devices asked for, but only 4 are available"),
        ({"count": 4, "data_axis": 3}, 2, "devices.data_axis", "data_axis 3 does not divide the 4 devices"),
        ({"count": 4, "seed_axis": 3}, 3, "devices.seed_axis", "seed_axis 3 does not divide the 4 devices"),
        ({"count": 4, "seed_axis": 4}, 2, "devices.seed_axis", "seed_axis 4 does not divide the 2 seeds"),
        ({"count": 4, "seed_axis": 2, "data_axis": 4}, 2, "devices", "2 x 4 = 8 is not the 4 devices"),
    ],
)
def test_bad_layouts_are_named(kwargs, seeds, key, message):
    with pytest.raises(devices.LayoutError) as error:
        devices.resolve(_devices(**kwargs), seeds, available=4)
    assert error.value.key == key
    assert message in str(error.value)


def test_default_layout_is_data_parallel():
    assert devices.resolve(_devices(count="all"), 2, available=4) == devices.Layout(1, 4)
    assert devices.resolve(_devices(count=4, seed_axis=2), 2, available=4) == devices.Layout(2, 2)
    assert devices.resolve(_devices(), 2, available=4) == devices.Layout(1, 1)


@pytest.mark.parametrize(
    "algorithm, hyperparameters, network, message",
    [
        ("ppo", {"num_envs": 6, "num_steps": 4}, {}, "hyperparameters.num_envs: num_envs (6) does not split over 4"),
        (
            "ppo",
            {"num_envs": 8, "num_steps": 3, "num_minibatches": 8},
            {},
            "hyperparameters.num_minibatches: a minibatch of 3 steps does not split over 4",
        ),
        (
            "ppo",
            {"num_envs": 8, "num_steps": 4, "num_minibatches": 4},
            {"kind": "gru"},
            "a minibatch of 2 envs does not split over 4",
        ),
        (
            "reinforce",
            {"num_envs": 8, "num_steps": 4, "num_minibatches": 4},
            {},
            "a minibatch of 2 envs does not split over 4",
        ),
        (
            "ppo",
            {"num_envs": 8, "num_steps": 4, "evaluation": {"episodes": 6}},
            {},
            "hyperparameters.evaluation.episodes: evaluation.episodes (6) does not split over 4",
        ),
        (
            "alphazero",
            {"num_envs": 8, "train_batch_size": 6},
            {"kind": "mlp"},
            "hyperparameters.train_batch_size: train_batch_size (6) does not split over 4",
        ),
    ],
)
def test_batches_that_do_not_split_are_named(monkeypatch, algorithm, hyperparameters, network, message):
    """The algorithm's own check, reached through `build` with 4 devices
    (the device count is what `resolve` sees; nothing is compiled)."""
    env = (
        {"suite": "pgx", "id": "tic_tac_toe"} if algorithm == "alphazero" else {"suite": "gymnax", "id": "CartPole-v1"}
    )
    data = {
        "name": "split",
        "algorithm": algorithm,
        "env": env,
        "seeds": [0],
        "budget": {"env_steps": 10_000},
        "hyperparameters": hyperparameters,
        "network": network,
        "devices": {"count": 4},
    }
    monkeypatch.setattr(devices.jax, "device_count", lambda: 4)
    with pytest.raises(S.SpecError) as error:
        build.build(S.parse(data, "split.yaml"), "split.yaml")
    assert message in str(error.value)
    assert "(devices.data_axis)" in str(error.value)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {
                "algorithm": "alphazero",
                "env": {"suite": "pgx", "id": "tic_tac_toe"},
                "hyperparameters": {"num_envs": 16},
                "network": {"kind": "resnet"},
            },
            "network.kind: exact layouts (devices.shards) of alphazero take an mlp or item_set network, not resnet",
        ),
        (
            {
                "algorithm": "alphazero",
                "env": {"suite": "pgx", "id": "tic_tac_toe"},
                "hyperparameters": {"num_envs": 16, "train_batch_size": 12},
                "network": {"kind": "mlp"},
            },
            "devices.shards: train_batch_size (12) does not split into 8 logical shards",
        ),
        (
            {
                "algorithm": "reinforce",
                "hyperparameters": {"num_envs": 16, "num_steps": 16, "normalize_advantages": True},
            },
            "hyperparameters.normalize_advantages: exact layouts (devices.shards) of reinforce normalise advantages"
            " only without a baseline",
        ),
        ({"devices": {"count": 4, "shards": 4}}, "devices.shards: 4 logical shards do not split into at least two"),
        ({"devices": {"count": 4, "shards": 6}}, "devices.shards: 6 logical shards do not split into at least two"),
        ({"hyperparameters": {"num_envs": 4, "num_steps": 16}}, "devices.shards: num_envs (4) does not split into 8"),
        (
            {"hyperparameters": {"num_envs": 8, "num_steps": 4, "num_minibatches": 8}},
            "devices.shards: a minibatch of 4 steps does not split into 8 logical shards",
        ),
        ({"network": {"kind": "gru", "gru_size": 24}}, "network.gru_size: 24 is not a multiple of 16"),
    ],
)
def test_exact_layouts_that_cannot_work_are_named(monkeypatch, change, message):
    data = {
        "name": "exact",
        "algorithm": "ppo",
        "env": {"suite": "gymnax", "id": "CartPole-v1"},
        "seeds": [0],
        "budget": {"env_steps": 10_000},
        "hyperparameters": {"num_envs": 16, "num_steps": 16},
        "devices": {"shards": 8},
    }
    data = {**data, **change}
    if "shards" not in data["devices"]:
        data["devices"] = {**data["devices"], "shards": 8}
    monkeypatch.setattr(devices.jax, "device_count", lambda: 4)
    with pytest.raises(S.SpecError) as error:
        build.build(S.parse(data, "exact.yaml"), "exact.yaml")
    assert message in " ".join(str(error.value).split())


def test_bad_device_options_exit_2_with_one_line(tmp_path, capsys, tiny_spec_data):
    path = write_spec(tmp_path, tiny_spec_data)
    for option, message in (
        (["--devices", "many"], "--devices takes a number or all, not 'many'"),
        (["--devices", "0"], "--devices: count must be at least 1, or all"),
        (["--devices", "2"], "devices.count: 2 devices asked for, but only 1 are available"),
        (["--num-processes", "2"], "--num-processes and --process-id need --coordinator"),
    ):
        assert cli.main(["run", str(path), "--no-progress", *option]) == 2
        err = capsys.readouterr().err
        assert message in " ".join(err.split()), err
        assert "Traceback" not in err


def test_devices_do_not_change_the_spec_hash(tiny_spec_data):
    plain = S.parse(tiny_spec_data)
    spread = S.parse({**tiny_spec_data, "devices": {"count": "all", "seed_axis": 2}})
    assert S.spec_hash(plain) == S.spec_hash(spread)
    assert "devices" in S.to_yaml(spread)
