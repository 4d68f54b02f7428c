"""How an on-policy algorithm (algorithms.rollout) registers: its updates
and env steps per iteration, the networks it takes, and the batch rules a
spec is checked against before anything runs: minibatches that divide the
rollout and split over data-parallel devices, and what exact layouts
(`devices.shards`) need."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from algorithms import base
from algorithms.config import NetworkConfig, OnPolicyConfig
from algorithms.layers import ROW_STABLE_WIDTH
from algorithms.networks import ON_POLICY_KINDS, RECURRENT_KINDS


def updates_per_step(config: OnPolicyConfig) -> int:
    return config.update_epochs * config.num_minibatches


def env_steps_per_step(config: OnPolicyConfig) -> int:
    return config.num_envs * config.num_steps


def minibatch_size(config: OnPolicyConfig, network: NetworkConfig, steps_in_minibatches: bool) -> tuple[int, str]:
    """One minibatch's size and unit: single steps when `steps_in_minibatches`
    and the policy is feed-forward, else whole env fragments."""
    if steps_in_minibatches and network.kind not in RECURRENT_KINDS:
        return config.num_envs * config.num_steps // config.num_minibatches, "steps"
    return config.num_envs // config.num_minibatches, "envs"


def batch_check(steps_in_minibatches: bool) -> Callable[[Any, Any, int], base.Problem | None]:
    """Minibatches divide the rollout, and each of D data-parallel shards
    gets whole envs and an equal part of every minibatch. Minibatches are of
    single steps when `steps_in_minibatches` (PPO with a feed-forward
    policy), else of whole env fragments."""

    def check(config: OnPolicyConfig, network: NetworkConfig, shards: int) -> base.Problem | None:
        recurrent = network.kind in RECURRENT_KINDS
        flat = steps_in_minibatches and not recurrent
        if flat and (config.num_envs * config.num_steps) % config.num_minibatches:
            return "num_minibatches", (
                f"num_envs * num_steps ({config.num_envs * config.num_steps}) does not divide into"
                f" num_minibatches ({config.num_minibatches})"
            )
        if not flat and config.num_envs % config.num_minibatches:
            whole = f"; a {network.kind} policy's minibatches are whole envs" if recurrent else ""
            return "num_minibatches", (
                f"num_envs ({config.num_envs}) does not divide into num_minibatches ({config.num_minibatches}){whole}"
            )
        if config.num_envs % shards:
            return "num_envs", f"num_envs ({config.num_envs}) does not split over {shards} data-parallel devices"
        evaluation = getattr(config, "evaluation", None)
        if evaluation is not None and evaluation.episodes % shards:
            return "evaluation.episodes", (
                f"evaluation.episodes ({evaluation.episodes}) does not split over {shards} data-parallel devices"
            )
        size, unit = minibatch_size(config, network, steps_in_minibatches)
        if size % shards:
            return "num_minibatches", f"a minibatch of {size} {unit} does not split over {shards} data-parallel devices"
        return None

    return check


def exact_check(
    steps_in_minibatches: bool, check_config: Callable[[Any], base.Problem | None] | None = None
) -> Callable[[Any, Any, int], base.Problem | None]:
    """Exact layouts of L logical shards: a network whose layers are
    row-stable (`layers.Dense`), envs and minibatches that split into L,
    and what the algorithm's own `check_config` asks of its hyperparameters."""

    def check(config: OnPolicyConfig, network: NetworkConfig, shards: int) -> base.Problem | None:
        if check_config is not None and (problem := check_config(config)) is not None:
            return problem
        if network.kind not in ("mlp", "gru"):
            return "network.kind", f"exact layouts (devices.shards) take an mlp or gru network, not {network.kind}"
        if network.kind == "gru" and network.gru_size % ROW_STABLE_WIDTH:
            return "network.gru_size", (
                f"{network.gru_size} is not a multiple of {ROW_STABLE_WIDTH}, which exact layouts (devices.shards)"
                " need: the GRU's own layers are gru_size wide"
            )
        if config.num_envs % shards:
            return "devices.shards", f"num_envs ({config.num_envs}) does not split into {shards} logical shards"
        size, unit = minibatch_size(config, network, steps_in_minibatches)
        if size % shards:
            return "devices.shards", f"a minibatch of {size} {unit} does not split into {shards} logical shards"
        return None

    return check


def register(
    name: str,
    config: type[Any],
    make: Callable[..., base.Algorithm],
    *,
    steps_in_minibatches: bool,
    numeric: tuple[str, ...],
    exact: bool = False,
    exact_config: Callable[[Any], base.Problem | None] | None = None,
) -> None:
    """Register an on-policy algorithm with hyperparameters `config` (an
    `algorithms.config.OnPolicyConfig`): single-agent, discrete or continuous
    actions, the networks of `networks.ON_POLICY_KINDS`, and `update_epochs x
    num_minibatches` updates of `num_envs x num_steps` steps;
    `numeric`: its hyperparameters that are only numbers (sweeps);
    `exact`: its factory takes `shards` (exact layouts), for hyperparameters
    that `exact_config` does not refuse."""
    base.register(
        name,
        base.Registration(
            config=config,
            factory=make,
            updates_per_step=updates_per_step,
            env_steps_per_step=env_steps_per_step,
            check_env=base.single_agent(name),
            network_kinds=ON_POLICY_KINDS,
            check=batch_check(steps_in_minibatches),
            check_exact=exact_check(steps_in_minibatches, exact_config) if exact else None,
            numeric=numeric,
        ),
    )
