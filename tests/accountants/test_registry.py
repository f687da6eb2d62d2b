"""The accountant registry: every accountant accounts the events it supports, refuses the rest."""

import math
import re

import numpy as np
import pytest

from uldp.accountants.account import group_level, record_level
from uldp.accountants.conversion import rdp_to_dp, refine
from uldp.accountants.events import Composed, Group, KnownParticipation, ParallelSilos, SubsampledGaussian
from uldp.accountants.orders import Orders
from uldp.accountants.rdp.curves import event_rdp
from uldp.accountants.rdp.participation import known_participation_exact_epsilon, known_participation_rdp
from uldp.accountants.registry import ACCOUNTANTS, account_event
from uldp.errors import InvalidParameter

DELTA = 1e-5
RUN = SubsampledGaussian(2.0, 0.05, 200)
OTHER = SubsampledGaussian(3.0, 0.1, 100)
SILOS = ParallelSilos((RUN, OTHER))
SERVER = KnownParticipation(2.0, 0.05, 200)

SUPPORTED = {
    "rdp": [
        RUN,
        SILOS,
        Composed((RUN, OTHER)),
        Group(RUN, 2),
        Group(SILOS, 2),
        SERVER,
        Composed((RUN, SERVER)),
    ],
    "pld": [
        RUN,
        SILOS,
        Composed((RUN, OTHER)),
        Group(RUN, 2),
        Group(SILOS, 2),
        Group(Composed((RUN, OTHER)), 2),  # each part's group PLD, composed (issue 32)
        SERVER,
    ],
    "prv": [RUN, SILOS, SERVER],
}
REFUSED = {
    "rdp": [Group(Group(RUN, 2), 2), Composed((Group(RUN, 2), RUN))],
    "pld": [Composed((RUN, SERVER)), Group(Composed((RUN, SERVER)), 2), Group(SERVER, 2)],
    "prv": [Group(RUN, 2), Composed((RUN, OTHER))],
}


def test_every_accountant_is_registered():
    assert tuple(ACCOUNTANTS) == ("rdp", "pld", "prv")


@pytest.mark.parametrize("name, event", [(n, e) for n, events in SUPPORTED.items() for e in events])
def test_accounts_every_supported_event(name, event):
    if name != "rdp":
        pytest.importorskip("dp_accounting" if name == "pld" else "prv_accountant")
    assert ACCOUNTANTS[name].supports(event) is None
    found = account_event(event, DELTA, name)
    assert 0 < found.epsilon < math.inf


@pytest.mark.parametrize("name, event", [(n, e) for n, events in REFUSED.items() for e in events])
def test_refuses_the_others_naming_accountant_and_event(name, event):
    reason = ACCOUNTANTS[name].supports(event)
    assert reason
    with pytest.raises(
        InvalidParameter, match=f"the {name} accountant does not account .*: {re.escape(reason)}"
    ):
        account_event(event, DELTA, name)


def test_unknown_accountant_is_refused():
    with pytest.raises(InvalidParameter, match="accountant must be one of rdp, pld, prv"):
        account_event(RUN, DELTA, "moments")


@pytest.mark.parametrize("event", [RUN, SILOS, SERVER])
def test_composed_of_one_event_is_that_event(event):
    assert account_event(Composed((event,)), DELTA).epsilon == account_event(event, DELTA).epsilon


def test_composed_of_one_run_is_that_run_by_pld():
    pytest.importorskip("dp_accounting")
    assert account_event(Composed((RUN,)), DELTA, "pld").epsilon == account_event(RUN, DELTA, "pld").epsilon


def test_composition_adds_rdp_curves():
    grid = Orders.parse("default").grid
    both = event_rdp(Composed((RUN, OTHER, SERVER)), grid)
    np.testing.assert_array_equal(
        both, event_rdp(RUN, grid) + event_rdp(OTHER, grid) + event_rdp(SERVER, grid)
    )


def test_parallel_silos_take_the_worst_curve():
    grid = Orders.parse("tf-privacy").grid
    np.testing.assert_array_equal(
        event_rdp(SILOS, grid), np.maximum(event_rdp(RUN, grid), event_rdp(OTHER, grid))
    )


@pytest.mark.parametrize("conversion, orders", [("improved", "default"), ("classic", "tf-privacy")])
def test_known_participation_by_rdp_is_its_formula(conversion, orders):
    parsed = Orders.parse(orders)

    def curve(grid):
        return known_participation_rdp(grid, 2.0, 0.05, 200)

    direct = parsed.best(lambda grid: rdp_to_dp(grid, curve(grid), math.log(DELTA), conversion))
    if parsed.preset == "default":  # the default set is refined between its orders
        direct = refine(direct, parsed.grid, curve, math.log(DELTA), conversion)
    found = account_event(SERVER, DELTA, "rdp", conversion=conversion, orders=orders)
    assert (found.epsilon, found.order) == (direct.epsilon, direct.order)


@pytest.mark.parametrize("name", ["pld", "prv"])
def test_known_participation_by_tight_accountants_is_exact(name):
    exact = known_participation_exact_epsilon(SERVER, DELTA)
    assert account_event(SERVER, DELTA, name).epsilon == exact
    assert exact <= account_event(SERVER, DELTA, "rdp").epsilon


def test_record_and_group_level_are_the_registry():
    assert record_level(RUN, DELTA).epsilon == account_event(RUN, DELTA).epsilon
    for method in ("rdp", "normal"):
        assert (
            group_level(RUN, DELTA, 4, method).epsilon
            == account_event(Group(RUN, 4), DELTA, "rdp", group_method=method).epsilon
        )


def test_rdp_group_method_is_checked():
    with pytest.raises(InvalidParameter, match="group method"):
        account_event(Group(RUN, 2), DELTA, "rdp", group_method="pld")


@pytest.mark.parametrize(
    "bad",
    [
        lambda: Composed(()),
        lambda: Group(RUN, 0),
        lambda: KnownParticipation(0.0, 0.5, 1),
        lambda: KnownParticipation(1.0, 1.5, 1),
        lambda: KnownParticipation(1.0, 0.5, -1),
    ],
)
def test_events_validate_their_fields(bad):
    with pytest.raises(InvalidParameter):
        bad()
