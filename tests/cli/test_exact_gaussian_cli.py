"""Plain-Gaussian views are printed exactly (issue 32, items 10 and 12), end to end.

`uldp dropout` at --silo-q 1 and `uldp personalize`'s capped tier (q = 1): each figure is compared
with an independent computation of the Gaussian mechanism's exact curve (Balle & Wang 2018,
Thm. 8, solved here with scipy's brentq). `uldp train --algo dp-fedavg-robust` at --silo-q 1 is
checked in tests/cli/test_train_dropout.py (the same runs it already trains).
"""

from __future__ import annotations

import math

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from tests.cli.invoke import command_runner

dropout, dropout_json = command_runner("dropout")
personalize, personalize_json = command_runner("personalize")

DELTA = 1e-5


def _exact(mu: float, delta: float = DELTA) -> float:
    def excess(eps: float) -> float:
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - delta

    return brentq(excess, 0.0, 200.0, xtol=1e-12)


def test_uldp_dropout_at_q_1_prints_the_exact_epsilon_and_keeps_rdp_as_the_cross_check():
    """The audit's case: 6 rounds at sigma 2 printed 5.979 (RDP) where the exact value is 5.545."""
    args = ("--sigma", "2", "--silo-q", "1", "--dropout", "0", "--rounds", "6", "--no-paper")
    document = dropout_json(*args)
    exact = _exact(math.sqrt(6) / 2)
    for entry in document["results"]:
        assert entry["epsilon"] == pytest.approx(exact, abs=1e-6)
        assert entry["epsilon"] >= exact  # rounded up, never below
        assert entry["accountant_epsilon"] == pytest.approx(5.9785, abs=1e-3)
        server = _exact(math.sqrt(6) / entry["server_multiplier"])
        assert entry["server_epsilon"] == pytest.approx(server, abs=1e-6)
        assert entry["server_epsilon"] < entry["server_accountant_epsilon"]
    assert "Balle & Wang 2018" in document["assumptions"]["exact"]
    table = dropout(*args)
    assert table.exit_code == 0, table.output
    assert "5.545" in table.output and "5.979" not in table.output
    assert "Balle & Wang 2018" in table.output


def test_personalize_calibrates_the_capped_tier_on_the_exact_curve():
    """ThreeLevels (largest budget 5), T 50, tau 10: sigma 19.95, not 21.34 (integer RDP orders)."""
    document = personalize_json(
        *("--distribution", "three-levels", "--records", "1000", "--calibrate-sigma"),
        *("--local-steps", "10", "--rounds", "50"),
    )
    sigma, capped = document["sigma"], document["feasible"]["epsilon_max"]
    assert sigma == pytest.approx(19.95)
    assert capped == pytest.approx(_exact(math.sqrt(500) / sigma), abs=1e-6)
    assert capped <= 5.0
