"""epsilon*(q) of rPDP-FL: against dp-accounting, against hand-worked closed forms, and its shape."""

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from uldp.accountants.conversion import epsilon_curve
from uldp.accountants.personalized.record_spend import (
    PERSONALIZED_ORDERS,
    EpsilonCurve,
    RecordSampledFL,
    calibrate_sigma,
    fl_rdp,
)
from uldp.accountants.rdp.curves import subsampled_gaussian_rdp, subsampled_gaussian_rdp_grid

dp_accounting = pytest.importorskip("dp_accounting")


def _dp_accounting(sigma, q, steps, delta):
    ref = dp_accounting.rdp.RdpAccountant(orders=[float(a) for a in PERSONALIZED_ORDERS])
    ref.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
        )
    )
    return np.array(ref._rdp), ref.get_epsilon(delta)


@pytest.mark.parametrize(
    "sigma,tau,rounds,q",
    [
        (1.0, 10, 50, 0.01),
        (0.8, 5, 100, 0.3),
        (3.0, 20, 10, 1e-4),
        (12.0, 10, 50, 0.6),
        (2.0, 1, 1, 1.0),
    ],
)
def test_untrusted_with_lambda_one_is_tau_t_steps_of_dp_accounting(sigma, tau, rounds, q):
    run = RecordSampledFL(sigma, tau, rounds, client_rate=1.0, threat_model="untrusted")
    ref_rdp, ref_eps = _dp_accounting(sigma, q, tau * rounds, 1e-5)
    ours = fl_rdp(run, np.array([q]), PERSONALIZED_ORDERS)[0]
    np.testing.assert_allclose(ours, ref_rdp, rtol=1e-9, atol=1e-300)
    assert EpsilonCurve(run, 1e-5, refine=False)(q)[0] == pytest.approx(ref_eps, rel=1e-9)
    assert EpsilonCurve(run, 1e-5)(q)[0] <= ref_eps * (1 + 1e-9)  # real orders only lower it


@given(sigma=st.floats(0.4, 50), q=st.floats(1e-7, 1.0))
def test_grid_rdp_is_the_scalar_rdp(sigma, q):
    grid = subsampled_gaussian_rdp_grid(PERSONALIZED_ORDERS, sigma, np.array([q, 0.5, 1.0]))
    for row, rate in zip(grid, (q, 0.5, 1.0)):
        np.testing.assert_allclose(
            row, subsampled_gaussian_rdp(PERSONALIZED_ORDERS, sigma, rate), rtol=1e-12, atol=1e-300
        )


def _classic_min(rho_of_alpha, delta, orders=range(2, 257)):
    """epsilon by hand: min over integer orders of rho + ln(1/delta)/(alpha - 1) (slides ch. 2)."""
    return min(rho_of_alpha(a) + math.log(1 / delta) / (a - 1) for a in orders)


@pytest.mark.parametrize("lam", [1.0, 0.5, 0.1])
def test_both_threat_models_at_q_one_match_the_closed_forms(lam):
    # At q = 1 the sub-sampled Gaussian is the Gaussian: rho(alpha) = alpha / (2 sigma^2).
    # A server that sees the Poisson participation: the untrusted formula (the exact RDP of the
    # Binomial(T, lambda) mixture); the count formula only under a fixed schedule, with the
    # integer k = round(lambda T).
    sigma, tau, rounds, delta = 4.0, 5, 20, 1e-5
    gauss = lambda a: a / (2 * sigma**2)  # noqa: E731
    untrusted = lambda a: float(
        rounds
        / (a - 1)
        * mpmath.log(  # noqa: E731
            1 - lam + lam * mpmath.exp((a - 1) * tau * gauss(a))
        )
    )
    k = round(lam * rounds)
    fixed = lambda a: k * tau * gauss(a)  # noqa: E731
    orders = np.arange(2.0, 257.0)
    for run, rho in (
        (RecordSampledFL(sigma, tau, rounds, lam, "untrusted"), untrusted),
        (RecordSampledFL(sigma, tau, rounds, lam, "server"), untrusted),
        (RecordSampledFL(sigma, tau, rounds, lam, "server", fixed_schedule=True), fixed),
    ):
        np.testing.assert_allclose(
            fl_rdp(run, np.array([1.0]), orders)[0], [rho(a) for a in orders], rtol=1e-12
        )
        eps = EpsilonCurve(run, delta, "classic", orders, refine=False)(1.0)[0]
        assert eps == pytest.approx(_classic_min(rho, delta), rel=1e-12)


