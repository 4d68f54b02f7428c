import importlib.metadata

import numpy as np
import pytest
from support import EXACT_COMPILER_OPTIONS

from algorithms.returns import discounted_returns, vtrace_gae


def test_discounted_returns_by_hand():
    r = np.array([1.0, 2.0, 3.0], np.float32)
    g = discounted_returns(r, np.full(3, 0.5, np.float32), np.float32(4.0))
    # G2 = 3 + .5*4 = 5; G1 = 2 + .5*5 = 4.5; G0 = 1 + .5*4.5 = 3.25
    np.testing.assert_allclose(g, [3.25, 4.5, 5.0])


def test_episode_boundary_cuts_the_return():
    r = np.array([1.0, 1.0, 1.0, 1.0], np.float32)
    # transition 1 ends an episode: its discount is 0, so G1 = r1 only.
    discount = np.array([0.9, 0.0, 0.9, 0.9], np.float32)
    g = discounted_returns(r, discount, np.float32(10.0))
    g3 = 1 + 0.9 * 10
    g2 = 1 + 0.9 * g3
    np.testing.assert_allclose(g, [1 + 0.9 * 1.0, 1.0, g2, g3], rtol=1e-6)


def _gae_by_hand(r, discount, v, bootstrap, lam):
    """GAE(lambda) with an explicit loop, as in Schulman et al. 2016."""
    values = list(v) + [bootstrap]
    advantage, out = 0.0, []
    for t in reversed(range(len(r))):
        delta = r[t] + discount[t] * values[t + 1] - values[t]
        advantage = delta + discount[t] * lam * advantage
        out.append(advantage)
    return np.array(out[::-1], np.float32)


R = np.array([1.0, 0.0, 2.0, 1.0], np.float32)
DISCOUNT = np.array([0.9, 0.0, 0.9, 0.9], np.float32)  # transition 1 ends an episode
V = np.array([0.5, 1.0, -0.5, 2.0], np.float32)
BOOTSTRAP = np.float32(1.5)


def test_gae_matches_the_hand_computation_across_an_episode_boundary():
    out = vtrace_gae(R, DISCOUNT, V, BOOTSTRAP, lambda_=0.8)
    expected = _gae_by_hand(R, DISCOUNT, V, BOOTSTRAP, 0.8)
    np.testing.assert_allclose(out.advantage, expected, rtol=1e-6)
    np.testing.assert_allclose(out.target, expected + V, rtol=1e-6)
    # The boundary: transition 1's advantage is its own TD error, r1 - V(x1).
    assert out.advantage[1] == R[1] - V[1]


def test_vtrace_with_ratios_of_one_is_gae_exactly():
    gae = vtrace_gae(R, DISCOUNT, V, BOOTSTRAP, lambda_=0.8)
    vtrace = vtrace_gae(R, DISCOUNT, V, BOOTSTRAP, lambda_=0.8, log_rho_t=np.zeros(4, np.float32))
    np.testing.assert_array_equal(vtrace.target, gae.target)
    # With lambda = 1, V-trace's policy-gradient advantage is GAE's too.
    gae1 = vtrace_gae(R, DISCOUNT, V, BOOTSTRAP, lambda_=1.0)
    vtrace1 = vtrace_gae(R, DISCOUNT, V, BOOTSTRAP, lambda_=1.0, log_rho_t=np.zeros(4, np.float32))
    np.testing.assert_allclose(vtrace1.advantage, gae1.advantage, rtol=1e-6)


def test_vtrace_clips_rho_and_c_by_hand():
    r = np.array([1.0, 1.0], np.float32)
    discount = np.array([0.5, 0.5], np.float32)
    v = np.array([0.0, 0.0], np.float32)
    log_rho = np.log(np.array([2.0, 0.5], np.float32))
    out = vtrace_gae(r, discount, v, np.float32(0.0), lambda_=1.0, log_rho_t=log_rho, rho_clip=1.0, c_clip=1.0)
    # rho = min(1, [2, .5]) = [1, .5]; c = the same.
    # delta = rho * (r + discount * V(x_{t+1}) - V(x_t)) = [1, .5]
    # v_1 - V = .5; v_0 - V = 1 + .5 * 1 * .5 = 1.25
    np.testing.assert_allclose(out.target, [1.25, 0.5], rtol=1e-6)
    # advantage = rho * (r + discount * v_{t+1} - V(x_t)) = [1 + .5 * .5, .5 * 1]
    np.testing.assert_allclose(out.advantage, [1.25, 0.5], rtol=1e-6)


