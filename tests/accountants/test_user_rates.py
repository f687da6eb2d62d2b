"""Per-user budgets for ULDP (issue 14 point 3): the user-level curve, rates, sigma and the
server's view, checked against dp-accounting and an exact quadrature (independent
implementations); tests/cli/test_personalize_user_level.py checks them against `uldp account`."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.accountants.account import known_participation_epsilon
from uldp.accountants.conversion import epsilon_curve
from uldp.accountants.personalized.record_rates import CAPPED, EXCLUDED_LOW, OK, personalize
from uldp.accountants.personalized.record_spend import PERSONALIZED_ORDERS, EpsilonCurve, RecordSampledFL
from uldp.accountants.personalized.user_rates import (
    UserSampledULDP,
    calibrate_user_sigma,
    server_epsilon,
    user_assumptions,
    user_curve,
    user_rates,
    user_run,
)
from uldp.errors import InvalidParameter

dp_accounting = pytest.importorskip("dp_accounting")

DELTA = 1e-5
# (sigma, q, T): small and large rates, few and many rounds, both sides of REFINE_MAX_RATE.
CASES = [(1.0, 0.01, 1000), (5.0, 0.1, 100), (2.0, 0.3, 50), (0.8, 0.05, 200)]


def _reference(sigma: float, q: float, rounds: int, orders) -> tuple[float, float]:
    """dp-accounting's RDP epsilon (and its best order) of T Poisson-subsampled Gaussians."""
    accountant = dp_accounting.rdp.RdpAccountant(orders=[float(a) for a in orders])
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, rounds))
    return accountant.get_epsilon_and_optimal_order(DELTA)


@pytest.mark.parametrize(("sigma", "q", "rounds"), CASES)
def test_the_user_curve_at_integer_orders_is_dp_accountings(sigma, q, rounds):
    # The same integer orders, no refinement: the two implementations of T compositions of
    # PoissonSampledDpEvent(q, GaussianDpEvent(sigma)) agree to rounding.
    ours = EpsilonCurve(user_curve(sigma, rounds, DELTA).run, DELTA, refine=False)(q)[0]
    theirs, _ = _reference(sigma, q, rounds, PERSONALIZED_ORDERS)
    assert ours == pytest.approx(theirs, rel=1e-9)


@pytest.mark.parametrize(("sigma", "q", "rounds"), CASES)
def test_the_user_curve_is_close_to_dp_accounting_and_never_above_its_integer_orders(sigma, q, rounds):
    curve = user_curve(sigma, rounds, DELTA)
    ours = float(curve(q)[0])
    integer = float(EpsilonCurve(curve.run, DELTA, refine=False)(q)[0])
    default, _ = _reference(sigma, q, rounds, dp_accounting.rdp.RdpAccountant()._orders)
    assert ours <= integer  # the refinement only ever lowers the integer orders' bound
    assert ours == pytest.approx(default, rel=0.01)  # dp-accounting with its default orders


def _exact_rdp(sigma: float, q: float, alpha: float) -> float:
    """RDP of one Poisson-subsampled Gaussian at a real order, by quadrature (Mironov et al.
    2019 §3.3: E over N(0, sigma^2) of the likelihood ratio to the alpha), independently of both
    series."""
    mpmath.mp.dps = 30
    s, a = mpmath.mpf(sigma), mpmath.mpf(alpha)

    def integrand(z):
        ratio = (1 - q) + q * mpmath.exp((2 * z - 1) / (2 * s**2))
        return mpmath.npdf(z, 0, s) * ratio**a

    return float(mpmath.log(mpmath.quad(integrand, [-mpmath.inf, -5 * s, 0, 1, 5 * s, mpmath.inf])) / (a - 1))


def test_the_refined_user_curve_is_an_upper_bound_at_real_orders():
    # At sigma 0.8, q 0.05 the refinement goes 0.3% below dp-accounting over real orders (8.7313
    # against 8.7405 at orders 0.01 apart), because dp-accounting's fractional-order series
    # over-states the RDP (0.030554 at order 3.5, quadrature 0.030513): the curve must still be
    # above the exact RDP's bound, here the minimum over real orders 0.01 apart around the best
    # one (2.91), each by quadrature.
    sigma, q, rounds = 0.8, 0.05, 200
    ours = float(user_curve(sigma, rounds, DELTA)(q)[0])
    alphas = np.arange(2.8, 3.0, 0.01)
    rdp = rounds * np.array([_exact_rdp(sigma, q, a) for a in alphas])
    exact = epsilon_curve(alphas, rdp, math.log(DELTA))[:, 0].min()
    # The grid's own resolution (0.01 in the order) is the only slack: 1e-5 relative.
    assert exact * (1 - 1e-5) <= ours <= exact * (1 + 1e-4)


def test_the_server_sees_at_most_plain_gaussian_rounds_and_its_known_participation():
    # T rounds of the plain Gaussian: dp-accounting's GaussianDpEvent at the same orders.
    accountant = dp_accounting.rdp.RdpAccountant(orders=[float(a) for a in PERSONALIZED_ORDERS])
    accountant.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(5.0), 100))
    plain = accountant.get_epsilon(DELTA)
    curve = user_curve(5.0, 100, DELTA)
    # at q_u = 1 the curve is the plain rounds' exact epsilon (accountants/tight/gaussian.py), below RDP
    # and equal to dp-accounting's PLD of the same rounds within its discretisation
    pld = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(dp_accounting.GaussianDpEvent(5.0), 100)
    assert float(curve(1.0)[0]) == pytest.approx(pld.get_epsilon(DELTA), abs=1e-4)
    assert float(curve(1.0)[0]) < plain
    for q in (1e-3, 0.1181, 0.3232, 1.0):
        server = server_epsilon(5.0, 100, DELTA, q=q)
        # never above the plain Gaussian rounds (a bound whatever q), and what `uldp account`
        # prints as the server's view for that q (the known participation), where that is smaller
        known = known_participation_epsilon(5.0, q, 100, DELTA).epsilon
        assert server == min(float(curve(1.0)[0]), known) <= plain * (1 + 1e-9)
        if q < 1:  # the server knows more than the released models' observers
            assert server >= float(curve(q)[0])
    assert server_epsilon(5.0, 100, DELTA, q=0.1181) < server_epsilon(5.0, 100, DELTA, q=0.3232)


