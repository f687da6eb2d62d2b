"""The exact curve of composed plain Gaussians (accountants/tight/gaussian.py), and the dropout views
that use it at user-q = 1 (issue 32, item 10): checked against dp-accounting, never below it by
more than its discretisation, always below RDP."""

from __future__ import annotations

import math

import dp_accounting
import pytest

from uldp.accountants.dropout.accounting import dropout_epsilon, max_rounds, server_epsilon, server_max_rounds
from uldp.accountants.dropout.rounds import DropoutRound
from uldp.accountants.dropout.run_spend import ObservedRound, run_accountant_epsilons, run_epsilons
from uldp.accountants.events import Composed, KnownParticipation, SubsampledGaussian
from uldp.accountants.tight.gaussian import (
    composed_mu,
    exact_gaussian_epsilon,
    gaussian_delta_at,
    gaussian_epsilon,
    gaussian_max_count,
    plain_gaussian_mu,
)

DELTA = 1e-5


def _pld(parts: list[tuple[float, int]], delta: float = DELTA) -> float:
    """dp-accounting's PLD of the composition (pessimistic: an upper bound, 1e-4 apart)."""
    pld = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    for multiplier, count in parts:
        pld.compose(dp_accounting.GaussianDpEvent(multiplier), count)
    return pld.get_epsilon(delta)


def _rdp(parts: list[tuple[float, int]], delta: float = DELTA) -> float:
    rdp = dp_accounting.rdp.RdpAccountant()
    for multiplier, count in parts:
        rdp.compose(dp_accounting.GaussianDpEvent(multiplier), count)
    return rdp.get_epsilon(delta)


@pytest.mark.parametrize("parts", [[(2.0, 6)], [(0.7, 1)], [(1.5, 3), (3.0, 10)], [(19.95, 500)]])
def test_the_closed_form_is_dp_accountings_pld_and_below_rdp(parts):
    exact = gaussian_epsilon(composed_mu(parts), DELTA)
    pld = _pld(parts)
    assert exact <= pld + 1e-7  # PLD's pessimistic figure bounds the exact curve from above
    assert exact == pytest.approx(pld, abs=1e-4)  # ... and the closed form loses nothing to it
    assert exact < _rdp(parts)


def test_the_audit_figure_six_rounds_at_sigma_2():
    """Issue 32: 6 rounds at sigma 2 printed 5.979 (RDP); the exact value is 5.545."""
    assert gaussian_epsilon(math.sqrt(6) / 2, DELTA) == pytest.approx(5.544830923, abs=1e-6)


@pytest.mark.parametrize("mu", [0.01, 0.3, 1.0, 3.0, 12.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-10])
def test_epsilon_is_rounded_up_and_tight(mu, delta):
    eps = gaussian_epsilon(mu, delta)
    if eps == 0:
        assert gaussian_delta_at(0.0, mu) <= delta
        return
    assert gaussian_delta_at(eps, mu) <= delta  # valid: never below the exact epsilon
    assert gaussian_delta_at(eps * (1 - 1e-6), mu) > delta  # tight: a hair below is not


def test_plain_gaussian_events_only():
    assert plain_gaussian_mu(SubsampledGaussian(2.0, 1.0, 6)) == pytest.approx(math.sqrt(6) / 2)
    assert plain_gaussian_mu(KnownParticipation(2.0, 1.0, 6)) == pytest.approx(math.sqrt(6) / 2)
    both = Composed((SubsampledGaussian(2.0, 1.0, 2), SubsampledGaussian(1.0, 1.0, 1)))
    assert plain_gaussian_mu(both) == pytest.approx(math.sqrt(2 / 4 + 1))
    assert plain_gaussian_mu(SubsampledGaussian(2.0, 0.5, 6)) is None
    assert exact_gaussian_epsilon(KnownParticipation(2.0, 0.99, 6), DELTA) is None


def test_max_count_is_the_last_count_within_budget():
    for multiplier, budget in [(2.0, 5.979), (1.0, 3.0), (10.0, 1.0)]:
        count = gaussian_max_count(multiplier, budget, DELTA)
        assert gaussian_epsilon(math.sqrt(count) / multiplier, DELTA) <= budget
        assert gaussian_epsilon(math.sqrt(count + 1) / multiplier, DELTA) > budget
    assert gaussian_max_count(0.1, 1.0, DELTA) == 0
    # hostile extremes end at once: the count is capped where a double still tells n from n + 1
    assert gaussian_max_count(1e6, 1e6, DELTA) == 10**9
    assert gaussian_max_count(1e-6, 1e6, DELTA) == 0
    assert gaussian_epsilon(1e12, DELTA) == pytest.approx(5e23, rel=1e-6)  # finite, no overflow


def test_uldp_dropout_views_at_q_1_are_exact():
    """Both views (released model, server) of 6 rounds at multiplier 2 and q = 1: 5.545, not 5.979."""
    pld = _pld([(2.0, 6)])
    for of in (dropout_epsilon, server_epsilon):
        exact = of(2.0, 1.0, 6, DELTA)
        assert exact == pytest.approx(pld, abs=1e-4) and exact <= pld + 1e-7
        cross_check = of(2.0, 1.0, 6, DELTA, exact=False)
        assert cross_check == pytest.approx(5.9785, abs=1e-3)
        assert exact < cross_check
    # with sub-sampling the accountant's figure, as before
    assert dropout_epsilon(2.0, 0.5, 6, DELTA) == dropout_epsilon(2.0, 0.5, 6, DELTA, exact=False)
    # the most rounds agree with the exact figure: 6 rounds fit 5.545, 7 do not
    assert max_rounds(2.0, 1.0, 5.545, DELTA) == 6 == server_max_rounds(2.0, 1.0, 5.545, DELTA)
    assert max_rounds(2.0, 1.0, 5.545, DELTA, exact=False) < 6


def test_a_runs_rounds_at_q_1_compose_exactly():
    """A dp-fedavg-robust run at q = 1 with rounds of different multipliers (dropouts, no
    calibration, in the clear): mu = sqrt(sum 1/m_t^2) for each view, checked against
    dp-accounting's PLD of the same rounds."""
    rounds = [
        ObservedRound(DropoutRound(4, 3, 4), False),
        ObservedRound(DropoutRound(4, 4, 4), False),
        ObservedRound(DropoutRound(4, 2, 4), True),
    ]
    z = 1.3
    model, server = run_epsilons(rounds, z, 1.0, DELTA, secure=False)
    model_parts = [(r.model_multiplier(z), 1) for r in rounds]
    server_parts = [(r.server_multiplier(z, False), 1) for r in rounds]
    for ours, parts in ((model, model_parts), (server, server_parts)):
        pld = _pld(parts)
        assert ours == pytest.approx(pld, abs=1e-4) and ours <= pld + 1e-7
    rdp_model, rdp_server = run_accountant_epsilons(rounds, z, 1.0, DELTA, secure=False)
    assert model < rdp_model and server < rdp_server
