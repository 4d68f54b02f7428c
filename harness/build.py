"""From a validated spec to what the runner needs: env, optimizer, algorithm
and iteration counts. Problems that need the env to be found (an unknown env
id, an env the algorithm cannot handle, a budget below one iteration) are
reported here as `SpecError`s, before anything is compiled or logged."""

from __future__ import annotations

import json
from typing import Any

import optax

import algorithms
from algorithms import optimizers, sweep
from algorithms.config import GRID_KINDS
from harness import envs
from harness.experiment_spec import DevicesSpec, OptimizerSpec, Spec, SpecError, spec_hash, with_overrides
from harness.judge import ladder
from harness.plan import Plan
from harness.run import devices, tracing


def make_optimizer(
    spec: OptimizerSpec, total_updates: int, exact: bool = False, numbers: dict[str, Any] | None = None
) -> optax.GradientTransformation:
    """optax from the spec's `optimizer:` section; `total_updates` spans the
    linear annealing of the learning rate to zero. `exact`: the forms of
    `algorithms.optimizers`, compiled alike in every program (exact layouts).
    `numbers` (of OPTIMIZER_NUMERIC) replace the section's values: a sweep's,
    possibly tracers."""
    value = {name: getattr(spec, name) for name in OPTIMIZER_NUMERIC} | (numbers or {})
    learning_rate: Any = value["learning_rate"]
    total = max(total_updates, 1)
    if spec.anneal_lr:
        if exact:
            learning_rate = optimizers.linear_schedule(value["learning_rate"], total)
        else:
            learning_rate = optax.linear_schedule(value["learning_rate"], 0.0, total)
    if spec.name == "adam" and exact:
        opt = optax.chain(optimizers.scale_by_adam(eps=value["adam_eps"]), optax.scale_by_learning_rate(learning_rate))
    elif spec.name == "adam":
        opt = optax.adam(learning_rate, eps=value["adam_eps"])
    else:
        opt = optax.sgd(learning_rate, momentum=spec.momentum or None)
    if spec.max_grad_norm is not None:
        clip = optimizers.clip_by_global_norm if exact else optax.clip_by_global_norm
        opt = optax.chain(clip(value["max_grad_norm"]), opt)
    return opt


# The optimizer's settings that enter the computation only as numbers (sweeps).
OPTIMIZER_NUMERIC = ("learning_rate", "adam_eps", "max_grad_norm")


def numeric_keys(spec: Spec) -> tuple[str, ...]:
    """The dotted spec keys a sweep can carry as numbers in the state: the
    algorithm's numeric hyperparameters and the optimizer's, where set (a
    null, e.g. no gradient clipping, is structure)."""
    registration = algorithms.registry[spec.algorithm]
    keys = [
        f"hyperparameters.{name}" for name in registration.numeric if getattr(spec.hyperparameters, name) is not None
    ]
    keys += [f"optimizer.{name}" for name in OPTIMIZER_NUMERIC if getattr(spec.optimizer, name) is not None]
    return tuple(keys)


def _numbers_of(section: str, numbers: dict[str, Any]) -> dict[str, Any]:
    """The values of one section's keys among a sweep's `section.name -> value`."""
    return {key.partition(".")[2]: value for key, value in numbers.items() if key.startswith(f"{section}.")}


def env_steps_per_iteration(spec: Spec) -> int:
    """A seed's env steps in one iteration of `spec`'s algorithm: from its
    hyperparameters alone (no env made, no device asked for)."""
    return algorithms.registry[spec.algorithm].env_steps_per_step(spec.hyperparameters)


def _make_env(spec: Spec, source: str, lines: dict[str, int] | None):
    """The spec's env and its info, or a SpecError naming the key at fault."""
    try:
        return envs.make(spec.env.suite, spec.env.id, spec.env.kwargs, spec.env.wrappers)
    except envs.UnknownEnvError as error:
        raise SpecError(source, [("env.id", str(error))], lines) from None
    except envs.EnvKwargsError as error:  # e.g. a ruleset file that is missing or not one
        raise SpecError(source, [(error.key, str(error))], lines) from None
    except TypeError as error:  # the env constructor rejected a keyword
        raise SpecError(source, [("env.kwargs", str(error))], lines) from None
    except ValueError as error:  # a wrapper that does not fit the env
        raise SpecError(source, [("env.wrappers", str(error))], lines) from None


