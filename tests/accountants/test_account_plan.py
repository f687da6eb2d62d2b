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
        (1, "record", "record", "uldp-group"),
        (4, "rdp", "user", "uldp-group"),
        (4, "normal", "user", "uldp-group"),
    ]


def test_a_group_plans_user_level_is_its_group_k_even_when_ks_leave_it_out():
    # Issue 34: ks = (2,) used to give only k = 2 rows tagged "user", though a user keeps 4 records.
    plan = PLANS[3]
    rows = account_plan(plan, delta=DELTA, ks=(2,), methods=("rdp",))
    assert [(r.k, r.level) for r in rows] == [(2, "group"), (4, "user")]
    assert rows[1].epsilon == group_level(plan.mechanism, DELTA, 4, "rdp").epsilon > rows[0].epsilon
    # A user who keeps one record is that record: k = 1 is then the user level.
    assert [(r.k, r.level) for r in account_plan(PLANS[4], delta=DELTA, ks=(1,))] == [(1, "user")]


def test_a_bare_mechanism_is_account():
    mechanism = SubsampledGaussian(5, 0.01, 1000)
    plan = Plan("mechanism", mechanism, None)
    assert account_plan(plan, delta=DELTA, ks=(1, 2), methods=("rdp", "normal")) == account(
        mechanism, delta=DELTA, ks=(1, 2), methods=("rdp", "normal")
    )


def test_dp_sgd_steps_count_exactly_from_the_batch_and_silo_size():
    from fractions import Fraction

    from uldp.accountants.plan import dp_sgd_fraction, dp_sgd_rate, dp_sgd_steps

    # A tolerance of 1e-9 undercounted here: ceil(1 / (2e9 / (2e9 + 1))) is 2.
    assert dp_sgd_steps(1, dp_sgd_fraction(2 * 10**9, 2 * 10**9 + 1)) == 2
    # ... and the float ratio overcounts where the ratio is whole: 1 / float(1/3) > 3.
    assert dp_sgd_steps(1, dp_sgd_fraction(1, 3)) == 3 and dp_sgd_steps(2, dp_sgd_fraction(10, 100)) == 20
    assert dp_sgd_steps(3, 0.1) == 30  # a typed rate is the decimal it prints as
    assert dp_sgd_fraction(7, 5) == 1 and isinstance(dp_sgd_fraction(7, 5), Fraction)
    for batch, size in ((1, 3), (256, 60000), (2 * 10**9, 2 * 10**9 + 1), (7, 5)):
        assert float(dp_sgd_fraction(batch, size)) == dp_sgd_rate(batch, size)