def _true_delta_under_poisson_participation(eps, sigma, rounds, lam):
    """delta(eps) of the Gaussian mechanism composed over K ~ Binomial(T, lambda) rounds, the
    participation known to the adversary (q = tau = 1): sum_k P(K = k) delta_{N(0, k/sigma^2)}(eps)."""
    from scipy.stats import binom, norm

    total = 0.0
    for k in range(1, rounds + 1):
        mu = math.sqrt(k) / sigma
        total += binom.pmf(k, rounds, lam) * (
            norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        )
    return total


@pytest.mark.parametrize("sigma, rounds, lam", [(2.0, 10, 0.5), (1.0, 20, 0.1), (2.0, 4, 0.25)])
def test_the_server_bound_holds_for_a_server_that_sees_random_participation(sigma, rounds, lam):
    # The reviewer's check: the slides' lambda T tau rho gave epsilons whose true delta under
    # Poisson participation exceeds the target; the default server model must not.
    delta = 1e-5
    eps = EpsilonCurve(RecordSampledFL(sigma, 1, rounds, lam, "server"), delta)(1.0)[0]
    assert _true_delta_under_poisson_participation(eps, sigma, rounds, lam) <= delta


def test_a_fixed_schedule_is_the_server_model_only_and_takes_at_least_one_round():
    with pytest.raises(ValueError, match="server threat model only"):
        RecordSampledFL(2.0, 1, 10, 0.5, "untrusted", fixed_schedule=True)
    with pytest.raises(ValueError, match="round\\(lambda T\\) >= 1"):
        RecordSampledFL(2.0, 1, 10, 0.04, "server", fixed_schedule=True)
    assert RecordSampledFL(2.0, 1, 5, 0.5, "server", fixed_schedule=True).participations == 3
    text = RecordSampledFL(2.0, 1, 10, 0.3, "server", fixed_schedule=True).assumptions()
    assert "exactly k = round(lambda T) = 3 rounds" in text["run"]
    assert "clients Poisson-sampled" not in text["run"]
    assert "Poisson participation" in RecordSampledFL(2.0, 1, 10, 0.3, "server").assumptions()["threat model"]


def test_a_hand_worked_value():
    # sigma = 2, tau = T = 1, lambda = 1, q = 1: rho(alpha) = alpha / 8; classic conversion at
    # delta = e^-2: min over alpha of alpha/8 + 2/(alpha - 1) is at alpha = 5: 5/8 + 1/2 = 1.125.
    run = RecordSampledFL(2.0, 1, 1)
    assert EpsilonCurve(run, math.exp(-2), "classic", np.arange(2.0, 20.0), refine=False)(1.0)[
        0
    ] == pytest.approx(1.125)
    # Half the clients: untrusted ln(1/2 + e^{(alpha-1) alpha/8}/2)/(alpha-1) at alpha = 2 is
    # ln((1 + e^{1/4})/2) = 0.13261..., and so is the server's (it sees the participation);
    # a fixed schedule of T = 3 rounds at lambda = 1/2 takes round(1.5) = 2 of them: 2 x 0.25.
    half = dict(sigma=2.0, local_steps=1, rounds=1, client_rate=0.5)
    for model in ("untrusted", "server"):
        assert fl_rdp(RecordSampledFL(**half, threat_model=model), np.array([1.0]), np.array([2.0]))[
            0, 0
        ] == pytest.approx(math.log((1 + math.exp(0.25)) / 2), rel=1e-14)
    fixed = RecordSampledFL(2.0, 1, 3, 0.5, "server", fixed_schedule=True)
    assert fl_rdp(fixed, np.array([1.0]), np.array([2.0]))[0, 0] == pytest.approx(0.5, rel=1e-14)


@given(
    sigma=st.floats(0.5, 30),
    tau=st.integers(1, 50),
    rounds=st.integers(1, 200),
    lam=st.floats(0.01, 1.0),
    model=st.sampled_from(["untrusted", "server"]),
    qs=st.lists(st.floats(1e-7, 1.0), min_size=2, max_size=40),
)
def test_epsilon_is_non_decreasing_in_q(sigma, tau, rounds, lam, model, qs):
    # At the integer orders the curve is exactly non-decreasing; the real-order refinement only
    # lowers it (and is where the searches' running maximum matters).
    qs = np.sort(np.asarray(qs))
    run = RecordSampledFL(sigma, tau, rounds, lam, model)
    eps = EpsilonCurve(run, 1e-5, refine=False)(qs)
    assert np.all(np.isfinite(eps)) and np.all(eps >= 0)
    assert np.all(np.diff(eps) >= 0)
    refined = EpsilonCurve(run, 1e-5)(qs)
    assert np.all(refined <= eps) and np.all(refined >= 0)


