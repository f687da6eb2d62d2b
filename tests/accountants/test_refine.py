"""The RDP bound is refined over real orders: within 0.1% of the best real order (issue 11,
point 10), still evaluated at a real order (a valid bound), and the total-variation rule is named."""

import math

import numpy as np
import pytest

from uldp.accountants.account import group_level, record_level
from uldp.accountants.conversion import TV_RULE_NOTE, rdp_to_dp
from uldp.accountants.events import SubsampledGaussian
from uldp.accountants.rdp.curves import event_rdp


def best_real_order(event, delta, lo, hi, points=4000):
    """Brute force over a fine grid of real orders: the best epsilon any of them gives."""
    grid = np.linspace(lo, hi, points)
    return rdp_to_dp(grid, event_rdp(event, grid), math.log(delta))


def test_tiny_rate_optimum_between_coarse_orders():
    # The example: orders above 256 are ~10% apart; the best real order is 276.5.
    event = SubsampledGaussian(4.21, 4.07e-4, 74)
    found = record_level(event, 1.23e-9)
    best = best_real_order(event, 1.23e-9, 256, 300)
    assert found.epsilon == pytest.approx(0.05056, abs=1e-5)
    assert best.epsilon <= found.epsilon <= best.epsilon * 1.001
    assert 270 < found.order < 283  # a real order between the grid's 256 and 283


def test_best_order_below_the_grid():
    # Many steps at a large rate put the optimum below the smallest default order 1.05.
    event = SubsampledGaussian(0.6, 0.5, 100_000)
    found = record_level(event, 1e-5)
    best = best_real_order(event, 1e-5, 1.001, 1.05)
    assert found.order < 1.05
    assert best.epsilon <= found.epsilon * 1.0000001 and found.epsilon <= best.epsilon * 1.001


def test_refined_epsilon_holds_at_its_printed_order():
    event = SubsampledGaussian(4.21, 4.07e-4, 74)
    found = record_level(event, 1.23e-9)
    again = rdp_to_dp(np.array([found.order]), event_rdp(event, np.array([found.order])), math.log(1.23e-9))
    assert again.epsilon == found.epsilon


def test_listed_orders_are_kept():
    event = SubsampledGaussian(4.21, 4.07e-4, 74)
    assert record_level(event, 1.23e-9, orders="256,283").order in (256, 283)


def test_lemma6_group_is_refined_too():
    event = SubsampledGaussian(5.0, 0.01, 100_000)
    refined = group_level(event, 1e-5, 4, "rdp")
    coarse = group_level(event, 1e-5, 4, "rdp", orders=",".join(str(4 * b) for b in np.arange(2, 16, 0.25)))
    assert refined.epsilon <= coarse.epsilon


def test_total_variation_rule_is_named():
    found = record_level(SubsampledGaussian(2.0, 1e-6, 1), 1e-5, conversion="classic")
    assert found.epsilon == 0 and found.note == TV_RULE_NOTE
    assert record_level(SubsampledGaussian(2.0, 0.01, 100), 1e-5).note == ""
