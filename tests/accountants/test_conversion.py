"""RDP-to-DP conversion (ULDP-FL Lemma 2) and order sets."""

import math

import numpy as np
import pytest

from uldp.accountants.conversion import epsilon_curve, rdp_to_dp
from uldp.accountants.orders import DEFAULT_ORDERS, TF_PRIVACY_ORDERS, resolve_orders

dp_rdp = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")


@pytest.mark.parametrize("scale", [1e-4, 0.01, 0.3, 3.0, 50.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-10])
def test_improved_conversion_matches_dp_accounting(scale, delta):
    orders = TF_PRIVACY_ORDERS
    rdp = scale * orders  # a Gaussian-like curve
    ours = rdp_to_dp(orders, rdp, math.log(delta))
    ref_eps, ref_order = dp_rdp.compute_epsilon(orders, rdp, delta)
    assert ours.epsilon == pytest.approx(ref_eps, rel=1e-12, abs=1e-15)
    if ref_eps > 0:
        assert ours.order == ref_order


def test_classic_conversion_is_mironovs_and_never_tighter():
    orders = np.array([2.0, 4.0, 8.0])
    rdp = np.array([0.1, 0.2, 0.4])
    classic = rdp_to_dp(orders, rdp, math.log(1e-5), "classic")
    expected = min(r + math.log(1e5) / (a - 1) for a, r in zip(orders, rdp))
    assert classic.epsilon == pytest.approx(expected)
    assert rdp_to_dp(orders, rdp, math.log(1e-5)).epsilon < classic.epsilon


def test_lemma2_formula():
    a, r, d = 5.0, 0.7, 1e-6
    lemma2 = r + math.log((a - 1) / a) - (math.log(d) + math.log(a)) / (a - 1)
    assert rdp_to_dp(np.array([a]), np.array([r]), math.log(d)).epsilon == pytest.approx(lemma2)


def test_tiny_rdp_gives_zero_epsilon_through_total_variation():
    assert rdp_to_dp(np.array([2.0]), np.array([1e-12]), math.log(1e-5)).epsilon == 0.0


def test_log_delta_far_below_double_range():
    eps = epsilon_curve(np.array([2.0, 10.0]), np.array([1.0, 5.0]), np.array([-5000.0]))
    assert np.all(np.isfinite(eps))


def test_order_presets_and_lists():
    assert TF_PRIVACY_ORDERS.size == 99 + 52 and TF_PRIVACY_ORDERS[0] == pytest.approx(1.1)
    assert resolve_orders("default") is DEFAULT_ORDERS
    np.testing.assert_array_equal(resolve_orders("2, 4,3"), [2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="orders"):
        resolve_orders("2,abc")
    with pytest.raises(ValueError, match=r"numbers in \(1, "):
        resolve_orders([0.5, 2])
