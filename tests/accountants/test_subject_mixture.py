"""A subject's m items at a LocalItemDP / LocalGroupDP member, accounted as the Binomial(m, q)
mixture of their draws (issue 32, item 13), with the older sensitivity-m bound as the cross-check."""

import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import binom

from uldp.accountants.orders import DEFAULT_ORDERS
from uldp.accountants.rdp.curves import subsampled_gaussian_rdp
from uldp.accountants.subject.horizontal import (
    FederationRun,
    MixturePart,
    composed_epsilon,
    federation_composition,
    local_composition,
    max_rounds,
    sensitivity_bound,
    subject_guarantee,
    worst_held,
)

dp_accounting = pytest.importorskip("dp_accounting")

DELTA = 1e-5
#: The audit's setting: 4 members each holding 2 of the subject's items, all 4 every round.
AUDIT = FederationRun(4, 4, 100, 10, 0.01, 2.0, "localitemdp")
INTEGER_ORDERS = [2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 128, 256]


def _rdp_reference(sigma: float, q: float, steps: int) -> float:
    ref = dp_accounting.rdp.RdpAccountant(orders=INTEGER_ORDERS)
    ref.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
        )
    )
    return ref.get_epsilon(DELTA)


@pytest.mark.parametrize("mechanism", ["localitemdp", "localgroupdp"])
def test_the_audit_setting_is_tighter_and_cross_checked(mechanism):
    run = FederationRun(4, 4, 100, 10, 0.01, 2.0, mechanism)
    g = subject_guarantee(run, [2] * 4, DELTA)
    # the sensitivity-m bound the audit found (4.30 / 8.92): multiplier 2 / 2 at 1 - 0.99^2
    assert g.local_cross_check == pytest.approx(4.3004, abs=1e-4)
    assert g.federation_cross_check == pytest.approx(8.9218, abs=1e-4)
    # the mixture, by RDP: 2 items' own steps at sigma / sqrt(2): 1.58 / 3.33
    assert g.local_epsilon == pytest.approx(1.5807, abs=1e-4)
    assert g.federation_epsilon == pytest.approx(3.3295, abs=1e-4)
    assert g.local_epsilon < 0.4 * g.local_cross_check
    assert g.federation_epsilon < 0.4 * g.federation_cross_check


def test_the_rdp_bound_is_dp_accountings_on_the_items_own_steps():
    ours = composed_epsilon(
        local_composition(AUDIT, [2]), 2.0, DELTA, orders=",".join(map(str, INTEGER_ORDERS))
    )
    assert ours == pytest.approx(_rdp_reference(2.0 / math.sqrt(2), 0.01, 2000), rel=1e-9)
    check = composed_epsilon(
        sensitivity_bound(local_composition(AUDIT, [2])),
        2.0,
        DELTA,
        orders=",".join(map(str, INTEGER_ORDERS)),
    )
    assert check == pytest.approx(_rdp_reference(1.0, 1 - 0.99**2, 1000), rel=1e-9)


def _mixture_rdp(order: float, sigma: float, m: int, q: float) -> float:
    """RDP of one step of the mixture at `order`, both directions, by quadrature on a fine grid
    (the trapezoid rule on a smooth, Gaussian-decaying integrand: far below the margins tested)."""
    shifts = np.arange(m + 1) / sigma
    log_p = binom.logpmf(np.arange(m + 1), m, q)
    z = np.linspace(-40.0, 40.0 + order * shifts[-1], 100_001)
    log_phi = -(z**2) / 2 - 0.5 * math.log(2 * math.pi)
    log_ratio = logsumexp(log_p + np.outer(z, shifts) - shifts**2 / 2, axis=1)  # log P/Q
    step = z[1] - z[0]
    add = logsumexp(log_phi + order * log_ratio) + math.log(step)  # E_Q[(P/Q)^a]
    remove = logsumexp(log_phi + (1 - order) * log_ratio) + math.log(step)  # E_Q[(P/Q)^(1-a)]
    return max(add, remove) / (order - 1)


@pytest.mark.parametrize("m, q, sigma", [(2, 0.01, 2.0), (3, 0.1, 1.0), (5, 0.3, 3.0), (4, 0.05, 0.7)])
def test_the_rdp_bound_is_above_the_mixtures_rdp_and_below_the_old_bound(m, q, sigma):
    """m steps of multiplier sigma / sqrt(m) bound the exact mixture's RDP (both directions, by
    quadrature), and never exceed the sensitivity-m bound's curve."""
    orders = np.array([1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 32.0])
    ours = m * subsampled_gaussian_rdp(orders, sigma / math.sqrt(m), q)
    older = subsampled_gaussian_rdp(orders, sigma / m, 1 - (1 - q) ** m)
    for order, bound, old in zip(orders, ours, older):
        exact = _mixture_rdp(order, sigma, m, q)
        assert exact <= bound * (1 + 1e-9) + 1e-12, (order, exact, bound)
        assert bound <= old * (1 + 1e-9), (order, bound, old)


