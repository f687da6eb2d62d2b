"""Groups of k records over a history of several phases (issue 32, item 11): the PLD group method
composes each phase's mixture-of-Gaussians PLD, a valid bound that dp-accounting's own accountant
reproduces, well below Lemma 5 on the composed RDP curve."""

from __future__ import annotations

import pytest
from scipy.stats import binom

from uldp.accountants.events import Composed, Group, SubsampledGaussian
from uldp.accountants.registry import account_event
from uldp.accountants.statements.tradeoff import POINT_SOURCE, attack_bound
from uldp.accountants.tight.pld import _default_discretization

DELTA = 1e-5
#: Two phases of an Opacus history (a learning-rate schedule that changed the noise and batch).
#: Large rates keep each step's PLD grid coarse, hence the test fast.
PHASES = Composed((SubsampledGaussian(2.0, 0.5, 20), SubsampledGaussian(1.5, 0.3, 10)))


def test_the_pld_accountant_accounts_a_group_over_phases():
    found = account_event(Group(PHASES, 3), DELTA, "pld")
    assert found.group_size_used == 3 and found.epsilon > 0


def test_it_is_the_composition_dp_accounting_gives_for_each_phases_mixture():
    import dp_accounting

    # The grid uldp chooses (the finest of the phases'), so the two differ only in how they compose.
    grid = min(_default_discretization(phase, (3,)) for phase in PHASES.events)
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=grid)
    for phase in PHASES.events:
        sensitivities = list(range(4))
        mixture = dp_accounting.dp_event.MixtureOfGaussiansDpEvent(
            phase.sigma, sensitivities, list(binom.pmf(sensitivities, 3, phase.q))
        )
        accountant.compose(dp_accounting.SelfComposedDpEvent(mixture, phase.steps))
    reference = accountant.get_epsilon(DELTA)
    assert account_event(Group(PHASES, 3), DELTA, "pld").epsilon == pytest.approx(reference, rel=1e-4)


def test_two_equal_phases_are_one_run_of_their_steps():
    phase = PHASES.events[0]
    split = account_event(Group(Composed((phase, phase)), 3), DELTA, "pld").epsilon
    whole = account_event(
        Group(SubsampledGaussian(phase.sigma, phase.q, 2 * phase.steps), 3), DELTA, "pld"
    ).epsilon
    assert split == pytest.approx(whole, rel=1e-6)


def test_it_sits_between_the_phases_alone_and_lemma_5():
    group = account_event(Group(PHASES, 3), DELTA, "pld").epsilon
    each = [account_event(Group(phase, 3), DELTA, "pld").epsilon for phase in PHASES.events]
    record = account_event(PHASES, DELTA, "pld").epsilon
    lemma5 = account_event(Group(PHASES, 3), DELTA, "rdp", group_method="normal").epsilon
    assert max(*each, record) < group < lemma5


def test_its_attack_bound_comes_from_the_same_curve():
    found = attack_bound(Group(PHASES, 3), "pld", epsilon=1.0, delta=DELTA)
    assert found.source != POINT_SOURCE and all(0 <= t <= 1 for t in found.tprs)


def test_a_group_over_phases_past_the_pld_ceiling_is_refused_by_name():
    from uldp.errors import InvalidParameter

    with pytest.raises(InvalidParameter, match="groups of up to"):
        account_event(Group(PHASES, 2**14 + 1), DELTA, "pld")


def test_phases_of_one_setting_apart_are_one_run_and_many_settings_are_refused():
    from uldp.errors import InvalidParameter

    a, b = PHASES.events
    apart = Composed((SubsampledGaussian(a.sigma, a.q, 5), b, SubsampledGaussian(a.sigma, a.q, 15)))
    together = account_event(Group(PHASES, 3), DELTA, "pld").epsilon
    assert account_event(Group(apart, 3), DELTA, "pld").epsilon == pytest.approx(together, rel=1e-6)
    many = Composed(tuple(SubsampledGaussian(1.0 + i / 100, 0.5, 1) for i in range(33)))
    with pytest.raises(InvalidParameter, match="up to 32 distinct"):
        account_event(Group(many, 2), DELTA, "pld")
