"""Assumptions: built by the library with the number, rendered as labelled lines."""

from uldp.accountants.assumptions import accounting_assumptions
from uldp.trainers.algorithms import plan_algorithm


def test_rdp_lines_come_with_conversion_and_orders():
    plan = plan_algorithm("uldp-avg", sigma=5, rounds=10, silos=2)
    lines = accounting_assumptions(
        [plan], delta=1e-5, accountants=["rdp", "pld"], conversion="classic", orders="tf-privacy"
    ).as_dict()
    assert list(lines)[:5] == ["delta", "accountant", "conversion", "orders", "bound"]
    assert lines["delta"] == "1e-05"
    assert lines["accountant"] == "RDP (Mironov et al. 2019, log-space); PLD (dp-accounting, pessimistic)"
    assert lines["conversion"] == "classic, eps = rho + log(1/delta)/(alpha-1)"
    assert lines["orders"] == "tf-privacy (151 orders, 1.1..63)"
    assert {key: lines[key] for key in plan.assumptions} == plan.assumptions


def test_tight_accountants_alone_have_no_rdp_lines_and_several_plans_are_prefixed():
    plans = [plan_algorithm("uldp-avg", sigma=5, rounds=10), plan_algorithm("uldp-naive", sigma=5, rounds=10)]
    lines = accounting_assumptions(
        plans,
        delta=1e-5,
        accountants=["prv"],
        conversion="improved",
        orders="default",
        extra=[("group", "k = 2")],
    ).as_dict()
    assert "conversion" not in lines and "orders" not in lines
    assert lines["uldp-avg: algorithm"].startswith("uldp-avg")
    assert lines["uldp-naive: algorithm"].startswith("uldp-naive")
    assert list(lines)[-1] == "group"
