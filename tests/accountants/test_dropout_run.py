"""A run's rounds as they happened (accountants/dropout/run_spend.py): the same numbers as `uldp dropout`
for the same rounds, the calibration-phase dropouts' multipliers against a simulation of
Algorithm 2, and the composition of unequal rounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.accountants.dropout.accounting import dropout_epsilon, server_epsilon
from uldp.accountants.dropout.rounds import DropoutRound, rate_only_round, weighted_round
from uldp.accountants.dropout.run_spend import ObservedRound, run_epsilons, run_events
from uldp.accountants.events import Composed, KnownParticipation, SubsampledGaussian
from uldp.accountants.registry import account_event
from uldp.errors import InvalidParameter

DELTA = 1e-5


@pytest.mark.parametrize("dropout", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("calibrated", [False, True])
def test_equal_rounds_give_uldp_dropouts_epsilons(dropout, calibrated):
    rd = weighted_round(np.ones(50), dropout)
    rounds = [ObservedRound(rd, calibrated)] * 300
    model, server = run_epsilons(rounds, 1.0, 0.01, DELTA, secure=True)
    m = rd.calibrated_multiplier(1.0) if calibrated else rd.uncalibrated_multiplier(1.0)
    seen = rd.server_view_multiplier(1.0) if calibrated else m
    assert model == dropout_epsilon(m, 0.01, 300, DELTA)
    assert server == server_epsilon(seen, 0.01, 300, DELTA)


def test_unequal_rounds_are_the_composition_of_their_multipliers():
    a, b = DropoutRound(50, 45, 50), DropoutRound(50, 35, 50)
    rounds = [ObservedRound(a, False)] * 40 + [ObservedRound(b, False)] * 60
    model, server = run_events(rounds, 1.3, 0.05, secure=True)
    ma, mb = a.uncalibrated_multiplier(1.3), b.uncalibrated_multiplier(1.3)
    assert model == Composed((SubsampledGaussian(mb, 0.05, 60), SubsampledGaussian(ma, 0.05, 40)))
    assert server == Composed((KnownParticipation(mb, 0.05, 60), KnownParticipation(ma, 0.05, 40)))
    eps = run_epsilons(rounds, 1.3, 0.05, DELTA, secure=True)[0]
    # Between the all-a and all-b runs: composition adds RDP curves.
    assert dropout_epsilon(ma, 0.05, 100, DELTA) < eps < dropout_epsilon(mb, 0.05, 100, DELTA)
    assert eps == account_event(model, DELTA).epsilon


def test_no_round_released_spends_nothing():
    assert run_epsilons([], 1.0, 0.1, DELTA, secure=False) == (0.0, 0.0)
    with pytest.raises(InvalidParameter, match="nothing to account"):
        run_events([], 1.0, 0.1, secure=False)


def _simulate(rd: DropoutRound, z: float, weights: np.ndarray, lost: np.ndarray, trials: int, rng):
    """Algorithm 2 lines 15-24 with C = 1 for the survivors `weights` (lost[i]: survivor i sends no
    calibration share): the noise of the released average, and what the server combines."""
    n_ref, n_alive = rd.reference, rd.alive_weight_sum
    first = rng.normal(size=(trials, len(weights))) * np.sqrt(4 * z**2 * weights / n_ref)
    fresh = rng.normal(size=(trials, len(weights))) * np.sqrt(4 * z**2 * weights / n_alive)
    calibration = np.where(lost, 0.0, fresh - first)
    aggregate = first.sum(axis=1)  # line 19: what the server holds before calibration
    released = aggregate + calibration.sum(axis=1)  # line 24
    return aggregate / n_alive, released / n_alive


def test_a_survivor_lost_before_calibration_leaves_its_first_share_in_place():
    rng = np.random.default_rng(5)
    weights = np.array([1.0, 1.0, 0.5, 0.8, 1.0, 0.7])
    lost = np.array([False, True, False, False, True, False])
    n = 8.0  # two sampled participants of weight 1 dropped before upload
    rd = DropoutRound(n, weights.sum(), n, calibration_dropped=weights[lost].sum())
    z, sensitivity = 1.4, 2.0 / rd.alive_weight_sum
    aggregate, released = _simulate(rd, z, weights, lost, 200_000, rng)
    assert np.std(released) / sensitivity == pytest.approx(rd.calibrated_multiplier(z), rel=0.01)
    assert rd.calibrated_multiplier(z) < z  # the lost survivors' shares were drawn for n > n'
    # The server's best estimate from both observations: inverse-variance combination with their
    # covariance (they share the lost survivors' first shares).
    cov = np.cov(np.stack([aggregate, released]))
    ones = np.ones(2)
    combined = 1.0 / (ones @ np.linalg.solve(cov, ones))
    assert math.sqrt(combined) / sensitivity == pytest.approx(rd.server_view_multiplier(z), rel=0.01)


def test_without_lost_survivors_the_formulas_are_uldp_dropouts():
    rd = DropoutRound(50, 35, 50)
    again = DropoutRound(50, 35, 50, calibration_dropped=0.0)
    assert again.calibrated_multiplier(1.0) == pytest.approx(1.0)
    assert again.server_view_multiplier(1.0) == pytest.approx(1 / math.sqrt(1 + 50 / 35))
    assert again == rd


def test_single_message_multiplier_matches_a_simulation():
    """Without secure aggregation the server reads M_i alone (and M_i + e_i' when calibrated)."""
    rng = np.random.default_rng(3)
    rd, z, w = DropoutRound(10, 8, 10), 1.0, 0.6
    first = rng.normal(size=200_000) * np.sqrt(4 * z**2 * w / rd.reference)
    fresh = rng.normal(size=200_000) * np.sqrt(4 * z**2 * w / rd.alive_weight_sum)
    sensitivity = 2.0 * w  # M_i = w Delta_i + e_i, ||Delta_i|| <= C = 1
    observed = ObservedRound(rd, calibrated=True, largest_weight=w)
    # Two observations of w Delta_i with independent noises `first` and `fresh`.
    combined = 1.0 / (1.0 / np.var(first) + 1.0 / np.var(fresh))
    assert math.sqrt(combined) / sensitivity == pytest.approx(observed.single_message_multiplier(z), rel=0.01)
    alone = ObservedRound(rd, calibrated=False, largest_weight=w).single_message_multiplier(z)
    assert np.std(first) / sensitivity == pytest.approx(alone, rel=0.01)
    # Reading messages one by one is far weaker than the aggregate: the point of secure aggregation.
    assert observed.server_multiplier(z, secure=False) < observed.server_multiplier(z, secure=True)


@settings(max_examples=25, deadline=None)
@given(
    z=st.floats(0.5, 3.0),
    low=st.floats(0.0, 0.5),
    extra=st.floats(0.0, 0.4),
    rounds=st.integers(1, 200),
)
def test_more_dropout_never_spends_less_without_calibration(z, low, extra, rounds):
    lower, higher = rate_only_round(low), rate_only_round(min(low + extra, 0.95))
    few = run_epsilons([ObservedRound(lower, False)] * rounds, z, 0.05, DELTA, secure=True)
    many = run_epsilons([ObservedRound(higher, False)] * rounds, z, 0.05, DELTA, secure=True)
    assert many[0] >= few[0] - 1e-9 and many[1] >= few[1] - 1e-9
    # Calibration gives back the no-dropout figure, whatever the dropout.
    calibrated = run_epsilons([ObservedRound(higher, True)] * rounds, z, 0.05, DELTA, secure=True)[0]
    assert calibrated == pytest.approx(dropout_epsilon(z, 0.05, rounds, DELTA), rel=1e-9)


def test_observed_round_refuses_a_weight_above_one():
    with pytest.raises(InvalidParameter, match="weight"):
        ObservedRound(DropoutRound(5, 4, 5), True, largest_weight=1.5)
    with pytest.raises(InvalidParameter, match="lost before calibration"):
        DropoutRound(5, 4, 5, calibration_dropped=4.5)


def test_many_multipliers_are_accounted_at_the_grid_orders_an_upper_bound_of_the_refined():
    """More than REFINED_PARTS distinct multipliers: the released model is accounted at the grid's
    orders only (the refinement would evaluate a series per multiplier and order, every round)."""
    rounds = [ObservedRound(DropoutRound(50, 50 - k, 50), False) for k in (0, 3, 5, 8, 11, 13, 17)] * 10
    model, server = run_events(rounds, 1.0, 0.1, secure=True)
    grid, _ = run_epsilons(rounds, 1.0, 0.1, DELTA, secure=True)
    refined = account_event(model, DELTA).epsilon
    assert grid == account_event(model, DELTA, real_orders=False).epsilon
    assert refined <= grid <= refined * 1.005
    # The server's rounds are refined whatever their number: at large epsilons it matters.
    assert run_epsilons(rounds, 1.0, 0.1, DELTA, secure=True)[1] == account_event(server, DELTA).epsilon
