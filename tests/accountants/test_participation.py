"""Known participation (the server's view of user sub-sampling), accountants/rdp/participation.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom, norm

from uldp.accountants.account import known_participation_epsilon, record_level
from uldp.accountants.events import SubsampledGaussian
from uldp.accountants.rdp.curves import subsampled_gaussian_rdp
from uldp.accountants.rdp.participation import known_participation_rdp


def exact_delta(eps: float, sigma: float, q: float, rounds: int) -> float:
    """delta(eps) = E_K[delta of a Gaussian with mu = sqrt(K) / sigma], K ~ Bin(T, q)."""
    total = 0.0
    for k in range(rounds + 1):
        if k == 0:
            continue
        mu = math.sqrt(k) / sigma
        gauss = norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu)
        total += binom.pmf(k, rounds, q) * gauss
    return total


@pytest.mark.parametrize("sigma,q,rounds", [(1.0, 0.01, 100), (1.0, 0.1, 100), (3.0, 0.5, 50)])
def test_is_an_upper_bound_for_the_exact_known_participation_view(sigma, q, rounds):
    eps = known_participation_epsilon(sigma, q, rounds, 1e-5).epsilon
    assert exact_delta(eps, sigma, q, rounds) <= 1e-5


def test_q_one_is_the_plain_gaussian_composition():
    orders = np.array([2.0, 8.0, 32.0])
    np.testing.assert_allclose(known_participation_rdp(orders, 2.0, 1.0, 10), 10 * orders / 8.0)


@settings(max_examples=25)
@given(sigma=st.floats(0.5, 20), q=st.floats(1e-3, 0.99), alpha=st.integers(2, 64))
def test_never_below_the_subsampled_gaussian(sigma, q, alpha):
    orders = np.array([float(alpha)])
    known = known_participation_rdp(orders, sigma, q, 1)[0]
    hidden = subsampled_gaussian_rdp(orders, sigma, q)[0]
    assert known >= hidden * (1 - 1e-9) - 1e-12


def test_larger_than_the_outsiders_view():
    known = known_participation_epsilon(1.0, 0.01, 100, 1e-5).epsilon
    hidden = record_level(SubsampledGaussian(1.0, 0.01, 100), 1e-5).epsilon
    assert known > 3 * hidden
