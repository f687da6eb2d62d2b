"""Attack bounds (accountants/statements/tradeoff.py): the TPR a membership-inference attacker can reach at
a given FPR, from each accountant's privacy profile, against closed forms (the Gaussian's
trade-off curve), dp-accounting's own PLD accountant and prv-accountant's compute_delta."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from uldp.accountants.events import Composed, Group, KnownParticipation, ParallelSilos, SubsampledGaussian
from uldp.accountants.rdp.participation import known_participation_delta
from uldp.accountants.registry import account_event
from uldp.accountants.statements.tradeoff import (
    FPRS,
    GRID_POINTS,
    POINT_SOURCE,
    PRV_DELTA_ERROR,
    PRV_EPS_ERROR,
    AttackBound,
    _pld_delta,
    _prv_delta,
    _table,
    attack_bound,
    gaussian_tpr,
    privacy_profile,
    roc_bound,
    tpr_from_dp,
    tpr_from_profile,
)
from uldp.errors import InvalidParameter

FIG2 = SubsampledGaussian(sigma=5.0, q=0.01, steps=100_000)
ROC = np.geomspace(1e-5, 1.0, 60)
SMALL = SubsampledGaussian(2.0, 0.05, 1000)


def gaussian_delta(eps: np.ndarray, mu: float) -> np.ndarray:
    """Balle & Wang 2018, Thm. 8, written out again for the check."""
    return norm.cdf(mu / 2 - eps / mu) - np.exp(eps) * norm.cdf(-mu / 2 - eps / mu)


# --- the formulas -------------------------------------------------------------------------------


def test_tpr_from_dp_is_kairouz_oh_viswanath():
    a = np.array([0.0, 1e-3, 0.1, 0.5, 0.9, 1.0])
    eps, delta = 1.2, 1e-3
    expected = np.minimum.reduce(
        [np.ones_like(a), math.exp(eps) * a + delta, 1 - math.exp(-eps) * (1 - delta - a)]
    )
    np.testing.assert_allclose(tpr_from_dp(eps, delta, a), expected, rtol=1e-14)
    np.testing.assert_array_equal(tpr_from_dp(math.inf, 0.0, a), np.ones_like(a))
    np.testing.assert_allclose(tpr_from_dp(0.0, 0.0, a), a)  # perfect privacy: chance


def test_gaussian_tpr_is_one_minus_g_mu():
    a = np.geomspace(1e-6, 1.0, 30)
    mu = 1.7
    np.testing.assert_allclose(gaussian_tpr(mu, a), 1 - norm.cdf(norm.ppf(1 - a) - mu), rtol=1e-9)
    np.testing.assert_allclose(gaussian_tpr(0.0, a), a, rtol=1e-12)


def test_profile_of_the_gaussian_gives_its_trade_off_curve():
    # The grid (module docstring): within 1e-5 relative of the closed form, never below.
    for mu in (0.01, 0.3, 1.0, 5.0):
        eps, deltas, _ = _table(lambda e, mu=mu: gaussian_delta(e, mu))
        assert eps[:GRID_POINTS].size == GRID_POINTS
        exact = gaussian_tpr(mu, ROC)
        tpr = tpr_from_profile(eps, deltas, ROC)
        assert np.all(tpr >= exact * (1 - 1e-12))
        assert np.all(tpr <= exact * (1 + 1e-5))


def test_attack_bound_shape():
    bound = attack_bound(FIG2, "pld")
    assert isinstance(bound, AttackBound)
    assert bound.fprs == FPRS and len(bound.tprs) == len(FPRS)
    assert bound.source == "pld trade-off curve"
    assert bound.as_dict() == {"fpr": list(FPRS), "tpr": list(bound.tprs), "source": bound.source}
    # roc_bound shares the profile: the same numbers at the same FPRs.
    np.testing.assert_array_equal(roc_bound(FIG2, "pld", np.array(FPRS)), bound.tprs)


# --- against closed forms and the libraries ------------------------------------------------------


@pytest.mark.parametrize("sigma,steps", [(4.0, 25), (1.0, 1), (20.0, 100), (0.8, 10)])
def test_plain_gaussian_against_the_closed_form(sigma, steps):
    mech = SubsampledGaussian(sigma, 1.0, steps)
    exact = gaussian_tpr(math.sqrt(steps) / sigma, ROC)
    pld = roc_bound(mech, "pld", ROC)
    assert np.all(pld >= exact - 1e-12)  # pessimistic PLD: an upper bound ...
    assert np.all(pld <= exact * (1 + 1e-3))  # ... and a tight one
    rdp = roc_bound(mech, "rdp", ROC)
    assert np.all(rdp >= exact - 1e-12)  # a looser upper bound
    assert np.all(rdp >= pld - 1e-12)
    prv = roc_bound(mech, "prv", ROC)
    assert np.all(prv >= exact - 1e-12)
    assert np.all(prv <= exact * math.exp(PRV_EPS_ERROR) + PRV_DELTA_ERROR + 1e-12)


def test_sub_sampled_against_dp_accountings_pld_accountant():
    import dp_accounting
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

    sigma, q, steps = 1.0, 0.1, 100
    accountant = PLDAccountant(
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4
    )
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, steps))
    pld = accountant._pld
    eps = np.linspace(0.0, pld.get_epsilon_for_delta(1e-12), 2000)
    reference = tpr_from_profile(eps, pld.get_delta_for_epsilon(eps), ROC)
    ours = roc_bound(SubsampledGaussian(sigma, q, steps), "pld", ROC)
    # Ours is on a coarser (pessimistic) grid than 1e-4: never below, and close.
    assert np.all(ours >= reference * (1 - 1e-9))
    assert np.all(ours <= reference * (1 + 1e-3))


def test_pld_delta_is_dp_accountings_get_delta_for_epsilon():
    from uldp.accountants.tight.pld import pld_distributions

    (pld,) = pld_distributions(SubsampledGaussian(1.5, 0.2, 30))
    eps = np.linspace(0.0, 8.0, 300)
    np.testing.assert_allclose(_pld_delta(pld)(eps), pld.get_delta_for_epsilon(eps), rtol=1e-9, atol=1e-15)


def test_prv_delta_is_compute_deltas_upper_bound():
    from uldp.accountants.tight.prv import silo_composition

    for add in (False, True):
        composed, eps_error = silo_composition(SMALL, PRV_EPS_ERROR, PRV_DELTA_ERROR, add)
        delta_at = _prv_delta(composed, eps_error, PRV_DELTA_ERROR)
        for eps in (0.0, 0.5, 1.7, 3.0):
            # PRVAccountant.compute_delta's third value, from the same composition.
            upper = composed.compute_delta_estimate(eps - eps_error) + PRV_DELTA_ERROR
            assert delta_at(np.array([eps]))[0] == pytest.approx(min(1.0, upper), rel=1e-9, abs=1e-15)


def test_profile_at_the_accountants_epsilon_is_within_delta():
    for accountant, rel in (("pld", 1e-9), ("rdp", 1e-2)):
        for delta in (1e-5, 1e-2):
            eps = account_event(SMALL, delta, accountant).epsilon
            # rdp's epsilon is refined over real orders, the profile's is on the order grid.
            assert privacy_profile(SMALL, accountant, np.array([eps]))[0] <= delta * (1 + rel)


# --- ordering -------------------------------------------------------------------------------------


def test_fig2_ordering_and_ranges():
    pld, prv, rdp = (roc_bound(FIG2, a, ROC) for a in ("pld", "prv", "rdp"))
    for tpr in (pld, prv, rdp):
        assert np.all(tpr >= ROC) and np.all(tpr <= 1.0)
    assert np.all(rdp >= pld * (1 - 1e-9))
    # prv: its epsilon error (0.03) shifts the profile; within that of the pld curve.
    assert np.all(prv >= pld * (1 - 2e-3))
    assert np.all(prv <= pld * math.exp(PRV_EPS_ERROR) * (1 + 2e-3) + PRV_DELTA_ERROR)


@pytest.mark.parametrize("accountant", ["pld", "rdp", "prv"])
def test_point_bound_is_never_below_the_profile_bound(accountant):
    # The (epsilon, delta) point is one of the profile's pairs: its bound is no better (pld).
    # rdp's point comes from real orders (0.5% tighter here), prv's from a finer mesh (0.01).
    slack = {"pld": 1e-9, "rdp": 1e-2, "prv": math.expm1(PRV_EPS_ERROR)}[accountant]
    for delta in (1e-5, 1e-2):
        eps = account_event(SMALL, delta, accountant).epsilon
        point = tpr_from_dp(eps, delta, ROC)
        assert np.all(roc_bound(SMALL, accountant, ROC) <= point * (1 + slack))


@settings(max_examples=40, deadline=None)
@given(
    st.floats(0.5, 20.0),
    st.floats(1e-3, 1.0),
    st.integers(1, 10_000),
    st.lists(st.floats(0.0, 1.0), min_size=2, max_size=20),
)
def test_rdp_bound_monotone_in_fpr(sigma, q, steps, fprs):
    fprs = np.sort(np.array(fprs))
    tpr = roc_bound(SubsampledGaussian(sigma, q, steps), "rdp", fprs)
    assert np.all(np.diff(tpr) >= 0)
    assert np.all(tpr >= fprs) and np.all(tpr <= 1.0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0.0, 30.0), min_size=1, max_size=30),
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30),
    st.lists(st.floats(0.0, 1.0), min_size=2, max_size=20),
)
def test_profile_bound_monotone_in_fpr_and_below_each_pair(eps, deltas, fprs):
    n = min(len(eps), len(deltas))
    eps, deltas, fprs = np.array(eps[:n]), np.array(deltas[:n]), np.sort(np.array(fprs))
    tpr = tpr_from_profile(eps, deltas, fprs)
    assert np.all(np.diff(tpr) >= 0)
    assert np.all((tpr >= fprs) & (tpr <= 1.0))
    for e, d in zip(eps, deltas):
        assert np.all(tpr <= tpr_from_dp(e, d, fprs) + 1e-15)


@settings(max_examples=30, deadline=None)
@given(st.floats(0.5, 10.0), st.floats(1e-3, 1.0), st.integers(1, 2000), st.floats(1.01, 3.0))
def test_rdp_bound_monotone_in_sigma(sigma, q, steps, factor):
    low = roc_bound(SubsampledGaussian(sigma, q, steps), "rdp", ROC)
    high = roc_bound(SubsampledGaussian(sigma * factor, q, steps), "rdp", ROC)
    assert np.all(high <= low * (1 + 1e-9))


@settings(max_examples=8, deadline=None)
@given(st.floats(0.8, 5.0), st.floats(0.01, 0.5), st.integers(1, 200), st.floats(1.05, 2.0))
def test_pld_bound_monotone_in_sigma(sigma, q, steps, factor):
    low = roc_bound(SubsampledGaussian(sigma, q, steps), "pld", ROC)
    high = roc_bound(SubsampledGaussian(sigma * factor, q, steps), "pld", ROC)
    # Each sigma has its own discretisation grid: monotone up to that grid's error.
    assert np.all(high <= low * (1 + 1e-3))


# --- the events -----------------------------------------------------------------------------------


def test_silos_take_the_worst_and_skip_the_dominated():
    weak = SubsampledGaussian(2.5, 0.04, 800)  # dominated by SMALL: more noise, fewer, rarer steps
    other = SubsampledGaussian(3.0, 0.2, 200)  # not dominated
    eps = np.linspace(0.0, 6.0, 50)
    for accountant in ("pld", "prv"):
        alone = privacy_profile(SMALL, accountant, eps)
        np.testing.assert_array_equal(
            privacy_profile(ParallelSilos((SMALL, weak, SMALL)), accountant, eps), alone
        )
        both = privacy_profile(ParallelSilos((SMALL, other)), accountant, eps)
        np.testing.assert_array_equal(both, np.maximum(alone, privacy_profile(other, accountant, eps)))
        assert np.all(privacy_profile(weak, accountant, eps) <= alone + 1e-12)
    tpr = roc_bound(ParallelSilos((SMALL, other)), "pld", ROC)
    assert np.all(tpr >= roc_bound(SMALL, "pld", ROC) - 1e-12)
    assert np.all(tpr >= roc_bound(other, "pld", ROC) - 1e-12)


def test_known_participation_is_the_exact_mixture():
    event = KnownParticipation(2.0, 0.3, 50)
    eps = np.array([0.0, 0.5, 1.0, 2.5, 5.0])
    exact = np.array([known_participation_delta(e, event.sigma, event.q, event.rounds) for e in eps])
    for accountant in ("pld", "prv"):
        np.testing.assert_allclose(privacy_profile(event, accountant, eps), exact, rtol=1e-9, atol=1e-15)
    tight = roc_bound(event, "pld", ROC)
    assert np.all(roc_bound(event, "rdp", ROC) >= tight - 1e-12)
    # The server knows the sample: never more private than the released models.
    assert np.all(tight >= roc_bound(SubsampledGaussian(2.0, 0.3, 50), "pld", ROC) - 1e-9)
    assert attack_bound(event, "prv").source == "prv privacy profile"


def test_known_participation_of_many_rounds_is_fast_and_sane():
    event = KnownParticipation(5.0, 0.01, 100_000)  # ~1000 rounds taken: mu ~ sqrt(1000) / 5
    tpr = roc_bound(event, "pld", ROC)
    assert np.all(tpr >= gaussian_tpr(math.sqrt(700) / 5.0, ROC) - 1e-9)
    assert np.all(tpr <= gaussian_tpr(math.sqrt(1400) / 5.0, ROC) + 1e-9)


def test_groups():
    record = roc_bound(SMALL, "pld", ROC)
    np.testing.assert_array_equal(roc_bound(Group(SMALL, 1), "pld", ROC), record)
    pair = roc_bound(Group(SMALL, 2), "pld", ROC)
    assert np.all(pair >= record - 1e-12)
    lemma6 = roc_bound(Group(SMALL, 2), "rdp", ROC)
    lemma5 = roc_bound(Group(SMALL, 2), "rdp", ROC, group_method="normal")
    assert np.all(lemma6 >= pair - 1e-12) and np.all(lemma5 >= pair - 1e-12)
    # Lemma 5 from the record-level profile: no worse than its own (epsilon, delta) point.
    found = account_event(Group(SMALL, 2), 1e-5, "rdp", group_method="normal")
    assert np.all(lemma5 <= tpr_from_dp(found.epsilon, 1e-5, ROC) * 1.01)
    # Silos: the worst split of the group.
    silos = ParallelSilos((SMALL, SubsampledGaussian(3.0, 0.2, 200)))
    split = roc_bound(Group(silos, 2), "pld", ROC)
    assert np.all(split >= roc_bound(Group(SMALL, 2), "pld", ROC) - 1e-9)


def test_composition():
    parts = (SubsampledGaussian(1.5, 0.05, 60), SubsampledGaussian(2.0, 0.2, 30))
    both = roc_bound(Composed(parts), "pld", ROC)
    assert np.all(both >= roc_bound(parts[0], "pld", ROC) - 1e-9)
    assert np.all(roc_bound(Composed(parts), "rdp", ROC) >= both - 1e-9)


def test_no_profile_falls_back_to_the_point_or_refuses():
    group = Group(SMALL, 2)  # prv accounts records only
    bound = attack_bound(group, "prv", epsilon=3.0, delta=1e-5)
    assert bound.source == POINT_SOURCE
    np.testing.assert_array_equal(bound.tprs, tpr_from_dp(3.0, 1e-5, FPRS))
    with pytest.raises(InvalidParameter, match="record level only"):
        attack_bound(group, "prv")
    with pytest.raises(InvalidParameter):
        privacy_profile(group, "prv", np.array([1.0]))


def test_steps_zero_releases_nothing():
    nothing = SubsampledGaussian(2.0, 0.1, 0)
    for accountant in ("pld", "prv", "rdp"):
        np.testing.assert_allclose(roc_bound(nothing, accountant, ROC), ROC)


def test_refusals():
    with pytest.raises(InvalidParameter):
        attack_bound(SMALL, "nope")
    with pytest.raises(InvalidParameter):
        attack_bound(SMALL, "rdp", conversion="bogus", epsilon=1.0, delta=1e-5)
    with pytest.raises(InvalidParameter):
        attack_bound(Group(SMALL, 2), "rdp", group_method="bogus")
    with pytest.raises(InvalidParameter):
        roc_bound(SMALL, "rdp", np.array([0.1, 1.5]))
    with pytest.raises(InvalidParameter):
        tpr_from_dp(-1.0, 1e-5, FPRS)
    with pytest.raises(InvalidParameter):
        privacy_profile(SMALL, "pld", np.array([-0.5]))
