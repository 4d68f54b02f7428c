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
  earlier parameters with approximate Elo ratings.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mctx
import optax

from algorithms import base, parallel
from algorithms.base import Environment, TimeStep
from algorithms.networks import make_az_network, masked_logits

ELO_RANGE = 100_000.0  # ratings are searched in [-ELO_RANGE, ELO_RANGE]


# -------------------------------------------------------------------- buffer


class Buffer(NamedTuple):
    """Experiences of B games, `capacity` moves per game row, written in
    lockstep (every game makes one move per self-play step)."""

    observation: jax.Array  # [B, C, *obs]
    policy: jax.Array  # [B, C, A] search policy
    player: jax.Array  # [B, C] int32, who was to move
    value: jax.Array  # [B, C] value target, once known
    pending: jax.Array  # [B, C] bool, the move's game is still being played
    ready: jax.Array  # [B, C] bool, the move has its value target
    pointer: jax.Array  # [] int32, the next column to write


def buffer_init(num_envs: int, capacity: int, observation_shape: tuple[int, ...], num_actions: int) -> Buffer:
    shape = (num_envs, capacity)
    return Buffer(
        observation=jnp.zeros((*shape, *observation_shape), jnp.float32),
        policy=jnp.zeros((*shape, num_actions), jnp.float32),
        player=jnp.zeros(shape, jnp.int32),
        value=jnp.zeros(shape, jnp.float32),
        pending=jnp.zeros(shape, bool),
        ready=jnp.zeros(shape, bool),
        pointer=jnp.zeros((), jnp.int32),
    )


def buffer_add(buffer: Buffer, observation: jax.Array, policy: jax.Array, player: jax.Array) -> Buffer:
    """One move of every game, overwriting the oldest column."""
    p = buffer.pointer

    def put(column, x):
        return column.at[:, p].set(x)

    return buffer._replace(
        observation=put(buffer.observation, observation),
        policy=put(buffer.policy, policy),
        player=put(buffer.player, player),
        value=put(buffer.value, 0.0),
        pending=put(buffer.pending, True),
        ready=put(buffer.ready, False),
        pointer=(p + 1) % buffer.pending.shape[1],
    )


def buffer_end_episodes(buffer: Buffer, terminated: jax.Array, truncated: jax.Array, outcome: jax.Array) -> Buffer:
    """Close the games that ended: a terminated game's pending moves get the
    final `outcome [B, num_players]` of the player who made each; a truncated
    game's pending moves are dropped without a target."""
    ended = terminated[:, None] & buffer.pending
    target = jnp.take_along_axis(outcome, buffer.player, axis=1)
    return buffer._replace(
        value=jnp.where(ended, target, buffer.value),
        ready=buffer.ready | ended,
        pending=buffer.pending & ~(terminated | truncated)[:, None],
    )


def buffer_sample(buffer: Buffer, key: jax.Array, size: int, axis_name: str | None = None):
    """`size` moves drawn uniformly (with replacement) from those with
    targets; `weight` is 0 for every draw when there are none yet.

    Under `axis_name` the buffer's rows are sharded: the draw is made over the
    global buffer, and each shard gets its `size / D` part of the draws
    (wherever their rows live)."""
    ready = parallel.all_gather(buffer.ready, axis_name).reshape(-1)
    count = ready.sum()
    probabilities = jnp.where(count > 0, ready / jnp.maximum(count, 1), 1.0 / ready.shape[0])
    index = jax.random.choice(key, ready.shape[0], (size,), p=probabilities)
    weight = (count > 0).astype(jnp.float32) * ready[parallel.local_slice(index, axis_name)].astype(jnp.float32)
    fields = (buffer.observation, buffer.policy, buffer.value)
    if parallel.size(axis_name) == 1:
        observation, policy, value = (x.reshape(-1, *x.shape[2:])[index] for x in fields)
        return observation, policy, value, weight
    # Each shard fills in the draws from its own rows (zeros elsewhere); a
    # reduce-scatter sums them and hands every shard its part.
    rows, capacity = buffer.ready.shape
    row, column = jnp.divmod(index, capacity)
    local_row = row - parallel.index(axis_name) * rows
    mine = (local_row >= 0) & (local_row < rows)
    local_row = jnp.clip(local_row, 0, rows - 1)

    def take(x):
        values = x[local_row, column]
        return jnp.where(mine.reshape(-1, *[1] * (values.ndim - 1)), values, 0)

    observation, policy, value = jax.lax.psum_scatter(
        tuple(take(x) for x in fields), axis_name, scatter_dimension=0, tiled=True
    )
    return observation, policy, value, weight