@pytest.mark.parametrize("m", [2, 3, 8, 64])
@pytest.mark.parametrize("q", [1e-3, 0.01, 0.2, 0.9, 1.0])
@pytest.mark.parametrize("sigma", [0.3, 1.0, 5.0])
def test_the_rdp_bound_never_exceeds_the_cross_check_at_any_default_order(m, q, sigma):
    ours = m * subsampled_gaussian_rdp(DEFAULT_ORDERS, sigma / math.sqrt(m), q)
    older = subsampled_gaussian_rdp(DEFAULT_ORDERS, sigma / m, 1 - (1 - q) ** m)
    assert np.all(ours <= older * (1 + 1e-9) + 1e-300)


def test_pld_accounts_the_mixture_exactly_as_dp_accounting():
    """`--accountant pld`: the local figure is dp-accounting's PLD of MixtureOfGaussiansDpEvent(sigma,
    [0, 1, 2], Binomial(2, q)) over the steps, between its optimistic and pessimistic estimates.
    (q = 0.2 keeps the grids, and the test, small.)"""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    sigma, q, steps = 2.0, 0.2, 50
    run = FederationRun(2, 2, 5, 10, q, sigma, "localitemdp")
    ours = subject_guarantee(run, [2], DELTA, accountant="pld")
    sensitivities = [0.0, 1.0, 2.0]
    probs = binom.pmf(sensitivities, 2, q).tolist()
    estimates = {}
    for pessimistic in (True, False):
        step = pld_lib.from_mixture_gaussian_mechanism(
            standard_deviation=sigma,
            sensitivities=sensitivities,
            sampling_probs=probs,
            pessimistic_estimate=pessimistic,
            value_discretization_interval=8e-3,
        )
        estimates[pessimistic] = step.self_compose(steps).get_epsilon_for_delta(DELTA)
    assert estimates[False] <= ours.local_epsilon <= estimates[True] * (1 + 1e-3)
    assert ours.local_epsilon == pytest.approx(estimates[True], rel=0.02)
    # the exact mixture is below the RDP bound, which is below the cross-check
    rdp = subject_guarantee(run, [2], DELTA)
    assert ours.local_epsilon < rdp.local_epsilon < rdp.local_cross_check
    assert ours.local_epsilon < ours.local_cross_check


def test_pld_round_limits_meet_the_budget():
    run = FederationRun(2, 2, 5, 10, 0.2, 2.0, "localitemdp")  # the step PLD of the test above
    rounds = max_rounds(run, [2], 8.0, DELTA, federation=False, accountant="pld")
    assert rounds > 0
    at = lambda r: composed_epsilon(local_composition(run.with_rounds(r), [2]), 2.0, DELTA, accountant="pld")
    assert rounds == 5 and at(rounds) <= 8.0 < at(rounds + 1)


def test_mixture_parts_and_the_cross_check_composition():
    run = FederationRun(8, 3, 10, 5, 0.02, 1.5, "localitemdp")
    assert federation_composition(run, [4, 3, 1, 1]) == (
        MixturePart(0.02, 50, 4),
        MixturePart(0.02, 50, 3),
        MixturePart(0.02, 50, 1),
    )
    ((rate, steps, sensitivity),) = sensitivity_bound(local_composition(run, [4, 3]))
    assert (rate, steps, sensitivity) == (pytest.approx(1 - 0.98**4, rel=1e-12), 50, 4.0)
    # one item per member: the mixture is the item's own sub-sampled Gaussian, no cross-check
    g = subject_guarantee(run, [1, 1], DELTA)
    same = subject_guarantee(FederationRun(8, 3, 10, 5, 0.02, 1.5), [1, 1], DELTA)
    assert (g.local_epsilon, g.federation_epsilon) == (same.local_epsilon, same.federation_epsilon)
    assert g.local_cross_check is None and g.federation_cross_check is None


def test_worst_held_accounts_the_mixture():
    """What `uldp train` prints each round: the mixture, for the worst subject."""
    run = FederationRun(4, 4, 20, 5, 0.05, 3.0, "localgroupdp")
    held = worst_held(run, {"wide": [1, 1, 1, 1], "deep": [6], "mid": [3, 2]}, DELTA)
    by_subject = {
        name: subject_guarantee(run, h, DELTA)
        for name, h in {"wide": [1] * 4, "deep": [6], "mid": [3, 2]}.items()
    }
    assert held.local_epsilon == max(g.local_epsilon for g in by_subject.values())
    assert held.federation_epsilon == max(g.federation_epsilon for g in by_subject.values())
    assert held.local_epsilon < by_subject["deep"].local_cross_check


def test_pld_refuses_what_it_cannot_build():
    with pytest.raises(ValueError, match="up to 16384 items"):
        subject_guarantee(
            FederationRun(4, 4, 1, 1, 0.01, 2.0, "localitemdp"), [20000], DELTA, accountant="pld"
        )
    with pytest.raises(ValueError, match="noise multipliers >= 0.1"):
        subject_guarantee(FederationRun(4, 4, 1, 1, 0.01, 0.05, "localitemdp"), [2], DELTA, accountant="pld")
