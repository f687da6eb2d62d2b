"""PLD accountant (accountants/tight/pld.py): record level against dp-accounting, group level against
closed forms and the RDP / normal-DP group bounds, discretisation error, silos."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.stats import norm

from uldp.accountants.account import group_level, record_level
from uldp.accountants.events import ParallelSilos, SubsampledGaussian
from uldp.accountants.tight.pld import MAX_PARTITIONS, _default_discretization, pld_epsilon

FIG2 = SubsampledGaussian(sigma=5.0, q=0.01, steps=100_000)
DELTA = 1e-5


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Exact epsilon of a Gaussian with sensitivity/noise ratio mu (Balle & Wang 2018, Thm. 8)."""

    def excess(eps: float) -> float:
        return norm.cdf(mu / 2 - eps / mu) - math.exp(eps + norm.logcdf(-mu / 2 - eps / mu)) - delta

    return brentq(excess, 0.0, mu * mu + 100 * mu + 100, xtol=1e-12)


def dp_accounting_epsilon(mech: SubsampledGaussian, delta: float) -> float:
    import dp_accounting
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

    accountant = PLDAccountant(
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4
    )
    event = dp_accounting.PoissonSampledDpEvent(mech.q, dp_accounting.GaussianDpEvent(mech.sigma))
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, mech.steps))
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize(
    "sigma,q,steps,delta",
    [
        (1.0, 0.5, 10, 1e-5),
        (0.8, 0.3, 3, 1e-2),
        (2.0, 0.05, 1000, 1e-5),
        (0.6, 0.9, 5, 1e-3),
    ],
)
def test_record_level_agrees_with_dp_accounting(sigma, q, steps, delta):
    mech = SubsampledGaussian(sigma, q, steps)
    ours = pld_epsilon(mech, delta)
    reference = dp_accounting_epsilon(mech, delta)
    assert ours == pytest.approx(reference, rel=2e-3)


@pytest.mark.parametrize("k,steps,sigma", [(1, 1, 1.0), (1, 100, 8.0), (3, 10, 4.0), (8, 50, 20.0)])
def test_full_participation_is_the_gaussian_with_sensitivity_k(k, steps, sigma):
    mech = SubsampledGaussian(sigma, 1.0, steps)
    exact = gaussian_epsilon(k * math.sqrt(steps) / sigma, DELTA)
    ours = pld_epsilon(mech, DELTA, k=k)
    # Pessimistic discretisation: never below the exact value, and close to it.
    assert exact - 1e-9 <= ours <= exact * 1.002 + 1e-6


def test_group_of_one_is_the_record():
    assert pld_epsilon(FIG2, DELTA, k=1) == pld_epsilon(FIG2, DELTA)


def test_default_discretisation_is_converged_at_fig2():
    defaults = []
    for k in (1, 8, 32):
        default = pld_epsilon(FIG2, DELTA, k=k)
        finer = pld_epsilon(FIG2, DELTA, k=k, discretization=_default_discretization(FIG2, (k,)) / 4)
        assert finer <= default <= finer * 1.001
        defaults.append(default)
    assert defaults == sorted(defaults)  # and it grows with the group at q = 0.01 (see below)


def test_group_bound_below_the_rdp_and_normal_dp_conversions_at_fig2():
    for k in (2, 4, 16):
        pld = group_level(FIG2, DELTA, k, "pld").epsilon
        normal = group_level(FIG2, DELTA, k, "normal").epsilon
        rdp = group_level(FIG2, DELTA, k, "rdp").epsilon
        assert pld < normal < rdp


def test_group_bound_lies_between_the_record_and_no_amplification():
    # A group is never cheaper than one record, nor dearer than the same run without
    # sub-sampling (every step a Gaussian with sensitivity k).
    record = pld_epsilon(FIG2, DELTA)
    group = pld_epsilon(FIG2, DELTA, k=4)
    no_sampling = gaussian_epsilon(4 * math.sqrt(FIG2.steps) / FIG2.sigma, DELTA)
    assert record < group < no_sampling


# A group PLD's cost grows as q falls (its loss grid is finer): at sigma 0.7, the corner hypothesis
# tries first, k = 2 and 4 take 25 s at q = 0.01 and 5 s at q = 0.05 on 2 cores. So 4 examples,
# q from 0.05; at q = 0.01 the growth is checked at Fig. 2 (k = 1, 8, 32 above; record < group
# of 4 < no amplification).
@settings(max_examples=4)
@given(sigma=st.floats(0.7, 10.0), q=st.floats(5e-2, 0.5), steps=st.integers(10, 300))
def test_epsilon_grows_with_the_group(sigma, q, steps):
    mech = SubsampledGaussian(sigma, q, steps)
    values = [pld_epsilon(mech, DELTA, k=k) for k in (1, 2, 4)]
    assert values[0] <= values[1] * (1 + 1e-6) and values[1] <= values[2] * (1 + 1e-6)


