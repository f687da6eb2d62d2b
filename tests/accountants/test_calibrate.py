"""Calibration round trips: the answer meets the budget and is (nearly) the best that does."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.accountants.account import record_level
from uldp.accountants.calibrate import calibrate_rate, calibrate_sigma, calibrate_steps
from uldp.accountants.events import SubsampledGaussian


def eps(sigma, q, steps):
    return record_level(SubsampledGaussian(sigma, q, steps), 1e-5).epsilon


# Each example is a bisection of tens of accountings (about a second on 2 cores): 8 of them.
@settings(max_examples=8)
@given(budget=st.floats(0.5, 20), q=st.floats(1e-3, 0.2), steps=st.integers(10, 100_000))
def test_sigma_round_trip(budget, q, steps):
    found = calibrate_sigma(lambda s: eps(s, q, steps), budget)
    assert found.epsilon <= budget
    assert found.epsilon == eps(found.value, q, steps)  # re-accounted, not interpolated
    assert eps(found.value * (1 - 2e-3), q, steps) > budget or found.value == 0.05


@settings(max_examples=15)
@given(budget=st.floats(0.5, 20), sigma=st.floats(0.6, 10), q=st.floats(1e-3, 0.2))
def test_steps_round_trip(budget, sigma, q):
    try:
        found = calibrate_steps(lambda t: eps(sigma, q, t), budget)
    except ValueError:
        assert eps(sigma, q, 1) > budget
        return
    assert found.epsilon <= budget
    assert found.value == 10**9 or eps(sigma, q, int(found.value) + 1) > budget


def test_fig2_round_trip():
    found = calibrate_sigma(lambda s: eps(s, 0.01, 100_000), 2.85)
    assert 4.99 <= found.value <= 5.01


def test_impossible_budgets_are_refused():
    with pytest.raises(ValueError, match="no noise multiplier"):
        calibrate_sigma(lambda s: eps(s, 1.0, 10**9), 1e-3)
    with pytest.raises(ValueError, match="even one step"):
        calibrate_steps(lambda t: eps(0.3, 1.0, t), 0.1)


@pytest.mark.parametrize("start", [None, 1, 2, 37, 1000, 5000, 10**6, 10**9])
def test_steps_answer_does_not_depend_on_the_start(start):
    # epsilon(T) = sqrt(T) / 10: the most steps within 3 is 900.
    found = calibrate_steps(lambda t: math.sqrt(t) / 10, 3.0, start=start)
    assert found.value == 900 and found.epsilon <= 3.0


def test_a_good_start_saves_evaluations():
    def eps(t):
        return math.sqrt(t) / 100

    cold = calibrate_steps(eps, 3.0)
    warm = calibrate_steps(eps, 3.0, start=85_000)
    assert warm.value == cold.value == 90_000
    assert warm.evaluations < cold.evaluations


@pytest.mark.parametrize("boundary", [4.78, 1.0, 9.999, 0.06123, 27.35])
def test_sigma_is_the_smallest_at_four_digits(boundary):
    # eps(sigma) = 1 / sigma: the smallest sigma meeting 1 / boundary is `boundary` itself.
    found = calibrate_sigma(lambda s: 1.0 / s, 1.0 / boundary)
    assert found.value == boundary


@pytest.mark.parametrize("boundary", [0.1234, 0.5, 0.01, 0.9999, 0.003017])
def test_rate_is_the_largest_at_four_digits(boundary):
    found = calibrate_rate(lambda q: q, boundary)
    assert found.value == boundary