def _fit_problem(spec: Spec, registration, env) -> tuple[str, str] | None:
    """Why the spec's algorithm, hyperparameters and network do not fit its
    env (the key at fault and the reason), or None."""
    where = f"{spec.env.suite}/{spec.env.id}"
    problem = registration.check_env(spec.hyperparameters, env)
    if problem:
        return "env.id", f"{where}: {problem}"
    problem = registration.check(spec.hyperparameters, spec.network, 1) if registration.check else None
    if problem is not None:
        return f"hyperparameters.{problem[0]}", problem[1]
    kind = spec.network.kind
    if not env.discrete_actions and kind not in ("mlp", "gru"):
        return "network.kind", f"{where} has continuous actions, which {kind} has no head for"
    if kind == "resnet" and len(env.observation_shape) != 3:
        return (
            "network.kind",
            f"resnet needs a board-shaped observation [height, width, channels]; {where} observes shape"
            f" {list(env.observation_shape)} (use mlp)",
        )
    if kind == "item_set":
        return _item_set_problem(spec, env)
    if kind in GRID_KINDS:
        return _grid_network_problem(spec, env.observation_shape)
    return None


def _strength(spec: Spec, env: Any, source: str, lines: dict[str, int] | None) -> tuple[dict[str, Any], dict[str, str]]:
    """The factory's `strength` and `anchors` (their committed ratings, from
    the env's ladder beside the spec's references) and the run's
    `strength.*` tags, or a SpecError naming the key: perfect play asked of
    a game not solved here, a ladder of a game that is not two players', an
    anchor the ladder does not rate."""
    stated = getattr(spec, "strength", None)
    if stated is None:
        return {}, {}
    tags = {"strength": json.dumps(stated.model_dump(mode="json"), separators=(",", ":"))}
    where = f"{spec.env.suite}/{spec.env.id}"
    if stated.perfect_play and (env.solution is None or env.positions is None):
        problem = (
            f"{where} is not solved here: perfect play is measured where the harness solves the game"
            " (pgx tic_tac_toe); rate it on an Elo ladder instead (strength.anchors)"
        )
        raise SpecError(source, [("strength.perfect_play", problem)], lines)
    anchors: tuple[Any, ...] = ()
    if stated.anchors:
        problem = ladder.two_player_problem(env.num_players, where)
        if problem is not None:
            raise SpecError(source, [("strength.anchors", problem)], lines)
        path = ladder.ladder_path(source, spec.env.suite, spec.env.id)
        try:
            anchors, digest = ladder.anchors_of(path, stated.anchors, where)
        except ladder.LadderError as error:
            raise SpecError(source, [("strength.anchors", str(error))], lines) from None
        tags.update({"strength.ladder": path.name, "strength.ladder_sha256": digest})
    return {"strength": stated, "anchors": anchors}, tags


def build(
    spec: Spec,
    source: str = "<spec>",
    lines: dict[str, int] | None = None,
    *,
    use_mesh: bool | None = None,
    swept: tuple[str, ...] = (),
    runs: int | None = None,
) -> Plan:
    """Everything the runner needs. The spec's `devices:` layout is checked
    against the devices there are; a mesh is used when it has more than one
    device (`use_mesh` forces it on or off; off needs a one-device layout).
    A sweep's program (harness.sweep) carries the `swept` keys (of
    `numeric_keys`) as numbers in its state (algorithms.sweep), and trains
    `runs` runs (points x seeds) where a plain run trains its seeds."""
    env, env_info = _make_env(spec, source, lines)
    registration = algorithms.registry[spec.algorithm]
    config = spec.hyperparameters
    problem = _fit_problem(spec, registration, env)
    if problem is not None:
        raise SpecError(source, [problem], lines)
    strength, strength_tags = _strength(spec, env, source, lines)
    steps_per_iteration = env_steps_per_iteration(spec)
    num_iterations = spec.budget.env_steps // steps_per_iteration
    if num_iterations < 1:
        raise SpecError(
            source,
            [
                (
                    "budget.env_steps",
                    f"{spec.budget.env_steps} is less than one iteration ({steps_per_iteration} env steps)",
                )
            ],
            lines,
        )
    try:
        layout = devices.resolve(spec.devices, runs or len(spec.seeds))
    except devices.LayoutError as error:
        raise SpecError(source, [(error.key, str(error))], lines) from None
    if use_mesh is None:
        use_mesh = layout.count > 1
    if not use_mesh and layout.count > 1:
        raise SpecError(source, [("devices.count", f"{layout.count} devices need the mesh")], lines)
    if layout.data_axis > 1:
        if registration.check is None:
            raise SpecError(source, [("devices.data_axis", f"{spec.algorithm} does not run data-parallel")], lines)
        problem = registration.check(config, spec.network, layout.data_axis)
        if problem is not None:
            raise SpecError(source, [(f"hyperparameters.{problem[0]}", f"{problem[1]} (devices.data_axis)")], lines)
    shards = spec.devices.shards
    if shards is not None:
        problem = _exact_problem(spec, registration, layout.data_axis)
        if problem is not None:
            raise SpecError(source, [problem], lines)
    exact = {} if shards is None else {"shards": shards}

    def make_algorithm(numbers: dict[str, Any]) -> algorithms.Algorithm:
        """The algorithm, with a sweep's `numbers` (of `numeric_keys`) in
        place of the spec's values: the same program for every value."""
        optimizer = make_optimizer(
            spec.optimizer,
            num_iterations * registration.updates_per_step(config),
            shards is not None,
            _numbers_of("optimizer", numbers),
        )
        return registration.make(
            config.with_numbers(_numbers_of("hyperparameters", numbers)),
            env,
            network=spec.network,
            optimizer=optimizer,
            axis_name=devices.DATA if use_mesh else None,
            **exact,
            **strength,
        )

    algorithm = make_algorithm({})
    if swept:
        algorithm = sweep.swept(make_algorithm, algorithm)
    algorithm = tracing.traced_once(algorithm)  # the claims check's trace, reused by the programs
    mesh = devices.make_mesh(layout) if use_mesh else None
    return Plan(
        spec,
        spec_hash(spec),
        env,
        env_info,
        algorithm,
        num_iterations,
        steps_per_iteration,
        layout if use_mesh else None,
        mesh,
        strength_tags,
    )