@settings(max_examples=12)
@given(sigma=st.floats(0.7, 10.0), q=st.floats(1e-3, 0.5), steps=st.integers(1, 5000))
def test_record_level_never_above_rdp(sigma, q, steps):
    mech = SubsampledGaussian(sigma, q, steps)
    pld = record_level(mech, DELTA, "pld").epsilon
    rdp = record_level(mech, DELTA, "rdp").epsilon
    assert pld <= rdp * (1 + 1e-9)


def test_record_over_silos_is_the_worst_silo():
    silos = ParallelSilos((SubsampledGaussian(5.0, 0.01, 1000), SubsampledGaussian(2.0, 0.02, 1000)))
    assert pld_epsilon(silos, DELTA) == max(pld_epsilon(s, DELTA) for s in silos.silos)


def test_group_over_silos_covers_every_split():
    a, b = SubsampledGaussian(3.0, 0.02, 500), SubsampledGaussian(3.0, 0.01, 500)
    split = pld_epsilon(ParallelSilos((a, b)), DELTA, k=2)
    # The group's two records in one silo, or one in each: the bound covers both.
    assert split >= pld_epsilon(a, DELTA, k=2) * (1 - 1e-3)
    assert split >= pld_epsilon(a, DELTA) * (1 - 1e-3)


def test_too_many_splits_are_refused_with_a_pointer_to_the_other_methods():
    silos = ParallelSilos(tuple(SubsampledGaussian(3.0, 0.01, 10) for _ in range(8)))
    with pytest.raises(ValueError, match="'rdp' or 'normal'"):
        pld_epsilon(silos, DELTA, k=40)
    assert MAX_PARTITIONS >= 100


@pytest.mark.parametrize("kwargs", [{"k": 0}, {"discretization": 0.0}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        pld_epsilon(FIG2, DELTA, **kwargs)


def test_runs_too_long_for_the_fft_are_refused_with_a_pointer():
    with pytest.raises(ValueError, match="'prv'"):
        pld_epsilon(SubsampledGaussian(100.0, 0.001, 10**9), DELTA)


def test_bad_delta():
    with pytest.raises(ValueError, match="delta"):
        pld_epsilon(FIG2, 1.5)


def test_mixture_step_matches_direct_hockey_stick():
    """One step for a group of 2: the worst-case mixture pair, integrated numerically."""
    sigma, q, k, delta = 1.5, 0.3, 2, 1e-3
    mech = SubsampledGaussian(sigma, q, 1)
    probs = np.array([(1 - q) ** 2, 2 * q * (1 - q), q**2])
    x = np.linspace(-15 * sigma, 15 * sigma + k, 400_001)
    dx = x[1] - x[0]
    p0 = norm.pdf(x, scale=sigma)
    p1 = sum(w * norm.pdf(x, loc=j, scale=sigma) for j, w in enumerate(probs))

    def hockey(eps):
        return max(
            np.maximum(p1 - math.exp(eps) * p0, 0).sum() * dx,
            np.maximum(p0 - math.exp(eps) * p1, 0).sum() * dx,
        )

    exact = brentq(lambda e: hockey(e) - delta, 0.0, 50.0, xtol=1e-10)
    ours = pld_epsilon(mech, delta, k=k)
    assert exact - 1e-6 <= ours <= exact * 1.01 + 1e-4


def test_a_composition_of_different_mechanisms_on_one_adaptive_grid():
    import dp_accounting
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

    from uldp.accountants.account import rdp_epsilon
    from uldp.accountants.tight.pld import pld_epsilon_composed

    a, b = SubsampledGaussian(20.0, 1e-3, 10_000), SubsampledGaussian(20.0, 2e-3, 5_000)
    assert pld_epsilon_composed([a], DELTA) == pld_epsilon(a, DELTA)
    ours = pld_epsilon_composed([a, b], DELTA)
    fine = PLDAccountant(
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-5
    )
    for m in (a, b):
        fine.compose(
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(m.q, dp_accounting.GaussianDpEvent(m.sigma)), m.steps
            )
        )
    assert ours == pytest.approx(fine.get_epsilon(DELTA), rel=5e-3)
    assert ours <= rdp_epsilon([(m.sigma, m.q, m.steps) for m in (a, b)], DELTA)
