"""rPDP's capped tier (q = 1) is accounted exactly (issue 32, item 12).

A record sampled with q = 1 is in every DP-SGD step: with lambda = 1 (or a fixed schedule) what it
spends is T tau (k tau) plain Gaussians, whose exact epsilon dp-accounting's PLD reproduces to its
discretisation; integer RDP orders were above it (4.99759 at sigma 21.34, T 50, tau 10, where the
exact figure is 4.62), and the calibrated sigma with them.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import binom, norm

from uldp.accountants.personalized.record_rates import personalize
from uldp.accountants.personalized.record_spend import EpsilonCurve, RecordSampledFL, calibrate_sigma

DELTA = 1e-5


def _pld(multiplier: float, count: int) -> float:
    pld = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(dp_accounting.GaussianDpEvent(multiplier), count)
    return pld.get_epsilon(DELTA)


def _known_participation(multiplier: float, rate: float, rounds: int) -> float:
    """An independent computation of E_K[delta_Gauss(eps; sqrt(K)/m)] = delta, K ~ Bin(T, rate)."""
    ks = np.arange(rounds + 1)
    weights = binom.pmf(ks, rounds, rate)

    def excess(eps: float) -> float:
        mu = np.sqrt(ks) / multiplier
        with np.errstate(divide="ignore", invalid="ignore"):
            d = norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        return float(np.sum(weights * np.where(ks > 0, d, 0.0))) - DELTA

    return brentq(excess, 1e-9, 100.0, xtol=1e-12)


def test_the_capped_tier_is_the_exact_gaussian_composition():
    """T = 50 rounds of tau = 10 steps at sigma 21.34, lambda = 1: 500 plain Gaussians."""
    curve = EpsilonCurve(RecordSampledFL(21.34, 10, 50), DELTA)
    capped = float(curve(1.0)[0])
    pld = _pld(21.34, 500)
    assert capped <= pld + 1e-7  # never below the exact epsilon (PLD's pessimistic figure is above it)
    assert capped == pytest.approx(pld, abs=1e-4)
    integer_orders = float(EpsilonCurve(RecordSampledFL(21.34, 10, 50), DELTA, refine=False)(1.0)[0])
    assert integer_orders == pytest.approx(4.99759, abs=1e-4)  # the figure printed before
    assert capped < integer_orders - 0.3


def test_a_fixed_schedule_caps_at_k_tau_gaussians():
    run = RecordSampledFL(9.0, 10, 20, client_rate=0.2, threat_model="server", fixed_schedule=True)
    capped = float(EpsilonCurve(run, DELTA)(1.0)[0])
    pld = _pld(9.0, 4 * 10)  # k = round(0.2 x 20) = 4 rounds of 10 steps
    assert capped == pytest.approx(pld, abs=1e-4) and capped <= pld + 1e-7


@pytest.mark.parametrize("threat_model", ["untrusted", "server"])
def test_poisson_clients_cap_at_the_known_participation_profile(threat_model):
    """lambda < 1: K ~ Bin(T, lambda) rounds of tau Gaussians, multiplier sigma / sqrt(tau) each."""
    run = RecordSampledFL(12.0, 10, 20, client_rate=0.2, threat_model=threat_model)
    capped = float(EpsilonCurve(run, DELTA)(1.0)[0])
    exact = _known_participation(12.0 / math.sqrt(10), 0.2, 20)
    assert capped >= exact - 1e-9
    assert capped == pytest.approx(exact, abs=1e-6)
    assert capped < float(EpsilonCurve(run, DELTA, refine=False)(1.0)[0])


def test_rates_below_one_are_unchanged():
    run = RecordSampledFL(21.34, 10, 50)
    qs = np.array([0.01, 0.3, 0.999])
    assert np.array_equal(EpsilonCurve(run, DELTA)(qs), EpsilonCurve(run, DELTA)(qs))
    assert EpsilonCurve(run, DELTA)(0.999)[0] > EpsilonCurve(run, DELTA)(1.0)[0]


def test_calibrated_sigma_meets_the_budget_exactly_and_is_smaller():
    """--calibrate-sigma for a budget of 5 at q_cap = 1: the exact curve lets sigma fall from 21.34
    (integer orders) to 19.95, and the record at the cap still spends at most 5."""
    run = RecordSampledFL(1.0, 10, 50)
    found = calibrate_sigma(run, DELTA, 5.0)
    assert found.value < 21.34 * 0.95
    spent = _pld(found.value, 500)
    assert spent <= 5.0 + 1e-4  # dp-accounting agrees the budget holds
    # tight: 0.1% less noise exceeds it (calibrate rounds sigma up to 4 significant digits)
    assert _pld(found.value * 0.999, 500) > 5.0 - 1e-4


def test_the_exact_method_never_overspends_with_the_exact_cap():
    run = RecordSampledFL(19.95, 10, 50)
    curve = EpsilonCurve(run, DELTA)
    cap = float(curve(1.0)[0])
    budgets = np.array([0.1, 1.0, cap - 0.05, cap, 5.0])
    result = personalize(budgets, curve)
    assert np.all(result.spent <= budgets + 1e-12)
    assert list(result.q[-2:]) == [1.0, 1.0]  # the cap's exact figure admits q = 1
    assert np.all(np.diff(result.q) >= 0)  # a larger budget never gets a smaller rate