@settings(max_examples=15, deadline=None)
@given(
    budgets=st.lists(st.floats(0.05, 20.0), min_size=2, max_size=8),
    sigma=st.sampled_from([1.0, 3.0, 8.0]),
    rounds=st.sampled_from([10, 100]),
)
def test_rates_are_monotone_in_the_budget_and_never_overspend(budgets, sigma, rounds):
    values = np.array(budgets)
    result = user_rates(values, user_curve(sigma, rounds, DELTA))
    order = np.argsort(values, kind="stable")
    assert np.all(np.diff(result.q[order]) >= 0)  # a larger budget never gets a smaller q_u
    # Re-accounted on a fresh curve: every user's epsilon*(q_u) is within its budget, unless
    # its budget is above epsilon*(1) (then q_u = 1 and it spends epsilon*(1)).
    # (a budget below epsilon*(q_min) gets q_u = 0, never sampled: it spends nothing)
    used = result.q > 0
    spent = np.zeros(values.size)
    spent[used] = user_curve(sigma, rounds, DELTA)(result.q[used])
    inside = result.status == OK
    assert np.all(spent[inside] <= values[inside])
    np.testing.assert_array_equal(spent[result.q > 0], result.spent[result.q > 0])
    assert np.all(result.q[result.status == CAPPED] == 1.0)


def test_user_rates_are_the_record_level_exact_inverse():
    # One code path: the user curve is the record curve at tau = 1, lambda = 1, untrusted.
    budgets = np.array([0.0, 0.1, 0.5, 1.0, 2.0, 50.0])
    users = user_rates(budgets, user_curve(5.0, 100, DELTA), q_cap=0.8)
    records = personalize(budgets, EpsilonCurve(RecordSampledFL(5.0, 1, 100), DELTA), q_cap=0.8)
    np.testing.assert_array_equal(users.q, records.q)
    np.testing.assert_array_equal(users.spent, records.spent)
    assert users.status[-1] == CAPPED and users.q[-1] == 0.8


def test_budgets_below_the_smallest_rate_get_no_sampling():
    # With little noise even q_min spends more than a tiny budget: that user is never sampled.
    result = user_rates(np.array([1e-4, 1.0]), user_curve(0.5, 100, DELTA))
    assert result.status[0] == EXCLUDED_LOW and result.q[0] == 0.0 and result.spent[0] == 0.0
    with pytest.raises(InvalidParameter, match="infeasible budgets"):
        user_rates(np.array([1e-4, 1.0]), user_curve(0.5, 100, DELTA), infeasible="fail")


def test_user_rates_refuse_a_record_level_curve():
    with pytest.raises(InvalidParameter, match="user-level curve"):
        user_rates(np.array([1.0]), EpsilonCurve(RecordSampledFL(5.0, 1, 100), DELTA))


@pytest.mark.parametrize("q_cap", [1.0, 0.3])
def test_calibrated_sigma_spends_the_largest_budget_at_the_cap(q_cap):
    found = calibrate_user_sigma(2.0, 100, DELTA, q_cap)
    at_cap = float(user_curve(found.value, 100, DELTA)(q_cap)[0])
    assert at_cap <= 2.0 and at_cap == pytest.approx(found.epsilon)
    assert at_cap > 1.99  # sigma is the smallest to 4 digits: almost all the budget is spent
    assert float(user_curve(found.value * 0.995, 100, DELTA)(q_cap)[0]) > 2.0


def test_the_assumptions_describe_the_user_level_run():
    curve = user_curve(5.0, 100, DELTA)
    result = user_rates(np.array([1.0, 2.0]), curve)
    lines = user_assumptions(result, curve, "budgets.csv").as_dict()
    assert lines["neighbouring"] == "add or remove all records of one user, in every silo (user-level DP)"
    assert "Theorem 3" in lines["run"] and "Algorithm 4" in lines["run"] and "tau" not in lines["run"]
    assert "(2 users, 2 distinct" in lines["budgets"]
    assert "does not hold against it" in lines["threat model"]
    for q in np.unique(result.q):
        assert f"{server_epsilon(5.0, 100, DELTA, q=float(q)):.6g} at q_u = {q:.4g}" in lines["server view"]
    assert "known participation" in lines["server view"]
    assert list(lines)[:5] == ["budgets", "run", "threat model", "neighbouring", "server view"]


@pytest.mark.parametrize(
    "kwargs",
    [{"local_steps": 2}, {"client_rate": 0.5}, {"threat_model": "server"}],
)
def test_a_user_level_run_is_one_gaussian_per_round_over_every_silo(kwargs):
    with pytest.raises(InvalidParameter, match="user-level run"):
        UserSampledULDP(**{"sigma": 1.0, "local_steps": 1, "rounds": 10, **kwargs})
    assert user_run(1.0, 10).local_steps == 1


def test_bad_inputs_are_invalid_parameters():
    with pytest.raises(InvalidParameter, match="sigma"):
        user_curve(0.0, 10, DELTA)
    with pytest.raises(InvalidParameter, match="delta"):
        user_curve(1.0, 10, 1.5)
    with pytest.raises(InvalidParameter, match="budget"):
        calibrate_user_sigma(0.0, 10, DELTA)
