"""AlphaZero: self-play with tree search on the real environment, an episode
replay buffer, and training of a policy-value network; one iteration (collect
and train) is one pure `step`.

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
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from algorithms import base, parallel
from algorithms.alphazero.buffer import Buffer, buffer_add, buffer_end_episodes, buffer_init, buffer_sample
from algorithms.alphazero.config import (
    AlphaZeroConfig,
    check_batches,
    check_env,
    check_exact,
    env_steps_per_step,
    updates_per_step,
)
from algorithms.alphazero.evaluation import make_evaluate
from algorithms.alphazero.networks import make_az_network
from algorithms.alphazero.opponents import pool_init, start_games
from algorithms.alphazero.ranked import (
    RankedMemory,
    ranked_memory_add,
    ranked_memory_init,
    ranked_reward,
    ranked_threshold,
)
from algorithms.alphazero.search import Games, make_search
from algorithms.alphazero.state import AlphaZeroState, SelfPlayStats, trainable, with_stats
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
    single_player = env.num_players == 1
    evaluation = config.evaluation

    def init(key: jax.Array) -> AlphaZeroState:
        local_envs = parallel.local_count(config.num_envs, axis_name)
        net_key, games_key, key = jax.random.split(key, 3)
        params = net.init(net_key, jnp.zeros(env.observation_shape, jnp.float32))
        pool = None if single_player else pool_init(params, evaluation.pool_size)
        zero = jnp.zeros((), jnp.float32)
        return AlphaZeroState(
            params=params,
            opt_state=optimizer.init(trainable(params)[0]),
            games=start_games(env, games_key, config.num_envs, axis_name),
            buffer=buffer_init(local_envs, config.capacity, env.observation_shape, env.num_actions),
            ranked=ranked_memory_init(local_envs, config.ranked_reward.memory),
            stats=SelfPlayStats(zero, zero, zero),
            pool=pool,
            key=key,
            iteration=jnp.zeros((), jnp.int32),
            evaluations=jnp.zeros((), jnp.int32),
        )

    def self_play(params, games: Games, buffer: Buffer, ranked: RankedMemory, key: jax.Array):
        if single_player:
            threshold = ranked_threshold(ranked, config.ranked_reward.quantile, axis_name)
        else:
            threshold = jnp.zeros(())

        def move(carry, key):
            games, buffer, ranked = carry
            search_key, env_key, coin_key = jax.random.split(key, 3)
            search_keys = parallel.split(search_key, config.num_envs, axis_name)
            action, policy = search(params, search_keys, games, threshold, explore=True)
            timestep = games.timestep
            buffer = buffer_add(buffer, timestep.observation, policy, timestep.current_player)
            env_keys = parallel.split(env_key, config.num_envs, axis_name)
            env_state, next_ts = jax.vmap(env.step)(games.env_state, action, env_keys)
            done = next_ts.terminated | next_ts.truncated
            episode_return = games.episode_return + next_ts.reward[:, 0]
            if single_player:
                outcome = ranked_reward(episode_return, threshold, coin_key, axis_name)[:, None]
                ranked = ranked_memory_add(ranked, episode_return, next_ts.terminated)
            else:
                outcome = next_ts.reward
            buffer = buffer_end_episodes(buffer, next_ts.terminated, next_ts.truncated, outcome)
            length = games.length + 1
            ended = {
                "count": done,
                "length": jnp.where(done, length, 0),
                "return": jnp.where(done, episode_return, 0.0),
                "draws": next_ts.terminated & jnp.all(next_ts.reward == 0, axis=-1),
            }
            if shards is None:
                ended = jax.tree.map(jnp.sum, ended)
            else:  # every game's, in game order, on every device: one sum on any layout
                ended = jax.tree.map(jnp.sum, parallel.all_gather(ended, axis_name))
            games = Games(env_state, next_ts, jnp.where(done, 0.0, episode_return), jnp.where(done, 0, length))
            return (games, buffer, ranked), ended

        keys = jax.random.split(key, config.collection_steps)
        (games, buffer, ranked), ended = jax.lax.scan(move, (games, buffer, ranked), keys)
        ended = jax.tree.map(jnp.sum, ended)
        if shards is None:
            ended = parallel.psum(ended, axis_name)
        return games, buffer, ranked, ended, threshold

    def l2_of(params) -> jax.Array:
        return 0.5 * sum(jnp.sum(p**2) for p in jax.tree.leaves(params))

    def loss_fn(params, batch_stats, observation, policy, value, weight, total, with_l2=True):
        """This shard's part of the minibatch's loss: sums over its draws,
        divided by the weight `total` of all of them, so that the shards'
        losses (and gradients) add up to the minibatch's (with its share of
        the L2 term, unless not `with_l2`); and the network's batch
        statistics' new running averages (None without batch norm)."""
        (logits, predicted), updated = train_net.apply(
            with_stats(params, batch_stats), observation, mutable=["batch_stats"]
        )
        batch_stats = updated.get("batch_stats")
        policy_loss = jnp.sum(weight * optax.softmax_cross_entropy(logits, policy)) / total
        value_loss = jnp.sum(weight * (predicted - value) ** 2) / total
        loss = policy_loss + config.value_coef * value_loss
        if with_l2:
            l2 = l2_of(params)
            if parallel.size(axis_name) > 1:
                l2 = l2 / parallel.size(axis_name)
            loss = loss + config.l2_coef * l2
        return loss, ({"loss": loss, "policy_loss": policy_loss, "value_loss": value_loss}, batch_stats)

    def gradient(params, batch_stats, batch, total):
        """The minibatch's gradient and loss figures, the same on every
        device, and the new averages of the batch statistics (batch norm's
        are over the devices already)."""
        if shards is None:
            grads, (aux, batch_stats) = jax.grad(loss_fn, has_aux=True)(params, batch_stats, *batch, total)
            return (*parallel.psum((grads, aux), axis_name), batch_stats)
        # Exact: this device's draws as its logical shards, one after another,
        # added in shard order over all devices; the L2 term once, after.
        local = parallel.local_shards(shards, axis_name)
        parts = jax.tree.map(lambda x: x.reshape(local, x.shape[0] // local, *x.shape[1:]), batch)

        def one(carry, part):
            grads, (aux, _) = jax.grad(lambda *a: loss_fn(*a, with_l2=False), has_aux=True)(params, None, *part, total)
            return carry, (grads, aux)

        _, parts = parallel.opaque_scan(one, (), parts)
        grads, aux = parallel.fold_sum(parts, axis_name)
        grads = jax.tree.map(lambda g, p: g + config.l2_coef * p, grads, params)
        return grads, dict(aux, loss=aux["loss"] + config.l2_coef * l2_of(params)), None

    def train(params, opt_state, buffer: Buffer, key: jax.Array, apply: jax.Array):
        def update(carry, key):
            params, opt_state = carry
            batch = buffer_sample(buffer, key, config.train_batch_size, axis_name)
            total = jnp.maximum(parallel.psum(batch[-1].sum(), axis_name), 1.0)  # a count: exact
            weights, batch_stats = trainable(params)
            grads, aux, batch_stats = gradient(weights, batch_stats, batch, total)
            aux = dict(aux, grad_norm=optax.global_norm(grads))
            updates, new_opt_state = optimizer.update(grads, opt_state, weights)
            new = (with_stats(optax.apply_updates(weights, updates), batch_stats), new_opt_state)
            # Warm-up: measured, not applied.
            return jax.tree.map(lambda n, o: jnp.where(apply, n, o), new, (params, opt_state)), aux

        keys = jax.random.split(key, config.train_steps)
        (params, opt_state), aux = jax.lax.scan(update, (params, opt_state), keys)
        return params, opt_state, jax.tree.map(jnp.mean, aux)

    def ready_fraction(buffer: Buffer) -> jax.Array:
        if shards is None:
            return parallel.pmean(buffer.ready.mean(), axis_name)
        return parallel.psum(buffer.ready.sum(), axis_name) / (config.num_envs * config.capacity)  # a count: exact

    def step(state: AlphaZeroState) -> tuple[AlphaZeroState, base.Metrics]:
        key, play_key, train_key = jax.random.split(state.key, 3)
        games, buffer, ranked, ended, threshold = self_play(
            state.params, state.games, state.buffer, state.ranked, play_key
        )
        training = state.iteration >= config.warmup_iterations
        params, opt_state, metrics = train(state.params, state.opt_state, buffer, train_key, training)
        any_ended = ended["count"] > 0
        count = jnp.maximum(ended["count"], 1)
        previous = state.stats
        stats = SelfPlayStats(
            length=jnp.where(any_ended, ended["length"] / count, previous.length),
            episode_return=jnp.where(any_ended, ended["return"] / count, previous.episode_return),
            draw_rate=jnp.where(any_ended, ended["draws"] / count, previous.draw_rate),
        )
        metrics = dict(
            metrics,
            episode_length=stats.length,
            games_finished=ended["count"].astype(jnp.float32),
            buffer_ready=ready_fraction(buffer),
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
    return base.Algorithm(
        init=init,
        step=step,
        evaluate=make_evaluate(config, env, search, axis_name),
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
    ),
)