@given(sigma=st.floats(0.5, 30), lam=st.floats(0.01, 1.0), q=st.floats(1e-6, 1.0))
def test_the_server_is_never_below_untrusted_unless_the_schedule_is_fixed(sigma, lam, q):
    # Poisson participation: the server's bound is the untrusted one, never the slides' smaller
    # lambda T tau rho (ln(1 - lam + lam e^x) >= lam x by Jensen). A fixed schedule of
    # k = round(lambda T) rounds: exactly k tau rho.
    args = (sigma, 10, 30, lam)
    qs = np.array([q])
    untrusted = fl_rdp(RecordSampledFL(*args, "untrusted"), qs, PERSONALIZED_ORDERS)
    server = fl_rdp(RecordSampledFL(*args, "server"), qs, PERSONALIZED_ORDERS)
    assert np.all(server >= untrusted)
    eps = [EpsilonCurve(RecordSampledFL(*args, model), 1e-5)(q)[0] for model in ("untrusted", "server")]
    assert eps[1] >= eps[0]
    k = math.floor(lam * 30 + 0.5)
    if k >= 1:
        fixed = fl_rdp(RecordSampledFL(*args, "server", fixed_schedule=True), qs, PERSONALIZED_ORDERS)
        step = subsampled_gaussian_rdp_grid(PERSONALIZED_ORDERS, sigma, qs)
        np.testing.assert_allclose(fixed, k * 10 * step, rtol=1e-13)


def test_huge_exponents_stay_finite():
    # (alpha - 1) tau rho reaches 1e6 here; ln(1 - lam + lam e^x) must be x + ln(lam), not inf.
    run = RecordSampledFL(0.3, 100, 10, 0.5)
    rdp = fl_rdp(run, np.array([1.0]), np.array([256.0]))[0, 0]
    x = 255 * 100 * 256 / (2 * 0.09)
    assert rdp == pytest.approx(10 * (x + math.log(0.5)) / 255, rel=1e-12)


def test_one_evaluation_matches_the_conversion_of_its_rdp():
    run = RecordSampledFL(1.5, 10, 50, 0.7)
    rdp = fl_rdp(run, np.array([0.05]), PERSONALIZED_ORDERS)[0]
    expected = epsilon_curve(PERSONALIZED_ORDERS, rdp, math.log(1e-6))[:, 0].min()
    assert EpsilonCurve(run, 1e-6, refine=False)(0.05)[0] == expected
    assert EpsilonCurve(run, 1e-6)(0.05)[0] <= expected


@pytest.mark.parametrize("q_cap", [1.0, 0.25])
def test_calibrated_sigma_reaches_the_largest_budget_at_the_cap(q_cap):
    run = RecordSampledFL(1.0, 10, 50, 0.5)
    found = calibrate_sigma(run, 1e-5, 4.0, q_cap)
    at = lambda s: EpsilonCurve(RecordSampledFL(s, 10, 50, 0.5), 1e-5)(q_cap)[0]  # noqa: E731
    assert at(found.value) == pytest.approx(found.epsilon) and found.epsilon <= 4.0
    assert at(found.value * 0.999) > 4.0  # a little less noise would overspend: it is the smallest


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(sigma=0.0, local_steps=1, rounds=1), "sigma"),
        (dict(sigma=1.0, local_steps=0, rounds=1), "tau"),
        (dict(sigma=1.0, local_steps=1, rounds=1, client_rate=0.0), "client rate"),
        (dict(sigma=1.0, local_steps=1, rounds=1, threat_model="nobody"), "threat model"),
    ],
)
def test_bad_runs_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RecordSampledFL(**kwargs)


def test_grid_rejects_what_it_cannot_compute():
    with pytest.raises(ValueError, match="integers"):
        subsampled_gaussian_rdp_grid(np.array([1.5]), 1.0, np.array([0.1]))
    with pytest.raises(ValueError, match="sampling rates"):
        subsampled_gaussian_rdp_grid(np.array([2.0]), 1.0, np.array([0.0]))
