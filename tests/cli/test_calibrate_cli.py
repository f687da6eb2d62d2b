"""`uldp calibrate` end to end: the answer is re-accounted and meets the budget."""

import json

import pytest
from click.testing import CliRunner

from uldp.accountants.account import group_level, record_level
from uldp.accountants.events import SubsampledGaussian
from uldp.cli.main import cli


def run_json(*args):
    result = CliRunner().invoke(cli, ["calibrate", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_solve_for_sigma_round_trip():
    doc = run_json("--epsilon", "3", "--q", "0.01", "--steps", "100000")
    assert {"sigma", "q", "steps", "epsilon", "delta"} <= doc.keys()
    assert doc["solved_for"] == "sigma" and doc["meets_budget"] is True
    again = record_level(SubsampledGaussian(doc["sigma"], 0.01, 100000), 1e-5).epsilon
    assert again == doc["epsilon"] <= 3
    assert record_level(SubsampledGaussian(doc["sigma"] * 0.998, 0.01, 100000), 1e-5).epsilon > 3


def test_solve_for_steps_round_trip():
    doc = run_json("--epsilon", "3", "--q", "0.01", "--sigma", "5")
    steps = doc["steps"]
    assert record_level(SubsampledGaussian(5, 0.01, steps), 1e-5).epsilon <= 3
    assert record_level(SubsampledGaussian(5, 0.01, steps + 1), 1e-5).epsilon > 3


def test_group_budget():
    doc = run_json(
        "--epsilon", "10", "--q", "0.01", "--steps", "1000", "--k", "4", "--group-method", "normal"
    )
    assert group_level(SubsampledGaussian(doc["sigma"], 0.01, 1000), 1e-5, 4, "normal").epsilon <= 10


def test_algorithm_rounds():
    doc = run_json("--epsilon", "2", "--algo", "uldp-avg", "--user-q", "0.5", "--sigma", "5")
    assert doc["solved_for"] == "rounds" and doc["rounds"] == doc["steps"] > 0
    assert record_level(SubsampledGaussian(5, 0.5, doc["rounds"]), 1e-5).epsilon <= 2


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--epsilon", "1e-4", "--q", "1", "--steps", "1000000"], "no noise multiplier"),
        (["--epsilon", "0.01", "--q", "1", "--sigma", "0.3"], "even one step"),
        (["--epsilon", "1", "--q", "0.1", "--steps", "10", "--sigma", "2"], "exactly one of"),
        (["--epsilon", "-1", "--q", "0.1", "--steps", "10"], "--epsilon"),
    ],
)
def test_impossible_or_bad_requests(args, needle):
    result = CliRunner().invoke(cli, ["calibrate", *args])
    assert result.exit_code == 2 and needle in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def test_a_tight_accountant_is_calibrated_even_where_rdp_finds_no_step():
    # One step spends 4.729 by RDP but 4.378 by PLD: the RDP starting hint must not stop it.
    from click.testing import CliRunner

    from uldp.cli.main import cli

    result = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--epsilon",
            "4.5",
            "--q",
            "1",
            "--sigma",
            "1",
            "--accountant",
            "pld",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["steps"] == 1 and doc["epsilon"] <= 4.5 and doc["accountant"] == "pld"


def test_sigma_is_the_smallest_at_the_printed_precision():
    # Issue 11 point 10: the documented command used to return 4.781 where 4.780 meets the budget.
    doc = run_json("--epsilon", "3", "--q", "0.01", "--steps", "100000")
    assert doc["sigma"] == 4.78 and doc["epsilon"] <= 3
    assert record_level(SubsampledGaussian(4.779, 0.01, 100000), 1e-5).epsilon > 3