# ------------------------------------------------------------ ranked reward


class RankedMemory(NamedTuple):
    """Recent complete episode returns, `memory` per game row."""

    returns: jax.Array  # [B, M]
    valid: jax.Array  # [B, M] bool
    pointer: jax.Array  # [B] int32


def ranked_memory_init(num_envs: int, memory: int) -> RankedMemory:
    return RankedMemory(
        jnp.zeros((num_envs, memory), jnp.float32), jnp.zeros((num_envs, memory), bool), jnp.zeros(num_envs, jnp.int32)
    )


def ranked_threshold(memory: RankedMemory, quantile: float, axis_name: str | None = None) -> jax.Array:
    """The `quantile` of the remembered returns (of every shard's rows); -inf
    while there are none."""
    valid, returns = parallel.all_gather((memory.valid, memory.returns), axis_name)
    values = jnp.where(valid, returns, jnp.nan).reshape(-1)
    threshold = jnp.nanquantile(values, quantile)
    return jnp.where(valid.any(), threshold, -jnp.inf)


def ranked_reward(returns: jax.Array, threshold: jax.Array, key: jax.Array, axis_name: str | None = None) -> jax.Array:
    """+1 above the threshold, -1 below, a fair coin on a tie."""
    coin = jnp.where(parallel.bernoulli(key, 0.5, returns.shape, axis_name), 1.0, -1.0)
    return jnp.where(returns > threshold, 1.0, jnp.where(returns < threshold, -1.0, coin))


def ranked_memory_add(memory: RankedMemory, returns: jax.Array, ended: jax.Array) -> RankedMemory:
    rows = jnp.arange(returns.shape[0])
    column = memory.pointer
    return RankedMemory(
        returns=memory.returns.at[rows, column].set(jnp.where(ended, returns, memory.returns[rows, column])),
        valid=memory.valid.at[rows, column].set(memory.valid[rows, column] | ended),
        pointer=jnp.where(ended, (column + 1) % memory.returns.shape[1], column),
    )


# -------------------------------------------------------------------- search


class Games(NamedTuple):
    """B games in progress."""

    env_state: Any  # [B, ...]
    timestep: TimeStep  # [B, ...]
    episode_return: jax.Array  # [B] player 0's env return so far
    length: jax.Array  # [B] moves so far


def make_search(config: Any, env: Environment, net: Any):
    """`search(params, keys [B], games, threshold, explore) -> (action [B], policy [B, A])`.

    Each game is searched with its own key, so a game's search does not
    depend on which other games share the batch (or the device). With
    `explore`, self-play's noise is on (Gumbel noise, or Dirichlet noise and
    visit-count sampling at `temperature`); without, the search is
    deterministic and returns its best action.
    """
    single_player = env.num_players == 1

    def evaluate_position(params, timestep: TimeStep):
        logits, value = net.apply(params, timestep.observation)
        return masked_logits(logits, timestep.legal_action_mask), value

    def search_batch(params, key, games: Games, threshold: jax.Array, explore: bool):
        num_games = games.length.shape[0]

        def recurrent_fn(params, key, action, embedding):
            env_state, timestep, episode_return = embedding
            mover = timestep.current_player
            env_state, next_ts = jax.vmap(env.step)(env_state, action, jax.random.split(key, num_games))
            done = next_ts.terminated | next_ts.truncated
            logits, value = evaluate_position(params, next_ts)
            mover_reward = jnp.take_along_axis(next_ts.reward, mover[:, None], axis=1)[:, 0]
            if single_player:
                episode_return = episode_return + mover_reward
                # The tree sees the ranked outcome at the end, and 0 (the
                # expectation of the coin) on a tie.
                reward = jnp.where(done, jnp.sign(episode_return - threshold), 0.0)
                discount = jnp.ones_like(reward)
            else:
                reward = mover_reward
                discount = jnp.where(next_ts.current_player == mover, 1.0, -1.0)
            output = mctx.RecurrentFnOutput(
                reward=reward,
                discount=jnp.where(done, 0.0, discount),
                prior_logits=logits,
                value=jnp.where(done, 0.0, value),
            )
            return output, (env_state, next_ts, jnp.where(done, 0.0, episode_return))

        logits, value = evaluate_position(params, games.timestep)
        root = mctx.RootFnOutput(
            prior_logits=logits, value=value, embedding=(games.env_state, games.timestep, games.episode_return)
        )
        invalid = ~games.timestep.legal_action_mask
        if config.search == "gumbel":
            out = mctx.gumbel_muzero_policy(
                params,
                key,
                root,
                recurrent_fn,
                config.num_simulations,
                invalid_actions=invalid,
                max_depth=config.max_depth,
                max_num_considered_actions=config.max_num_considered_actions,
                gumbel_scale=config.gumbel_scale if explore else 0.0,
            )
            return out.action, out.action_weights
        out = mctx.muzero_policy(
            params,
            key,
            root,
            recurrent_fn,
            config.num_simulations,
            invalid_actions=invalid,
            max_depth=config.max_depth,
            dirichlet_fraction=config.dirichlet_fraction if explore else 0.0,
            dirichlet_alpha=config.dirichlet_alpha,
            pb_c_init=config.pb_c_init,
            temperature=config.temperature,
        )
        action = out.action if explore else jnp.argmax(out.action_weights, axis=-1)
        return action, out.action_weights

    def search(params, keys: jax.Array, games: Games, threshold: jax.Array, explore: bool):
        def one(key, game):
            action, policy = search_batch(params, key, jax.tree.map(lambda x: x[None], game), threshold, explore)
            return action[0], policy[0]

        return jax.vmap(one)(keys, games)

    return search


