"""A budget sigma was calibrated to spend at q_cap is met there, not outside the range (issue 34, item 8)."""

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from uldp.accountants.personalized.record_rates import CAPPED, OK, SPENT_EXACTLY, personalize
from uldp.accountants.personalized.record_spend import EpsilonCurve, RecordSampledFL
from uldp.cli.main import cli
from uldp.errors import InvalidParameter

CURVE = EpsilonCurve(RecordSampledFL(5.0, 10, 50), 1e-5)


def test_the_calibrated_budget_is_spent_exactly_and_a_larger_one_is_still_capped():
    top = float(CURVE(1.0)[0])
    calibrated = top * 1.0004  # what rounding sigma up to 4 significant digits leaves
    budgets = np.array([top / 2, calibrated, 2 * top])
    result = personalize(budgets, CURVE, cap_budget=calibrated)
    assert result.status.tolist() == [OK, SPENT_EXACTLY, CAPPED]
    assert result.q[1] == result.q[2] == 1.0 and result.spent[1] == top
    assert np.all(result.spent <= budgets)  # no bound loosened
    assert result.outside is not None and (result.outside.high, result.outside.high_range) == (
        1,
        (2 * top, 2 * top),
    )
    assert result.summary()["in_range"] == 2
    # Without the calibration's word the same budget is above the range, as before.
    assert personalize(budgets, CURVE).status.tolist() == [OK, CAPPED, CAPPED]


def test_a_cap_budget_below_what_q_cap_spends_is_refused():
    with pytest.raises(InvalidParameter, match="cap budget"):
        personalize(np.array([1.0]), CURVE, cap_budget=float(CURVE(1.0)[0]) / 2)


def test_a_cap_budget_well_above_what_q_cap_spends_is_refused():
    top = float(CURVE(1.0)[0])
    # Within sigma's rounding: accepted.
    within = personalize(np.array([top * 1.005]), CURVE, cap_budget=top * 1.005)
    assert within.status.tolist() == [SPENT_EXACTLY]
    # A budget q_cap leaves a third unspent was never what sigma was calibrated to spend.
    with pytest.raises(InvalidParameter, match="above epsilon"):
        personalize(np.array([top * 1.5]), CURVE, cap_budget=top * 1.5)


def test_a_calibration_stopped_at_the_end_of_its_sigma_range_leaves_the_largest_budget_capped(
    tmp_path: Path,
) -> None:
    # One round of one step: even the smallest sigma searched (0.05) spends 284 < 1e5 at q_cap.
    budgets = tmp_path / "budgets.csv"
    budgets.write_text("id,epsilon\n1,0.5\n2,100000\n")
    args = ["personalize", "--epsilon-csv", str(budgets), "--calibrate-sigma", "--local-steps", "1"]
    result = CliRunner().invoke(cli, [*args, "--rounds", "1", "--format", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    top = document["budgets"][-1]
    assert (top["budget"], top["status"]) == (100000.0, "capped") and top["spent"] < 300
    assert "spent exactly" not in document["assumptions"]["sigma"]
    assert "unspent (capped)" in document["assumptions"]["sigma"]
