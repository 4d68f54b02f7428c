"""AlphaZero: self-play with tree search on the real environment, an episode
replay buffer, and training of a policy-value network; one iteration (collect
and train) is one pure `step`, made here of `self_play.make_self_play` and
`training.make_train`.

- Search is mctx's Gumbel MuZero policy (default) or classic PUCT with
  Dirichlet noise, over a recurrent function that steps the real env. Illegal
  actions get the lowest logit; a terminal transition ends the branch
  (discount 0); in two-player games the value changes sign whenever the
  player to move changes.
- Self-play runs `num_envs` games in parallel for `collection_steps` moves
  under `lax.scan`, with auto-reset. Each move's observation, search policy
  and player go into a buffer row per game (`capacity` moves each); when a
  game ends, all its moves get their value target: the final reward of the
  player who made them. Games cut by a time limit never get one.
- Single-player tasks learn from ranked rewards: an episode's return is
  compared with the `quantile` of recent returns, giving +1 above, -1 below
  and a fair coin on a tie (inside the tree a tie counts 0, its expectation).
- Training: `train_steps` minibatches of `train_batch_size` drawn uniformly
  from the moves that have targets; loss = policy cross-entropy against the
  search policy + value MSE + L2. Before `warmup_iterations` have passed the
  loss is measured but not applied.
- `evaluate` plays the current network (search without noise, best action)
  against a uniform-random player, a greedy one-ply player, and a pool of
  earlier parameters with approximate Elo ratings; a single-player task
  with an exact solver (Knapsack) also gets each player's optimality gap.
- `assess`, where the spec asks (`strength:`), measures the final network
  once training is over: against a perfect player where the game is solved
  (tic-tac-toe, `alphazero.strength`), on an anchored Elo ladder where it is
  not (Connect Four, `alphazero.ladder`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from algorithms import base, parallel
from algorithms.alphazero.assessment import make_assess
from algorithms.alphazero.buffer import buffer_init
from algorithms.alphazero.config import (
    AlphaZeroConfig,
    StrengthConfig,
    check_batches,
    check_env,
    check_exact,
    env_steps_per_step,
    updates_per_step,
)
from algorithms.alphazero.evaluation import make_evaluate
from algorithms.alphazero.ladder import Anchor
from algorithms.alphazero.networks import make_az_network
from algorithms.alphazero.opponents import pool_init, start_games
from algorithms.alphazero.ranked import ranked_memory_init
from algorithms.alphazero.search import make_search
from algorithms.alphazero.self_play import latest_stats, make_self_play, ready_fraction
from algorithms.alphazero.state import AlphaZeroState, SelfPlayStats, trainable
from algorithms.alphazero.training import make_train
from algorithms.base import Environment
from algorithms.config import NetworkConfig
from algorithms.layers import ROW_STABLE_WIDTH


def make_alphazero(
    config: AlphaZeroConfig,
    env: Environment,
    *,
    network: NetworkConfig,
    optimizer: optax.GradientTransformation,
    axis_name: str | None = None,
    shards: int | None = None,
    strength: StrengthConfig | None = None,
    anchors: tuple[Anchor, ...] = (),
) -> base.Algorithm:
    """AlphaZero on `env` (one or two players, discrete actions).

    Args:
      config: the spec's `hyperparameters` (num_envs, collection_steps,
        capacity, train_steps, train_batch_size, warmup_iterations,
        value_coef, l2_coef, the search's settings: search, num_simulations,
        max_depth, max_num_considered_actions, gumbel_scale,
        dirichlet_alpha, dirichlet_fraction, pb_c_init, temperature;
        `ranked_reward` (memory, quantile) and `evaluation` (games,
        pool_size)).
      env: the environment, unbatched, with auto-reset.
      network: the spec's `network` (resnet or mlp, see
        `alphazero.networks.make_az_network`).
      optimizer: applied to the summed gradient of each minibatch.
      axis_name: the data-parallel axis the games, buffer rows and ranked
        memory are sharded over (None: one device).
      shards: when set, an exact layout (at least two logical shards per
        device of `axis_name`; an mlp or item_set network): dense layers
        compute row-stable widths, each minibatch's gradient is taken one
        logical shard after another and the shards' parts are added in
        shard order, and the self-play figures are sums over all games in
        game order, so the bits do not depend on the number of devices.
      strength: the spec's `strength:` section: what `assess` measures of
        the final parameters (`alphazero.assessment`); None: nothing.
      anchors: the Elo ladder's anchors `strength.anchors` names, with their
        committed ratings.

    The state, for one seed, with B = num_envs / D games on this shard of D,
    C = capacity, A = num_actions, M = ranked_reward.memory and P =
    evaluation.pool_size:
      params, opt_state: the network's variables (with batch norm, its
        statistics' running averages too) and the optimizer's (replicated).
      games: B games in progress (env states, time steps, [B] returns, [B]
        lengths).
      buffer: [B, C, *observation_shape] observations, [B, C, A] search
        policies, [B, C] player, value target, pending and ready flags.
      ranked: [B, M] recent returns (single-player tasks).
      stats: figures of the games that ended most recently, [] each.
      pool: P earlier parameters, ratings and ages (two-player games; None
        otherwise).
      key, iteration, evaluations: [] each.

    `step` is one iteration (self-play, then `train_steps` updates);
    `evaluate` plays `evaluation.games` games against each opponent
    (`alphazero.evaluation.make_evaluate`).
    """
    align = 1 if shards is None else ROW_STABLE_WIDTH
    net = make_az_network(network, env.num_actions, env.observation_shape, align=align)
    train_net = make_az_network(
        network, env.num_actions, env.observation_shape, for_gradients=True, align=align, axis_name=axis_name
    )
    search = make_search(config, env, net)
    self_play = make_self_play(config, env, search, axis_name, shards)
    train = make_train(config, train_net, optimizer, axis_name, shards)
    single_player = env.num_players == 1

    def init(key: jax.Array) -> AlphaZeroState:
        local_envs = parallel.local_count(config.num_envs, axis_name)
        net_key, games_key, key = jax.random.split(key, 3)
        params = net.init(net_key, jnp.zeros(env.observation_shape, jnp.float32))
        zero = jnp.zeros((), jnp.float32)
        return AlphaZeroState(
            params=params,
            opt_state=optimizer.init(trainable(params)[0]),
            games=start_games(env, games_key, config.num_envs, axis_name),
            buffer=buffer_init(local_envs, config.capacity, env.observation_shape, env.num_actions),
            ranked=ranked_memory_init(local_envs, config.ranked_reward.memory),
            stats=SelfPlayStats(zero, zero, zero),
            pool=None if single_player else pool_init(params, config.evaluation.pool_size),
            key=key,
            iteration=jnp.zeros((), jnp.int32),
            evaluations=jnp.zeros((), jnp.int32),
        )

    def step(state: AlphaZeroState) -> tuple[AlphaZeroState, base.Metrics]:
        key, play_key, train_key = jax.random.split(state.key, 3)
        games, buffer, ranked, ended, threshold = self_play(
            state.params, state.games, state.buffer, state.ranked, play_key
        )
        training = state.iteration >= config.warmup_iterations
        params, opt_state, metrics = train(state.params, state.opt_state, buffer, train_key, training)
        stats = latest_stats(state.stats, ended)
        metrics = dict(
            metrics,
            episode_length=stats.length,
            games_finished=ended["count"].astype(jnp.float32),
            buffer_ready=ready_fraction(buffer, config, axis_name, shards),
        )
        if single_player:
            metrics.update(
                episode_return=stats.episode_return,
                ranked_threshold=jnp.where(jnp.isfinite(threshold), threshold, 0.0),
            )
        else:
            metrics.update(draw_rate=stats.draw_rate)
        state = state._replace(
            params=params,
            opt_state=opt_state,
            games=games,
            buffer=buffer,
            ranked=ranked,
            stats=stats,
            key=key,
            iteration=state.iteration + 1,
        )
        return state, metrics

    # A ResNet runs the seeds one after another: a batch of seeds' parameters
    # turns its convolutions into grouped ones, which XLA's CPU backend runs
    # slowly (one search over 2 x 256 connect_four positions: 2.4 s vmapped,
    # 0.63 s mapped); within a seed the games are batched anyway.
    assess = None
    if strength is not None:
        assess = make_assess(strength, env, search, anchors)
    return base.Algorithm(
        init=init,
        step=step,
        evaluate=make_evaluate(config, env, search, axis_name),
        assess=assess,
        map_seeds=network.kind == "resnet",
    )


base.register(
    "alphazero",
    base.Registration(
        config=AlphaZeroConfig,
        factory=make_alphazero,
        updates_per_step=updates_per_step,
        env_steps_per_step=env_steps_per_step,
        check_env=check_env,
        network_kinds=("resnet", "mlp", "item_set"),
        check=check_batches,
        check_exact=check_exact,
        numeric=("value_coef", "l2_coef"),
        strength=StrengthConfig,
    ),
)