def test_episode_figures_come_from_the_last_step_with_endings():
    """Two envs over four steps: episodes end at steps 1 (env 0) and 2 (both);
    the figures are those of step 2, averaged over its two episodes."""
    import jax.numpy as jnp

    from algorithms.episodes import Ended, finish_episode_stats, init_episode_stats, step_episode_stats

    stats = init_episode_stats(2)
    rewards = jnp.array([[1.0, 1.0], [1.0, 1.0], [1.0, 2.0], [1.0, 1.0]])
    dones = jnp.array([[False, False], [True, False], [True, True], [False, False]])
    ended = []
    for reward, done in zip(rewards, dones, strict=True):
        stats, e = step_episode_stats(stats, reward, done)
        ended.append(e)
    ended = Ended(*(jnp.stack(x) for x in zip(*ended, strict=True)))
    final = finish_episode_stats(stats, ended)
    # Step 2: env 0's episode (1 step, return 1), env 1's (3 steps, return 4).
    assert float(final.last_return) == 2.5
    assert float(final.last_length) == 2.0
    assert final.running_return.tolist() == [1.0, 1.0]
    # No ending in a rollout keeps the previous figures.
    quiet = Ended(*(jnp.zeros((4, 1), x.dtype) for x in ended))
    assert float(finish_episode_stats(final, quiet).last_return) == 2.5
    # Exact layouts: sums per logical shard (here one env each), added in
    # shard order, give the same figures.
    stats, ended = init_episode_stats(2), []
    for reward, done in zip(rewards, dones, strict=True):
        stats, e = step_episode_stats(stats, reward, done, shards=2)
        ended.append(e)
    ended = Ended(*(jnp.stack(x) for x in zip(*ended, strict=True)))
    assert ended.count.shape == (4, 2)
    exact = finish_episode_stats(stats, ended, exact=True)
    assert float(exact.last_return) == 2.5 and float(exact.last_length) == 2.0


@pytest.mark.xfail(
    tuple(int(part) for part in importlib.metadata.version("jaxlib").split(".")[:2]) >= (0, 12),
    reason="jaxlib 0.12's CPU compiler rounds the unrolled and the rolled recursion differently: the first of"
    " 203 returns by 1 ulp (1.5e-8), on the 0.12 line only; strict, so a jaxlib that agrees again is noticed",
    strict=True,
)
def test_unrolled_recursions_give_the_same_bits(monkeypatch):
    import jax

    from algorithms import returns

    rng = np.random.default_rng(0)
    r, v = rng.normal(size=(2, 203)).astype(np.float32)
    discount = np.where(rng.random(203) < 0.05, 0.0, 0.99).astype(np.float32)
    log_rho = rng.normal(scale=0.3, size=203).astype(np.float32)

    def compiled(fn):
        # Two programs that must give the same bits: compiled as users compile
        # them (support.processes.EXACT_COMPILER_OPTIONS).
        return jax.jit(fn).lower().compile(compiler_options=EXACT_COMPILER_OPTIONS)()

    def both():
        # Fresh functions, so each is traced with the UNROLL of the moment.
        gae = compiled(lambda: vtrace_gae(r, discount, v, 0.5, lambda_=0.95, log_rho_t=log_rho))
        return gae.advantage, gae.target, compiled(lambda: discounted_returns(r, discount, 0.5))

    unrolled = both()
    monkeypatch.setattr(returns, "UNROLL", 1)
    rolled = both()
    for a, b in zip(unrolled, rolled, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