# ---------------------------------------------------------------- opponents


def random_player(env: Environment):
    def act(key, games: Games):
        logits = jnp.where(games.timestep.legal_action_mask, 0.0, -jnp.inf)
        return jax.random.categorical(key, logits)

    return act


def greedy_player(env: Environment):
    """One-ply lookahead: the legal move with the largest immediate reward
    for the mover (a win, in a board game), ties broken at random."""

    def act(key, games: Games):
        num_games = games.length.shape[0]
        actions = jnp.arange(env.num_actions)
        step_keys = jax.random.split(jax.random.fold_in(key, 1), num_games)

        def rewards_of(env_state, timestep, step_key):
            def try_action(action):
                _, next_ts = env.step(env_state, action, step_key)
                return next_ts.reward[timestep.current_player]

            return jax.vmap(try_action)(actions)

        rewards = jax.vmap(rewards_of)(games.env_state, games.timestep, step_keys)
        noise = jax.random.uniform(key, rewards.shape, maxval=1e-3)
        return jnp.argmax(jnp.where(games.timestep.legal_action_mask, rewards + noise, -jnp.inf), axis=-1)

    return act


def start_games(env: Environment, key: jax.Array, num_games: int, axis_name: str | None = None) -> Games:
    """`num_games` new games (this shard's part of them, under `axis_name`)."""
    env_state, timestep = jax.vmap(env.reset)(parallel.split(key, num_games, axis_name))
    local = parallel.local_count(num_games, axis_name)
    return Games(env_state, timestep, jnp.zeros(local, jnp.float32), jnp.zeros(local, jnp.int32))


def play(env: Environment, key: jax.Array, num_games: int, agent, opponent):
    """Play `num_games` games to their end, the agent as player `g % 2` of
    game g (player 0 in a single-player task, where `opponent` is unused).
    `agent` and `opponent` map `(key, games) -> actions [num_games]`.
    Returns the agent's total reward per game."""
    start_key, loop_key = jax.random.split(key)
    games = start_games(env, start_key, num_games)
    agent_player = jnp.arange(num_games) % env.num_players

    def body(carry):
        games, total, finished, key = carry
        key, agent_key, opponent_key, step_key = jax.random.split(key, 4)
        action = agent(agent_key, games)
        if env.num_players > 1:
            action = jnp.where(games.timestep.current_player == agent_player, action, opponent(opponent_key, games))
        env_state, timestep = jax.vmap(env.step)(games.env_state, action, jax.random.split(step_key, num_games))
        reward = jnp.take_along_axis(timestep.reward, agent_player[:, None], axis=1)[:, 0]
        total = total + jnp.where(finished, 0.0, reward)
        finished = finished | timestep.terminated | timestep.truncated
        return Games(env_state, timestep, games.episode_return, games.length + 1), total, finished, key

    def cond(carry):
        return ~carry[2].all()

    init = (games, jnp.zeros(num_games, jnp.float32), jnp.zeros(num_games, bool), loop_key)
    return jax.lax.while_loop(cond, body, init)[1]


