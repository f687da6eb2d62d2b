"""`uldp subject` end to end: the JSON contract, holdings CSV, LocalGroupDP, config and bad input."""
from pathlib import Path

import pytest

from accountants.horizontal import FederationRun, group_noise, subject_guarantee

from .invoke import command_runner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASE = ["--members", "16", "--per-round", "4", "--rounds", "50", "--local-steps", "10", "--q", "0.01",
        "--sigma", "1"]
RUN = FederationRun(16, 4, 50, 10, 0.01, 1.0)


run, run_json = command_runner("subject")


def test_json_contract_worst_case():
    doc = run_json(*BASE, "--epsilon", "4", "--group-sizes", "1,3")
    expected = subject_guarantee(RUN, [1] * 16, 1e-5)
    assert doc["local_epsilon"] == pytest.approx(expected.local_epsilon, rel=1e-12)
    assert doc["federation_epsilon"] == pytest.approx(expected.federation_epsilon, rel=1e-12)
    assert doc["members_holding"] == 16 and doc["members_composed"] == 4
    assert [g["z"] for g in doc["group_noise"]] == [1, 3]
    assert doc["group_noise"][1]["sigma"] == group_noise(3, 4.0, 1e-5, 0.01, 500).sigma
    assert doc["rule_of_thumb"]["rounds"] == 25 and doc["max_rounds"]["budget"] == 4
    assert doc["max_rounds"]["federation"] < doc["max_rounds"]["local"]


def test_fewer_holders_and_distributions():
    one = run_json(*BASE, "--subject-members", "1")
    assert one["federation_epsilon"] == pytest.approx(one["local_epsilon"])
    spread = run_json(*BASE, "--subject-items", "32", "--distribution", "power", "--alpha", "4")
    assert sum(spread["holding"]) == 32 and spread["holding"][0] > 2
    assert "power, alpha = 4" in spread["assumptions"]["holdings"]


def test_holdings_csv_per_subject(tmp_path):
    path = tmp_path / "items.csv"
    path.write_text("subject,member\nalice,shop1\nalice,shop2\nalice,shop2\nbob,shop1\n")
    doc = run_json(*BASE, "--holdings", str(path))
    subjects = {s["subject"]: s for s in doc["subjects"]}
    assert subjects["alice"]["members"] == 2 and subjects["alice"]["max_items"] == 2
    assert subjects["bob"]["federation_epsilon"] == pytest.approx(subjects["bob"]["local_epsilon"])
    assert doc["worst_subject"] == "alice"
    assert doc["federation_epsilon"] == subjects["alice"]["federation_epsilon"]
    result = run(*BASE, "--holdings", str(path), "--format", "csv")
    assert result.output.splitlines()[0] == "subject,members,max_items,local_epsilon,federation_epsilon"


def test_table_and_config():
    result = run("--config", str(EXAMPLES / "subject-femnist.yaml"))
    assert result.exit_code == 0, result.output
    for text in ("uldp subject", "sigma_Z", "LocalGroupDP", "Assumptions", "Corollary 3.5", "R/sqrt(s)"):
        assert text in result.output


@pytest.mark.parametrize("args, needle", [
    (["--per-round", "17"], "--per-round"),
    (["--group-sizes", "2"], "--epsilon"),
    (["--subject-members", "20"], "--subject-members"),
    (["--q", "0"], "--q"),
    (["--alpha", "2"], "--subject-items"),
    (["--subject-items", "5", "--distribution", "power"], "--alpha"),
    (["--subject-items", "5", "--alpha", "2"], "--alpha"),
    (["--subject-items", "5", "--items-per-member", "2"], "--items-per-member"),
])
def test_bad_input_is_one_line_exit_2(args, needle):
    result = run(*BASE, *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("Error:") and needle in lines[-1]
    assert "Traceback" not in result.output


def test_holdings_with_too_many_members(tmp_path):
    path = tmp_path / "items.csv"
    path.write_text("".join(f"s,m{i}\n" for i in range(20)))
    result = run(*BASE, "--holdings", str(path))
    assert result.exit_code == 2 and "--holdings" in result.output
