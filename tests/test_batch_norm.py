"""AlphaZero's ResNet with `network: {normalization: batch}`: batch
statistics in training (over the data-parallel axis too), their running
averages in search, and a training step that updates them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from support import TINY_AZ

from algorithms import alphazero
from algorithms.alphazero import AlphaZeroConfig
from algorithms.alphazero.networks import BATCH_NORM_MOMENTUM, make_az_network
from harness import envs
from harness import experiment_spec as spec_module
from harness.experiment_spec import NetworkSpec, SpecError
from harness.run import runner

BATCH_NORM = NetworkSpec(kind="resnet", num_blocks=1, num_channels=8, conv_gradient="conv", normalization="batch")
OBS = jax.random.normal(jax.random.key(1), (16, 6, 7, 2)) * 3.0 + 1.0


def _nets(axis_name=None):
    search = make_az_network(BATCH_NORM, 7, (6, 7, 2))
    train = make_az_network(BATCH_NORM, 7, (6, 7, 2), for_gradients=True, axis_name=axis_name)
    return search, train, search.init(jax.random.key(0), jnp.zeros((6, 7, 2)))


def test_training_updates_the_running_averages_that_search_reads():
    search, train, variables = _nets()
    assert set(variables) == {"params", "batch_stats"}
    out, updated = train.apply(variables, OBS, mutable=["batch_stats"])
    # The first statistics are the stem's output's: the new average moves a
    # tenth of the way from the initial (mean 0, var 1) to the batch's.
    first = updated["batch_stats"]["ResidualBlock_0"]["BatchNorm_0"]
    kernel = variables["params"]["Conv3x3_0"]["kernel"]
    stem_out = jax.lax.conv_general_dilated(OBS, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    np.testing.assert_allclose(
        first["mean"], (1 - BATCH_NORM_MOMENTUM) * stem_out.mean((0, 1, 2)), rtol=1e-4, atol=1e-5
    )
    expected_var = BATCH_NORM_MOMENTUM + (1 - BATCH_NORM_MOMENTUM) * stem_out.var((0, 1, 2))
    np.testing.assert_allclose(first["var"], expected_var, rtol=1e-4)
    # Search normalises by the running averages: with the batch's own
    # statistics as the averages (momentum aside), it computes what training
    # computes on that batch.
    exact = jax.tree.map(lambda new, old: (new - BATCH_NORM_MOMENTUM * old) / (1 - BATCH_NORM_MOMENTUM),
                         updated["batch_stats"], variables["batch_stats"])  # fmt: skip
    searched = search.apply({**variables, "batch_stats": exact}, OBS)
    for a, b in zip(searched, out, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-3, atol=1e-4)


def test_statistics_are_over_the_data_parallel_axis_too():
    """Two shards of a data axis (vmapped, named) normalise by the whole
    batch's statistics, as one device does with all of it."""
    _, whole, variables = _nets()
    _, sharded, _ = _nets(axis_name="data")
    one = whole.apply(variables, OBS, mutable=["batch_stats"])
    halves = jax.vmap(lambda x: sharded.apply(variables, x, mutable=["batch_stats"]), axis_name="data")(
        OBS.reshape(2, 8, 6, 7, 2)
    )
    (logits, value), stats = halves
    np.testing.assert_allclose(logits.reshape(16, 7), one[0][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(value.reshape(16), one[0][1], rtol=1e-4, atol=1e-5)
    for a, b in zip(jax.tree.leaves(stats), jax.tree.leaves(one[1]), strict=True):
        np.testing.assert_allclose(a[0], b, rtol=1e-4, atol=1e-6)
        np.testing.assert_array_equal(a[0], a[1])


def test_alphazero_trains_with_batch_norm():
    """Self-play, then updates whose batch statistics' averages move; the
    same key gives the same bits."""
    env = envs.make("pgx", "connect_four")[0]
    config = AlphaZeroConfig(
        num_envs=8, collection_steps=8, capacity=8, num_simulations=4, train_steps=2, train_batch_size=16,
        warmup_iterations=0, tree_search="batched",
    )  # fmt: skip
    algorithm = alphazero.make_alphazero(config, env, network=BATCH_NORM, optimizer=optax.adam(1e-3))
    state, _ = runner.init_state(algorithm, (0,))
    before = np.asarray(state.params["batch_stats"]["BatchNorm_0"]["mean"])
    chunk = runner.make_chunk(algorithm.step, 2)  # (it donates the state)
    first, metrics = chunk(state)
    again, _ = chunk(runner.init_state(algorithm, (0,))[0])
    after = first.params["batch_stats"]["BatchNorm_0"]["mean"]
    assert not np.array_equal(before, after)
    assert np.isfinite(np.asarray(metrics["loss"])).all()
    for a, b in zip(jax.tree.leaves(first.params), jax.tree.leaves(again.params), strict=True):
        np.testing.assert_array_equal(a, b)
    # The optimizer holds the weights only, not the statistics.
    assert "batch_stats" not in jax.tree_util.keystr(jax.tree_util.tree_flatten_with_path(first.opt_state)[0])


def test_normalization_is_for_the_resnet_and_leaves_published_hashes():
    with pytest.raises(SpecError, match="normalization: batch is for kind resnet, not mlp"):
        spec_module.parse({**TINY_AZ, "network": {"kind": "mlp", "normalization": "batch"}})
    resnet = {**TINY_AZ, "network": {"kind": "resnet", "num_blocks": 1, "num_channels": 4}}
    layer = {**resnet, "network": {**resnet["network"], "normalization": "layer"}}
    batch = {**resnet, "network": {**resnet["network"], "normalization": "batch"}}
    hashes = [spec_module.spec_hash(spec_module.parse(data)) for data in (resnet, layer, batch)]
    assert hashes[0] == hashes[1] != hashes[2]
