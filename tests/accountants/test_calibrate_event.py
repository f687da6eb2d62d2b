"""The generic calibrator: any scalar of any event, never over the budget."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.accountants.calibrate import calibrate, calibrate_event, most_rounds
from uldp.accountants.events import Composed, KnownParticipation, SubsampledGaussian
from uldp.accountants.registry import account_event
from uldp.errors import InvalidParameter, UnreachableBudget

DELTA = 1e-5
budgets = st.floats(min_value=0.3, max_value=20.0)


# Each example is a bisection of tens of accountings (about a second on 2 cores): 8 of them.
@settings(max_examples=8, deadline=None)
@given(budget=budgets, q=st.floats(min_value=1e-3, max_value=1.0), steps=st.integers(1, 2000))
def test_sigma_never_overshoots(budget, q, steps):
    found = calibrate_event(lambda s: SubsampledGaussian(s, q, steps), budget, DELTA, "sigma")
    assert found.epsilon <= budget
    assert account_event(SubsampledGaussian(found.value, q, steps), DELTA).epsilon == found.epsilon


@settings(max_examples=15, deadline=None)
@given(
    budget=budgets, sigma=st.floats(min_value=0.7, max_value=10.0), q=st.floats(min_value=1e-3, max_value=0.5)
)
def test_steps_never_overshoot_and_one_more_would(budget, sigma, q):
    def build(t):
        return SubsampledGaussian(sigma, q, t)

    steps = most_rounds(build, budget, DELTA)
    if steps:
        assert account_event(build(steps), DELTA).epsilon <= budget
    assert account_event(build(steps + 1), DELTA).epsilon > budget


@settings(max_examples=8, deadline=None)  # a bisection per example, as above
@given(budget=budgets, sigma=st.floats(min_value=0.7, max_value=10.0), steps=st.integers(1, 1000))
def test_rate_never_overshoots(budget, sigma, steps):
    def build(q):
        return SubsampledGaussian(sigma, q, steps)

    try:
        found = calibrate_event(build, budget, DELTA, "q")
    except UnreachableBudget:
        return
    assert 0 < found.value <= 1
    assert found.epsilon <= budget
    assert account_event(build(found.value), DELTA).epsilon == found.epsilon
    if found.value < 1:  # 0.1% more rate (beyond the rounding) would overshoot
        assert account_event(build(min(1.0, found.value * 1.002)), DELTA).epsilon > budget


def test_any_event_any_accountant():
    def server(rounds):
        return KnownParticipation(2.0, 0.1, rounds)

    rounds = most_rounds(server, 3.0, DELTA)
    assert (
        account_event(server(rounds), DELTA).epsilon <= 3.0 < account_event(server(rounds + 1), DELTA).epsilon
    )
    composed = calibrate_event(
        lambda s: Composed((SubsampledGaussian(s, 0.01, 100), SubsampledGaussian(s, 0.02, 50))),
        1.0,
        DELTA,
        "sigma",
    )
    assert composed.epsilon <= 1.0


def test_calibrate_dispatches_on_the_scalar():
    assert calibrate(lambda q: 10 * q, 2.5, "q").value == pytest.approx(0.25, rel=1e-3)
    assert calibrate(lambda t: t, 7.5, "steps").value == 7
    with pytest.raises(InvalidParameter, match="can calibrate one of"):
        calibrate(lambda x: x, 1.0, "clip")
