"""`uldp dropout` end to end: the JSON contract, Table 2, the table, CSV, config and bad input."""
from pathlib import Path

import pytest

from accountants.dropout import dropout_epsilon, rate_only_round

from .invoke import command_runner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASE = ["--z", "1", "--q", "0.01"]


run, run_json = command_runner("dropout")


def test_json_contract_and_library_agreement():
    doc = run_json(*BASE, "--dropout", "0,0.3", "--rounds", "10,1000", "--budget", "4")
    assert len(doc["results"]) == 2 * 2 * 2 and len(doc["max_rounds"]) == 2 * 2
    for entry in doc["results"]:
        assert {"dropout", "rounds", "calibrated", "epsilon"} <= entry.keys()
        assert isinstance(entry["calibrated"], bool)
        m = rate_only_round(entry["dropout"]).uncalibrated_multiplier(1.0) if not entry["calibrated"] else 1.0
        assert entry["epsilon"] == pytest.approx(dropout_epsilon(m, 0.01, entry["rounds"], 1e-5), rel=1e-12)
    for entry in doc["max_rounds"]:
        assert {"dropout", "budget", "calibrated", "max_rounds"} <= entry.keys()
    by = {(e["dropout"], e["calibrated"]): e["max_rounds"] for e in doc["max_rounds"]}
    assert by[(0.3, False)] < by[(0.3, True)] == by[(0.0, False)] == by[(0.0, True)]
    assert doc["assumptions"]["bound"].startswith("every epsilon is an upper bound")


def test_reproduces_table2_through_the_config_example():
    doc = run_json("--config", str(EXAMPLES / "dropout-table2.yaml"))
    paper = {(e["dropout"], e["rounds"]): e["paper_epsilon"] for e in doc["results"] if not e["calibrated"]}
    assert paper[(0.1, 100)] == pytest.approx(1.822, abs=1e-3)
    assert paper[(0.3, 100000)] == pytest.approx(42.623, abs=1e-3)
    rounds = {(e["dropout"], e["budget"]): e["paper_max_rounds"] for e in doc["max_rounds"] if not e["calibrated"]}
    assert rounds[(0.0, 2.0)] == 429 and rounds[(0.3, 2.0)] == 3 and rounds[(0.1, 8.0)] == 9520
    ours = {(e["dropout"], e["rounds"]): e["epsilon"] for e in doc["results"] if not e["calibrated"]}
    assert all(ours[key] < paper[key] for key in ours)  # the default accounting is tighter
    assert "classic" in doc["assumptions"]["accounting (paper)"]


def test_calibration_variance_and_n0():
    doc = run_json(*BASE, "--dropout", "0.1", "--rounds", "10", "--participants", "50", "--clip", "0.5",
                   "--min-weight-sum", "40")
    [cal] = doc["calibration"]
    assert cal["calibration_variance"] == pytest.approx(4 * 0.25 / 45)
    assert cal["share_variance"] == pytest.approx(4 * 0.25 / 40) and cal["variance_ratio"] == pytest.approx(40 / 45)
    uncal = next(e for e in doc["results"] if not e["calibrated"])
    assert uncal["multiplier"] == pytest.approx((45 / 40) ** 0.5)  # Algorithm 3: z sqrt(n'/n_0)


def test_weighted_participants_lose_the_heaviest():
    doc = run_json(*BASE, "--dropout", "0.25", "--rounds", "10", "--examples", "100,200,400,400", "--n-max", "400")
    uncal = next(e for e in doc["results"] if not e["calibrated"])
    assert uncal["multiplier"] == pytest.approx((1.75 / 2.75) ** 0.5)  # a weight-1 one drops: 0.25 + 0.5 + 1 left


def test_table_and_csv():
    result = run(*BASE, "--dropout", "0,0.1", "--rounds", "100", "--budget", "2")
    assert result.exit_code == 0, result.output
    for text in ("epsilon after T rounds", "most rounds within budget", "paper", "Assumptions", "server view"):
        assert text in result.output
    result = run(*BASE, "--dropout", "0.1", "--rounds", "100", "--format", "csv", "--no-paper")
    lines = result.output.strip().splitlines()
    assert lines[0] == "kind,dropout,calibrated,view,accounting,multiplier,rounds,epsilon,budget,max_rounds"
    assert len(lines) == 1 + 3  # uncalibrated, calibrated model view, calibrated server view


@pytest.mark.parametrize("args, needle", [
    (["--dropout", "1", "--rounds", "10"], "--dropout"),
    (["--dropout", "-0.1", "--rounds", "10"], "--dropout"),
    (["--dropout", "0.1"], "--rounds"),
    (["--dropout", "0.1", "--rounds", "10", "--participants", "50", "--min-weight-sum", "60"], "--min-weight-sum"),
    (["--dropout", "0.1", "--rounds", "10", "--min-weight-sum", "6"], "--min-weight-sum"),
    (["--dropout", "0.1", "--rounds", "10", "--examples", "10,20"], "--n-max"),
    (["--dropout", "0.9", "--rounds", "10", "--participants", "3"], "no participant"),
    (["--dropout", "0.1", "--rounds", "0"], "--rounds"),
])
def test_bad_input_is_one_line_exit_2(args, needle):
    result = run(*BASE, *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("Error:") and needle in lines[-1]
    assert "Traceback" not in result.output
