import numpy as np

from algorithms.returns import discounted_returns


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
