"""account_plan: the one function from an algorithm's plan to its guarantees."""

import pytest

from uldp.accountants.account import (
    account,
    account_plan,
    group_level,
    known_participation_epsilon,
    record_level,
)
from uldp.accountants.events import SubsampledGaussian
from uldp.accountants.plan import Plan
from uldp.trainers.algorithms import plan_algorithm

DELTA = 1e-5
PLANS = [
    plan_algorithm("uldp-avg", sigma=5, rounds=100, user_q=0.5, silos=3),
    plan_algorithm("uldp-naive", sigma=3, rounds=50, silos=2),
    plan_algorithm("uldp-sgd", sigma=2, rounds=20, user_q=1.0),
    plan_algorithm("uldp-group", sigma=1, rounds=10, silo_sizes=[100, 200, 300], batch_size=10, k=4),
    plan_algorithm("uldp-group", sigma=1, rounds=10, record_q=0.01, silos=2, k=1),
]


def runner_user_epsilon(plan, delta):
    """The user-level epsilon by the record/group functions directly: what the runner printed before."""
    if plan.group_k is not None and plan.group_k > 1:
        return group_level(plan.mechanism, delta, plan.group_k, "rdp").epsilon
    return record_level(plan.mechanism, delta).epsilon


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: f"{p.algorithm}-k{p.group_k}")
def test_first_guarantee_is_the_runners_user_epsilon(plan):
    assert account_plan(plan, delta=DELTA)[0].epsilon == runner_user_epsilon(plan, DELTA)


def test_runner_agrees_when_importable():
    runner = pytest.importorskip("uldp.trainers.runner")
    for plan in PLANS:
        assert account_plan(plan, delta=DELTA)[0].epsilon == runner.user_epsilon(plan, DELTA)


def test_user_sampling_adds_the_servers_view():
    plan = PLANS[0]
    released, server = account_plan(plan, delta=DELTA)
    assert (released.level, released.method, released.k) == ("user", "user", None)
    seen = known_participation_epsilon(5, 0.5, 100, DELTA)
    assert (server.method, server.epsilon, server.order) == ("server view", seen.epsilon, seen.order)
    assert server.epsilon >= released.epsilon
    assert len(account_plan(plan, delta=DELTA, server_view=False)) == 1


def test_group_plan_accounts_each_k_and_method():
    plan = PLANS[3]
    rows = account_plan(plan, delta=DELTA, ks=(1, 4), methods=("rdp", "normal"))
    assert [(r.k, r.method, r.level, r.algorithm) for r in rows] == [
        (1, "record", "user", "uldp-group"),
        (4, "rdp", "user", "uldp-group"),
        (4, "normal", "user", "uldp-group"),
    ]


def test_a_bare_mechanism_is_account():
    mechanism = SubsampledGaussian(5, 0.01, 1000)
    plan = Plan("mechanism", mechanism, None)
    assert account_plan(plan, delta=DELTA, ks=(1, 2), methods=("rdp", "normal")) == account(
        mechanism, delta=DELTA, ks=(1, 2), methods=("rdp", "normal")
    )
