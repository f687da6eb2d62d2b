"""RDP of the (subsampled) Gaussian against dp-accounting and against high-precision sums."""

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.accountants.conversion import rdp_to_dp
from uldp.accountants.events import ParallelSilos, SubsampledGaussian
from uldp.accountants.orders import DEFAULT_ORDERS
from uldp.accountants.rdp.curves import gaussian_rdp, mechanism_rdp, subsampled_gaussian_rdp

dp_accounting = pytest.importorskip("dp_accounting")

INTEGER_ORDERS = np.array([2.0, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 63, 128, 256])


def _random_settings(n: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        sigma = float(np.exp(rng.uniform(np.log(0.3), np.log(100))))
        q = float(np.exp(rng.uniform(np.log(1e-4), 0)))
        steps = int(np.exp(rng.uniform(0, np.log(1e6))))
        yield sigma, q, steps


def _dp_accounting_rdp(sigma, q, steps, orders):
    ref = dp_accounting.rdp.RdpAccountant(orders=list(orders))
    ref.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
        )
    )
    return ref, np.array(ref._rdp)  # the curve itself, to compare order by order


@pytest.mark.parametrize("sigma,q,steps", list(_random_settings(40, seed=7)))
def test_integer_orders_agree_with_dp_accounting(sigma, q, steps):
    ref, ref_rdp = _dp_accounting_rdp(sigma, q, steps, INTEGER_ORDERS)
    ours = mechanism_rdp(SubsampledGaussian(sigma, q, steps), INTEGER_ORDERS)
    # 1e-6 relative; the absolute floor covers dp-accounting's own rounding when RDP ~ 1e-13.
    np.testing.assert_allclose(ours, ref_rdp, rtol=1e-6, atol=1e-13 * steps)
    ref_eps, ref_order = ref.get_epsilon_and_optimal_order(1e-5)
    conv = rdp_to_dp(INTEGER_ORDERS, ours, math.log(1e-5))
    assert conv.epsilon == pytest.approx(ref_eps, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("sigma,q,steps", list(_random_settings(25, seed=11)))
def test_fractional_orders_never_above_dp_accounting(sigma, q, steps):
    """dp-accounting adds the magnitudes of an alternating series at fractional orders; we keep
    the signs, so we are lower wherever the alternating part matters (the integral test below
    checks that we are still above the true value)."""
    orders = np.array([1.1, 1.5, 1.75, 2.5, 3.3, 7.75, 12.5])
    _, ref_rdp = _dp_accounting_rdp(sigma, q, steps, orders)
    ours = mechanism_rdp(SubsampledGaussian(sigma, q, steps), orders)
    finite = np.isfinite(ref_rdp)  # dp-accounting gives up (inf) on some fractional orders
    assert np.all(ours[finite] <= ref_rdp[finite] * (1 + 1e-9) + 1e-13 * steps)


def _exact_integer_rdp(alpha: int, sigma: float, q: float) -> float:
    """Mironov et al. 2019 §3.2 binomial sum, in 60-digit arithmetic."""
    with mpmath.workdps(60):
        q_, s2 = mpmath.mpf(q), mpmath.mpf(sigma) ** 2
        a = mpmath.fsum(
            mpmath.binomial(alpha, i)
            * q_**i
            * (1 - q_) ** (alpha - i)
            * mpmath.exp(mpmath.mpf(i * i - i) / (2 * s2))
            for i in range(alpha + 1)
        )
        return float(mpmath.log(a) / (alpha - 1))


@pytest.mark.parametrize("sigma,q", [(100.0, 1e-4), (5.0, 0.01), (0.3, 0.5), (1.0, 0.99), (30.0, 1e-3)])
@pytest.mark.parametrize("alpha", [2, 3, 8, 32, 200])
def test_integer_orders_match_high_precision(sigma, q, alpha):
    ours = subsampled_gaussian_rdp(np.array([float(alpha)]), sigma, q)[0]
    assert ours == pytest.approx(_exact_integer_rdp(alpha, sigma, q), rel=1e-9)


def _integral_rdp(alpha: float, sigma: float, q: float) -> float:
    """log E_{z~N(0,s^2)}[(1 - q + q e^{(2z-1)/(2s^2)})^alpha] / (alpha - 1) by quadrature."""
    with mpmath.workdps(30):
        s = mpmath.mpf(sigma)
        f = lambda z: mpmath.npdf(z, 0, s) * (1 - q + q * mpmath.exp((2 * z - 1) / (2 * s * s))) ** alpha
        a = mpmath.quad(f, [-mpmath.inf, 0, 0.5 + s * s * mpmath.log(1 / q - 1), alpha, mpmath.inf])
        return float(mpmath.log(a) / (alpha - 1))


def _random_fractional(n: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        yield (
            float(np.exp(rng.uniform(np.log(0.3), np.log(60)))),
            float(np.exp(rng.uniform(np.log(1e-3), np.log(0.99)))),
            float(rng.choice([1.05, 1.3, 1.75, 2.5, 3.3, 7.75, 12.5, 40.5])),
        )


@pytest.mark.parametrize(
    "sigma,q,alpha",
    [(11.33, 0.388, 1.3), (5.0, 0.01, 7.75), (0.7, 0.9, 3.3)] + list(_random_fractional(20, seed=3)),
)
def test_fractional_orders_match_the_integral(sigma, q, alpha):
    ours = subsampled_gaussian_rdp(np.array([alpha]), sigma, q)[0]
    exact = _integral_rdp(alpha, sigma, q)
    assert ours >= exact * (1 - 1e-6)  # an upper bound, up to the quadrature's own accuracy
    assert ours == pytest.approx(exact, rel=1e-4)


def test_no_sampling_is_the_gaussian_mechanism():
    np.testing.assert_allclose(
        subsampled_gaussian_rdp(DEFAULT_ORDERS, 3.0, 1.0), gaussian_rdp(DEFAULT_ORDERS, 3.0)
    )
    assert gaussian_rdp(np.array([2.0]), 1.0)[0] == 1.0  # Lemma 3: alpha / (2 sigma^2)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 100.0])
@pytest.mark.parametrize("q", [1e-6, 0.01, 0.999, 1.0])
def test_stable_over_the_supported_range(sigma, q):
    rdp = mechanism_rdp(SubsampledGaussian(sigma, q, 10**9), DEFAULT_ORDERS)
    assert np.all(np.isfinite(rdp)) and np.all(rdp >= 0)
    assert np.all(rdp <= gaussian_rdp(DEFAULT_ORDERS, sigma) * 10**9 * (1 + 1e-12))


def test_parallel_silos_take_the_worst_silo_order_by_order():
    a, b = SubsampledGaussian(2.0, 0.05, 100), SubsampledGaussian(4.0, 0.5, 100)
    both = mechanism_rdp(ParallelSilos((a, b)), DEFAULT_ORDERS)
    np.testing.assert_allclose(
        both, np.maximum(mechanism_rdp(a, DEFAULT_ORDERS), mechanism_rdp(b, DEFAULT_ORDERS))
    )


orders_small = np.array([1.5, 2.0, 3.0, 4.5, 8.0, 16.0, 32.0])


@settings(max_examples=40)
@given(sigma=st.floats(0.3, 100), q=st.floats(1e-4, 0.9), factor=st.floats(1.01, 3))
def test_rdp_grows_with_q_and_falls_with_sigma(sigma, q, factor):
    base = subsampled_gaussian_rdp(orders_small, sigma, q)
    assert np.all(subsampled_gaussian_rdp(orders_small, sigma, min(1.0, q * factor)) >= base * (1 - 1e-12))
    assert np.all(subsampled_gaussian_rdp(orders_small, sigma * factor, q) <= base * (1 + 1e-12))