def by_slices(players, sizes: tuple[int, ...]):
    """One `(key, games) -> actions` from several, each playing its own
    consecutive slice of the games (`sizes[i]` games for `players[i]`)."""

    def act(key, games: Games):
        actions, start = [], 0
        for i, (player, size) in enumerate(zip(players, sizes, strict=True)):
            part = jax.tree.map(lambda x, a=start, b=start + size: x[a:b], games)
            actions.append(player(jax.random.fold_in(key, i), part))
            start += size
        return jnp.concatenate(actions)

    return act


def pool_params_count(pool_params: Any) -> int:
    return jax.tree.leaves(pool_params)[0].shape[0]


def outcome_rates(total: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Win, draw and loss rates from the agent's per-game totals."""
    return (total > 0).mean(), (total == 0).mean(), (total < 0).mean()


def elo_expected(difference: jax.Array) -> jax.Array:
    return 1.0 / (1.0 + 10.0 ** (-difference / 400.0))


def elo_rating(scores: jax.Array, ratings: jax.Array, valid: jax.Array) -> jax.Array:
    """The rating R at which the expected score against the valid opponents
    (ratings R_j) equals the score achieved: the maximum-likelihood Elo of a
    newcomer against a fixed pool, found by bisection. 0 with no opponents."""

    def bisect(_, bounds):
        low, high = bounds
        mid = (low + high) / 2
        surplus = jnp.sum(jnp.where(valid, elo_expected(mid - ratings) - scores, 0.0))
        return jnp.where(surplus > 0, low, mid), jnp.where(surplus > 0, mid, high)

    low, high = jax.lax.fori_loop(0, 60, bisect, (jnp.float32(-ELO_RANGE), jnp.float32(ELO_RANGE)))
    return jnp.where(valid.any(), (low + high) / 2, 0.0)


# ------------------------------------------------------------------- state


class Pool(NamedTuple):
    """Earlier parameters, with their ratings, for evaluation."""

    params: Any  # [P, ...]
    rating: jax.Array  # [P]
    valid: jax.Array  # [P] bool
    age: jax.Array  # [P] int32, when each was added (evaluation count)


class SelfPlayStats(NamedTuple):
    """Figures of the games that ended most recently (kept when none ended)."""

    length: jax.Array  # []
    episode_return: jax.Array  # [] player 0's return (single-player: the env return)
    draw_rate: jax.Array  # []


class AlphaZeroState(NamedTuple):
    params: Any
    opt_state: Any
    games: Games
    buffer: Buffer
    ranked: RankedMemory
    stats: SelfPlayStats
    pool: Pool | None  # two-player games only
    key: jax.Array
    iteration: jax.Array  # [] int32, iterations done
    evaluations: jax.Array  # [] int32, evaluations done


def env_steps_per_step(config: Any) -> int:
    return config.num_envs * config.collection_steps


def updates_per_step(config: Any) -> int:
    return config.train_steps


def check_shards(config: Any, network: Any, shards: int) -> tuple[str, str] | None:
    del network
    if config.num_envs % shards:
        return "num_envs", f"num_envs ({config.num_envs}) does not split over {shards} data-parallel devices"
    if config.train_batch_size % shards:
        return (
            "train_batch_size",
            f"train_batch_size ({config.train_batch_size}) does not split over {shards} data-parallel devices",
        )
    return None


def check_env(config: Any, env: Environment) -> str | None:
    del config
    if not env.discrete_actions:
        return "alphazero needs a discrete action space; this env's actions are continuous"
    if env.num_players not in (1, 2):
        return f"alphazero plays one- or two-player games; this env has {env.num_players} players"
    return None


def make_alphazero(
    config: Any,
    env: Environment,
    *,
    network: Any,
    optimizer: optax.GradientTransformation,
    axis_name: str | None = None,
) -> base.Algorithm:
    net = make_az_network(network, env.num_actions, env.observation_shape)
    train_net = make_az_network(network, env.num_actions, env.observation_shape, for_gradients=True)
    search = make_search(config, env, net)
    single_player = env.num_players == 1
    evaluation = config.evaluation

    def init(key: jax.Array) -> AlphaZeroState:
        local_envs = parallel.local_count(config.num_envs, axis_name)
        net_key, games_key, key = jax.random.split(key, 3)
        params = net.init(net_key, jnp.zeros(env.observation_shape, jnp.float32))
        pool = None
        if not single_player:
            size = evaluation.pool_size
            pool = Pool(
                params=jax.tree.map(lambda p: jnp.broadcast_to(p, (size, *p.shape)), params),
                rating=jnp.zeros(size, jnp.float32),
                valid=jnp.arange(size) == 0,  # the initial parameters, rated 0
                age=jnp.zeros(size, jnp.int32),
            )
        zero = jnp.zeros((), jnp.float32)
        return AlphaZeroState(
            params=params,
            opt_state=optimizer.init(params),
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
                "count": done.sum(),
                "length": jnp.where(done, length, 0).sum(),
                "return": jnp.where(done, episode_return, 0.0).sum(),
                "draws": (next_ts.terminated & jnp.all(next_ts.reward == 0, axis=-1)).sum(),
            }
            games = Games(env_state, next_ts, jnp.where(done, 0.0, episode_return), jnp.where(done, 0, length))
            return (games, buffer, ranked), ended

        keys = jax.random.split(key, config.collection_steps)
        (games, buffer, ranked), ended = jax.lax.scan(move, (games, buffer, ranked), keys)
        ended = parallel.psum(jax.tree.map(jnp.sum, ended), axis_name)
        return games, buffer, ranked, ended, threshold

    def loss_fn(params, observation, policy, value, weight, total):
        """This shard's part of the minibatch's loss: sums over its draws,
        divided by the weight `total` of all of them, so that the shards'
        losses (and gradients) add up to the minibatch's."""
        logits, predicted = train_net.apply(params, observation)
        policy_loss = jnp.sum(weight * optax.softmax_cross_entropy(logits, policy)) / total
        value_loss = jnp.sum(weight * (predicted - value) ** 2) / total
        l2 = 0.5 * sum(jnp.sum(p**2) for p in jax.tree.leaves(params))
        if parallel.size(axis_name) > 1:
            l2 = l2 / parallel.size(axis_name)
        loss = policy_loss + config.value_coef * value_loss + config.l2_coef * l2
        return loss, {"loss": loss, "policy_loss": policy_loss, "value_loss": value_loss}

    def train(params, opt_state, buffer: Buffer, key: jax.Array, apply: jax.Array):
        def update(carry, key):
            params, opt_state = carry
            batch = buffer_sample(buffer, key, config.train_batch_size, axis_name)
            total = jnp.maximum(parallel.psum(batch[-1].sum(), axis_name), 1.0)
            grads, aux = jax.grad(loss_fn, has_aux=True)(params, *batch, total)
            grads, aux = parallel.psum((grads, aux), axis_name)
            aux = dict(aux, grad_norm=optax.global_norm(grads))
            updates, new_opt_state = optimizer.update(grads, opt_state, params)
            new = (optax.apply_updates(params, updates), new_opt_state)
            # Warm-up: measured, not applied.
            return jax.tree.map(lambda n, o: jnp.where(apply, n, o), new, (params, opt_state)), aux

        keys = jax.random.split(key, config.train_steps)
        (params, opt_state), aux = jax.lax.scan(update, (params, opt_state), keys)
        return params, opt_state, jax.tree.map(jnp.mean, aux)

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
            buffer_ready=parallel.pmean(buffer.ready.mean(), axis_name),
        )
        if single_player:
            metrics.update(
                episode_return=stats.episode_return,
                ranked_threshold=jnp.where(jnp.isfinite(threshold), threshold, 0.0),
            )
        else:
            metrics.update(draw_rate=stats.draw_rate)
        state = AlphaZeroState(
            params, opt_state, games, buffer, ranked, stats, state.pool, key, state.iteration + 1, state.evaluations
        )
        return state, metrics

    # ------------------------------------------------------------ evaluate

    n = evaluation.games  # per opponent

    def searcher(params, threshold: jax.Array | None = None):
        """Search without noise; single-player tasks rank the tree's
        outcomes against the current ranked-reward threshold, as in self-play."""

        def act(key, games: Games):
            keys = jax.random.split(key, games.length.shape[0])
            return search(params, keys, games, jnp.zeros(()) if threshold is None else threshold, explore=False)[0]

        return act

    def pool_searcher(pool_params):
        """Each pool member plays its own `n` consecutive games."""

        def act(key, games: Games):
            size = pool_params_count(pool_params)
            split = jax.tree.map(lambda x: x.reshape(size, n, *x.shape[1:]), games)
            keys = jax.random.split(key, size)
            actions = jax.vmap(lambda params, k, g: searcher(params)(k, g))(pool_params, keys, split)
            return actions.reshape(-1)

        return act

    def evaluate(state: AlphaZeroState) -> tuple[AlphaZeroState, base.Metrics]:
        # One batch of games holds every opponent's, so that the agent's
        # search is one program over all of them. Under `axis_name` every
        # shard plays the same games (the parameters are replicated), so the
        # figures do not depend on the number of devices.
        key, play_key = jax.random.split(state.key)
        random, greedy = random_player(env), greedy_player(env)
        if single_player:
            threshold = ranked_threshold(state.ranked, config.ranked_reward.quantile, axis_name)
            agent = searcher(state.params, threshold)
            players = by_slices((agent, random, greedy), (n, n, n))
            totals = play(env, play_key, 3 * n, players, None).reshape(3, n).mean(axis=1)
            metrics = {"eval_return": totals[0], "eval_random_return": totals[1], "eval_greedy_return": totals[2]}
            return state._replace(key=key, evaluations=state.evaluations + 1), metrics

        agent = searcher(state.params)
        pool = state.pool
        size = pool.rating.shape[0]
        opponents = by_slices((random, greedy, pool_searcher(pool.params)), (n, n, size * n))
        totals = play(env, play_key, (2 + size) * n, agent, opponents).reshape(2 + size, n)
        vs_pool = totals[2:]
        # A clean sweep has no finite maximum-likelihood rating; half a game
        # is moved off 0% and 100% scores, the usual correction.
        scores = jnp.clip(((vs_pool > 0) + 0.5 * (vs_pool == 0)).mean(axis=1), 0.5 / n, 1 - 0.5 / n)
        rating = elo_rating(scores, pool.rating, pool.valid)
        best = jnp.argmax(jnp.where(pool.valid, pool.rating, -jnp.inf))
        # The newcomer takes a free slot, else the oldest one that is not the best.
        free = ~pool.valid
        order = jnp.where(free, -1, jnp.where(jnp.arange(size) == best, jnp.iinfo(jnp.int32).max, pool.age))
        slot = jnp.argmin(order)
        evaluations = state.evaluations + 1
        new_pool = Pool(
            params=jax.tree.map(lambda p, new: p.at[slot].set(new), pool.params, state.params),
            rating=pool.rating.at[slot].set(rating),
            valid=pool.valid.at[slot].set(True),
            age=pool.age.at[slot].set(evaluations),
        )
        metrics = {}
        for name, total in (("random", totals[0]), ("greedy", totals[1]), ("best", vs_pool[best])):
            win, draw, loss = outcome_rates(total)
            metrics.update({f"eval_{name}_win": win, f"eval_{name}_draw": draw, f"eval_{name}_loss": loss})
        metrics.update(elo=rating, elo_best_earlier=pool.rating[best])
        return state._replace(pool=new_pool, key=key, evaluations=evaluations), metrics

    # A ResNet runs the seeds one after another: a batch of seeds' parameters
    # turns its convolutions into grouped ones, which XLA's CPU backend runs
    # slowly (one search over 2 x 256 connect_four positions: 2.4 s vmapped,
    # 0.63 s mapped); within a seed the games are batched anyway.
    return base.Algorithm(
        init=init,
        step=step,
        env_steps_per_step=env_steps_per_step(config),
        evaluate=evaluate,
        map_seeds=network.kind == "resnet",
    )


base.register(
    "alphazero",
    base.Registration(
        make=make_alphazero,
        updates_per_step=updates_per_step,
        env_steps_per_step=env_steps_per_step,
        check_env=check_env,
        check_shards=check_shards,
    ),
)
