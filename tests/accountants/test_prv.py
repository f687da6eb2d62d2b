"""PRV accountant (accountants/tight/prv.py): both directions, against the PLD and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from uldp.accountants.account import record_level
from uldp.accountants.events import ParallelSilos, SubsampledGaussian
from uldp.accountants.tight.pld import pld_epsilon
from uldp.accountants.tight.prv import _add_direction, prv_epsilon

DELTA = 1e-5


@pytest.mark.parametrize("q,sigma", [(0.01, 5.0), (0.3, 0.8), (0.9, 1.2)])
def test_add_direction_cdf_matches_sampling(q, sigma):
    rng = np.random.default_rng(0)
    x = rng.normal(0.0, sigma, 400_000)
    loss = -np.log1p(-q + q * np.exp((2 * x - 1) / (2 * sigma**2)))
    prv = _add_direction(q, sigma)
    for t in np.quantile(loss, [0.01, 0.1, 0.5, 0.9, 0.99]):
        assert prv.cdf(t) == pytest.approx((loss <= t).mean(), abs=3e-3)
    assert prv.cdf(-math.log1p(-q) + 1e-9) == 1.0


@pytest.mark.parametrize(
    "sigma,q,steps,delta",
    [
        (5.0, 0.01, 100_000, 1e-5),
        (1.0, 0.5, 10, 1e-5),
        (2.0, 0.05, 1000, 1e-5),
        (0.6, 0.9, 5, 1e-3),
    ],
)
def test_agrees_with_the_pld_and_stays_below_rdp(sigma, q, steps, delta):
    mech = SubsampledGaussian(sigma, q, steps)
    prv = prv_epsilon(mech, delta)
    pld = pld_epsilon(mech, delta)
    assert prv == pytest.approx(pld, rel=1e-2, abs=2e-2)
    assert prv <= record_level(mech, delta, "rdp").epsilon


def test_full_participation_is_never_below_the_exact_gaussian():
    mech = SubsampledGaussian(4.0, 1.0, 25)
    mu = math.sqrt(25) / 4.0
    exact = brentq(
        lambda e: norm.cdf(mu / 2 - e / mu) - math.exp(e) * norm.cdf(-mu / 2 - e / mu) - DELTA,
        0,
        100,
        xtol=1e-12,
    )
    assert exact <= prv_epsilon(mech, DELTA) <= exact + 0.05


def test_silos_take_the_worst():
    a, b = SubsampledGaussian(5.0, 0.01, 1000), SubsampledGaussian(2.0, 0.02, 1000)
    assert prv_epsilon(ParallelSilos((a, b)), DELTA) == max(prv_epsilon(a, DELTA), prv_epsilon(b, DELTA))


@pytest.mark.parametrize(
    "kwargs,match", [({"eps_error": 0.0}, "eps_error"), ({"delta_error": 1.0}, "delta_error")]
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        prv_epsilon(SubsampledGaussian(1.0, 0.1, 10), DELTA, **kwargs)
