"""The accountants refuse what they cannot serve with InvalidParameter, never an OverflowError,
a ZeroDivisionError or a number that is not an upper bound (issue 12)."""

from __future__ import annotations

import time

import pytest

from uldp.accountants.account import record_level
from uldp.accountants.calibrate import calibrate_event
from uldp.accountants.events import MAX_PLD_GROUP_K, SIGMA_MAX, SIGMA_MIN, TIGHT_SIGMA_MIN, SubsampledGaussian
from uldp.accountants.orders import MAX_ORDER, Orders
from uldp.accountants.tight.pld import pld_epsilon
from uldp.accountants.tight.prv import prv_epsilon
from uldp.errors import InvalidParameter


@pytest.mark.parametrize("sigma", [1e6 * 1.01, 1e155, 1e308, 1e-300, 2.2250738585072014e-308])
def test_a_sigma_outside_the_representable_range_is_refused_by_name(sigma: float) -> None:
    with pytest.raises(InvalidParameter, match="sigma must be in"):
        SubsampledGaussian(sigma, 0.01, 1000)


@pytest.mark.parametrize("sigma", [SIGMA_MIN, SIGMA_MAX])
def test_rdp_gives_a_finite_epsilon_at_both_ends_of_the_sigma_range(sigma: float) -> None:
    guarantee = record_level(SubsampledGaussian(sigma, 0.01, 10), 1e-5, "rdp")
    assert 0 <= guarantee.epsilon < float("inf")


@pytest.mark.parametrize("accountant", ["pld", "prv"])
@pytest.mark.parametrize("sigma", [1e-6, 0.01, TIGHT_SIGMA_MIN / 2])
def test_the_tight_accountants_refuse_a_sigma_below_their_floor_at_once(
    accountant: str, sigma: float
) -> None:
    # PLD overflowed at 1e-6 after 10 s; PRV raised "Cannot compute epsilon" after 48 s.
    start = time.perf_counter()
    with pytest.raises(InvalidParameter, match=f"{accountant} accountant serves noise multipliers >= "):
        record_level(SubsampledGaussian(sigma, 0.01, 10), 1e-5, accountant)
    assert time.perf_counter() - start < 1


def test_prv_refuses_a_mechanism_its_grid_cannot_resolve_and_names_the_alternatives() -> None:
    # prv-accountant raises RuntimeError("Discrete mean differs ...") here: not a bound.
    with pytest.raises(InvalidParameter, match="prv accountant cannot .* use --accountant rdp or pld"):
        prv_epsilon(SubsampledGaussian(0.1, 0.5, 10), 1e-5)


def test_pld_refuses_a_group_above_its_ceiling_at_once() -> None:
    start = time.perf_counter()
    with pytest.raises(InvalidParameter, match=f"up to {MAX_PLD_GROUP_K} records"):
        pld_epsilon(SubsampledGaussian(1.0, 0.01, 10), 1e-5, k=10**6)
    assert time.perf_counter() - start < 1  # was 30 s and 3.7 GB, then an OverflowError


@pytest.mark.parametrize("spec", ["2,3,,4", "2,", ",2"])
def test_orders_with_an_empty_item_are_refused(spec: str) -> None:
    with pytest.raises(InvalidParameter, match="empty item"):
        Orders.parse(spec)


@pytest.mark.parametrize("spec", ["1e308", f"2,{MAX_ORDER * 10:g}"])
def test_orders_above_the_largest_are_refused(spec: str) -> None:
    # At 1e308 every step's RDP is infinite: the epsilon printed was inf.
    with pytest.raises(InvalidParameter, match="orders must be numbers in"):
        Orders.parse(spec)


def test_calibrating_a_run_of_zero_steps_is_refused() -> None:
    # It answered the search range's smallest sigma, "meeting" any budget.
    with pytest.raises(InvalidParameter, match="releases nothing"):
        calibrate_event(lambda sigma: SubsampledGaussian(sigma, 0.1, 0), 1.0, 1e-5)