def with_devices(spec: Spec, devices: dict[str, Any]) -> Spec:
    """`spec` with keys of its `devices:` section replaced (the command
    line's); raises pydantic's ValidationError for an impossible layout."""
    placed = spec.devices.model_validate({**spec.devices.model_dump(), **devices})
    return spec.model_copy(update={"devices": placed})


def with_seeds(plan: Plan, seeds: list[int], source: str) -> Plan:
    """`plan` rebuilt to train `seeds` instead of its spec's (same layout;
    harness.experiment_spec.overrides)."""
    changed, _ = with_overrides(plan.spec, {"seeds": list(seeds)}, f"{source} (--seeds)")
    return build(changed, source)


def build_on(spec: Spec, layout: str, source: str = "<spec>") -> Plan:
    """`build` on a layout named `plain` (the plain jitted program on one
    device) or `SxD` (a mesh of S seed x D data devices): what the device
    tests and benchmarks compare."""
    if layout == "plain":
        return build(spec, source, use_mesh=False)
    seed_axis, data_axis = (int(n) for n in layout.split("x"))
    placed = DevicesSpec(
        count=seed_axis * data_axis, seed_axis=seed_axis, data_axis=data_axis, shards=spec.devices.shards
    )
    return build(spec.model_copy(update={"devices": placed}), source, use_mesh=True)


def _exact_problem(spec: Spec, registration: Any, data_axis: int) -> tuple[str, str] | None:
    """Why the spec cannot run on an exact layout (`devices.shards`), if it cannot."""
    shards = spec.devices.shards
    if registration.check_exact is None:
        return "devices.shards", f"{spec.algorithm} has no exact layouts (leave devices.shards out)"
    if shards % data_axis or shards < 2 * data_axis:
        # Measured: with one logical shard per device, XLA compiles the
        # shard's computation differently, and the bits differ.
        return "devices.shards", (
            f"{shards} logical shards do not split into at least two per device over data_axis {data_axis}"
        )
    return registration.check_exact(spec.hyperparameters, spec.network, shards)


def _item_set_problem(spec: Spec, env: Any) -> tuple[str, str] | None:
    """Why `network: {kind: item_set}` cannot read this env's observation as
    items, one per action."""
    where = f"{spec.env.suite}/{spec.env.id}"
    shape = env.observation_shape
    if len(shape) != 1 or shape[0] % env.num_actions:
        return (
            "network.kind",
            f"item_set reads a flat observation of features per action ({env.num_actions} actions);"
            f" {where} observes shape {list(shape)}",
        )
    return None


def _grid_network_problem(spec: Spec, shape: tuple[int, ...]) -> tuple[str, str] | None:
    """Why `network: {kind: grid | grid_gru}` cannot take this env's observation."""
    network = spec.network
    where = f"{spec.env.suite}/{spec.env.id}"
    if len(shape) != 3:
        return (
            "network.kind",
            f"{network.kind} needs a grid observation [height, width, channels]; {where} observes {list(shape)}",
        )
    wrapped = any(w.name == "observe_previous_action_reward" for w in spec.env.wrappers)
    if network.previous_action_reward and network.kind != "grid_gru":
        return "network.previous_action_reward", f"is for grid_gru (the grid agent with memory), not {network.kind}"
    if network.previous_action_reward and not wrapped:
        return "network.previous_action_reward", "needs the env wrapper observe_previous_action_reward in env.wrappers"
    channels = shape[-1] - (2 if network.previous_action_reward else 0)
    if network.id_channels > channels:
        return "network.id_channels", f"{network.id_channels} id channels, but {where}'s grid has {channels} channels"
    return None
