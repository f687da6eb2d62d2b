"""The assumptions of `uldp dropout`, `uldp subject` and `uldp personalize`, built by the library."""

import numpy as np

from uldp.accountants.dropout.assumptions import dropout_assumptions
from uldp.accountants.personalized.record_rates import personalization_assumptions, personalize
from uldp.accountants.personalized.record_spend import EpsilonCurve, RecordSampledFL
from uldp.accountants.subject.assumptions import subject_assumptions
from uldp.accountants.subject.horizontal import FederationRun

RDP = {"accountant": "rdp", "conversion": "improved", "orders": "default"}


def test_dropout_assumptions_in_the_printed_order():
    lines = dropout_assumptions(1.0, 0.01, 1e-5, **RDP, paper=True, participants=50, clip=1.0).as_dict()
    assert list(lines) == [
        "mechanism",
        "neighbouring",
        "released model (model rows)",
        "server view (server rows)",
        "no calibration",
        "calibrated, released model",
        "calibrated, server view",
        "colluding participants",
        "dropouts",
        "delta",
        "accounting (ours)",
        "calibration column",
        "orders",
        "accounting (paper)",
        "participants",
        "n_ref",
        "clip",
        "bound",
    ]
    assert lines["delta"] == "1e-05"
    assert lines["accounting (ours)"] == "rdp, improved conversion, default orders"
    assert lines["participants"] == "50 sampled per round, weight 1 each"
    assert lines["colluding participants"].endswith("give --colluding K for their rows")


def test_dropout_assumptions_without_rdp_or_paper_and_with_a_coalition():
    pld = {**RDP, "accountant": "pld"}
    lines = dropout_assumptions(1.0, 0.01, 1e-5, **pld, examples=3, n_max=100, n0=2.0, coalition=1).as_dict()
    assert "orders" not in lines and "accounting (paper)" not in lines
    assert lines["accounting (ours)"] == "pld"
    assert lines["participants"] == "3 sampled per round, w_i = min(n_i/100, 1)"
    assert lines["n_ref"] == "n_0 = 2 (Algorithm 3)"
    assert lines["colluding participants"].endswith("coalition rows: k = 1")


def test_subject_assumptions_in_the_printed_order():
    run = FederationRun(16, 16, 100, 10, 0.01, 1.0)
    lines = subject_assumptions(run, 1e-5, **RDP, group=True).as_dict()
    assert list(lines) == [
        "run",
        "neighbouring",
        "local guarantee",
        "local mechanism",
        "member selection",
        "federation-wide",
        "rule of thumb",
        "delta",
        "accounting",
        "orders",
        "holdings",
        "LocalGroupDP",
        "bound",
    ]
    assert lines["run"].startswith("N = 16 members, s = 16 per round, R = 100 rounds")
    assert lines["holdings"].startswith("16 member(s) hold 1 item(s) each (default")
    spread = subject_assumptions(
        run, 1e-5, **{**RDP, "accountant": "pld"}, subject_items=40, distribution="power", alpha=2.0
    ).as_dict()
    assert "orders" not in spread and "LocalGroupDP" not in spread
    assert spread["federation-wide"].endswith("(one composed PLD)")
    assert spread["holdings"].startswith("40 items spread over the members (power, alpha = 2,")


def test_personalization_assumptions_in_the_printed_order():
    curve = EpsilonCurve(RecordSampledFL(2.0, 1, 10, 1.0, "untrusted"), 1e-5)
    budgets = np.array([0.5, 1.0, 1.0])
    result = personalize(budgets, curve)
    lines = personalization_assumptions(result, curve, "given", 2.0).as_dict()
    assert list(lines) == ["budgets", *curve.assumptions(), "feasible", "method"]
    assert lines["budgets"] == "given (3 records, 2 distinct, 0.5..1)"
    assert lines["method"].startswith("exact: largest rate on a geometric grid")
    assert "sigma" not in lines
