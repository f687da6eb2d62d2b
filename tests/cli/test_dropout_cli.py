"""`uldp dropout` end to end: the JSON contract, Table 2, the table, CSV, config and bad input."""

from pathlib import Path

import pytest

from uldp.accountants.dropout.accounting import dropout_epsilon, server_epsilon, server_max_rounds
from uldp.accountants.dropout.rounds import rate_only_round, weighted_round

from .invoke import command_runner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASE = ["--sigma", "1", "--silo-q", "0.01"]


run, run_json = command_runner("dropout")


def test_json_contract_and_library_agreement():
    doc = run_json(*BASE, "--dropout", "0,0.3", "--rounds", "10,1000", "--epsilon", "4")
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
    rounds = {
        (e["dropout"], e["budget"]): e["paper_max_rounds"] for e in doc["max_rounds"] if not e["calibrated"]
    }
    assert rounds[(0.0, 2.0)] == 429 and rounds[(0.3, 2.0)] == 3 and rounds[(0.1, 8.0)] == 9520
    ours = {(e["dropout"], e["rounds"]): e["epsilon"] for e in doc["results"] if not e["calibrated"]}
    assert all(ours[key] < paper[key] for key in ours)  # the default accounting is tighter
    assert "classic" in doc["assumptions"]["accounting (paper)"]


def test_calibration_variance_and_n0():
    doc = run_json(
        *BASE,
        "--dropout",
        "0.1",
        "--rounds",
        "10",
        "--silos-per-round",
        "50",
        "--clip",
        "0.5",
        "--min-weight-sum",
        "40",
    )
    [cal] = doc["calibration"]
    assert cal["calibration_variance"] == pytest.approx(4 * 0.25 / 45)
    assert cal["share_variance"] == pytest.approx(4 * 0.25 / 40) and cal["variance_ratio"] == pytest.approx(
        40 / 45
    )
    uncal = next(e for e in doc["results"] if not e["calibrated"])
    assert uncal["multiplier"] == pytest.approx((45 / 40) ** 0.5)  # Algorithm 3: z sqrt(n'/n_0)


def test_weighted_participants_lose_the_heaviest():
    doc = run_json(
        *BASE, "--dropout", "0.25", "--rounds", "10", "--examples", "100,200,400,400", "--n-max", "400"
    )
    uncal = next(e for e in doc["results"] if not e["calibrated"])
    assert uncal["multiplier"] == pytest.approx(
        (1.75 / 2.75) ** 0.5
    )  # a weight-1 one drops: 0.25 + 0.5 + 1 left


def test_table_and_csv():
    result = run(*BASE, "--dropout", "0,0.1", "--rounds", "100", "--epsilon", "2")
    assert result.exit_code == 0, result.output
    for text in (
        "epsilon after T rounds",
        "most rounds within budget",
        "paper",
        "Assumptions",
        "server view",
        "none, server",
        "yes, server",
    ):
        assert text in result.output
    result = run(*BASE, "--dropout", "0.1", "--rounds", "100", "--format", "csv", "--no-paper")
    lines = result.output.strip().splitlines()
    assert lines[0] == "kind,dropout,calibrated,view,accounting,multiplier,rounds,epsilon,budget,max_rounds"
    assert len(lines) == 1 + 4  # (uncalibrated, calibrated) x (released model, server view)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--dropout", "1", "--rounds", "10"], "--dropout"),
        (["--dropout", "-0.1", "--rounds", "10"], "--dropout"),
        (["--dropout", "0.1"], "--rounds"),
        (
            ["--dropout", "0.1", "--rounds", "10", "--silos-per-round", "50", "--min-weight-sum", "60"],
            "--min-weight-sum",
        ),
        (["--dropout", "0.1", "--rounds", "10", "--min-weight-sum", "6"], "--min-weight-sum"),
        (["--dropout", "0.1", "--rounds", "10", "--examples", "10,20"], "--n-max"),
        (["--dropout", "0.9", "--rounds", "10", "--silos-per-round", "3"], "no participant"),
        (["--dropout", "0.1", "--rounds", "0"], "--rounds"),
        (
            ["--dropout", "0.1", "--rounds", "10", "--silos-per-round", "50", "--colluding", "45"],
            "--colluding",
        ),
        (["--dropout", "0.1", "--rounds", "10", "--colluding", "3"], "--colluding"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle):
    result = run(*BASE, *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("Error:") and needle in lines[-1]
    assert "Traceback" not in result.output


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_server_view_is_not_amplified_by_sampling(accountant):
    """The reviewer's repro: the server draws the sample, so its figures are the known-participation
    ones (accounted by the library's server_epsilon), far above the released model's."""
    doc = run_json(
        *BASE,
        "--dropout",
        "0,0.1",
        "--silos-per-round",
        "50",
        "--rounds",
        "100,1000",
        "--no-paper",
        "--accountant",
        accountant,
    )
    for e in doc["results"]:
        assert e["server_epsilon"] == pytest.approx(
            server_epsilon(e["server_multiplier"], 0.01, e["rounds"], 1e-5, accountant=accountant), rel=1e-12
        )
        assert e["server_epsilon"] > 3 * e["epsilon"]
    text = doc["assumptions"]["server view (server rows)"]
    assert "Bin(T, q)" in text and "line 11" in text
    assert ("ln(1 - q + q e^" in text) == (accountant == "rdp")
    assert "outsiders" in doc["assumptions"]["released model (model rows)"]


def test_assumptions_name_rate_only_mode_calibration_dropouts_and_coalitions():
    rates = run_json(*BASE, "--dropout", "0.1", "--rounds", "10", "--no-paper")["assumptions"]
    assert "n'/n = 1 - dropout exactly" in rates["participants"] and "6/7" in rates["participants"]
    assert "no dropouts during the calibration step" in rates["dropouts"]
    assert "z sqrt((n'-k)/n')" in rates["colluding participants"]
    assert "outsiders" in rates["calibrated, released model"]
    given = run_json(*BASE, "--dropout", "0.1", "--rounds", "10", "--no-paper", "--silos-per-round", "7")
    assert given["assumptions"]["participants"].startswith("7 sampled per round")
    assert given["calibration"][0]["alive_fraction"] == pytest.approx(6 / 7)


def test_colluding_survivors_get_their_own_rows():
    """--colluding K: survivors of weight K subtract their own shares (z sqrt((n'-K)/n') calibrated)
    and, knowing U^t in Algorithm 3, get no sampling amplification."""
    doc = run_json(
        *BASE,
        "--dropout",
        "0.1",
        "--silos-per-round",
        "50",
        "--rounds",
        "100",
        "--epsilon",
        "8",
        "--colluding",
        "10",
        "--no-paper",
    )
    rd = weighted_round([1.0] * 50, 0.1)
    for e in doc["results"] + doc["max_rounds"]:
        assert e["coalition_multiplier"] == pytest.approx(rd.coalition_multiplier(1.0, 10, e["calibrated"]))
    calibrated = next(e for e in doc["results"] if e["calibrated"])
    assert calibrated["coalition_multiplier"] == pytest.approx((35 / 45) ** 0.5)
    assert calibrated["coalition_epsilon"] == pytest.approx(
        server_epsilon(calibrated["coalition_multiplier"], 0.01, 100, 1e-5), rel=1e-12
    )
    assert calibrated["coalition_epsilon"] > 3 * calibrated["epsilon"]
    for e in doc["max_rounds"]:
        assert e["coalition_max_rounds"] == server_max_rounds(e["coalition_multiplier"], 0.01, 8.0, 1e-5)
    assert "coalition rows: k = 10" in doc["assumptions"]["colluding participants"]
    csv = (
        run(
            *BASE,
            "--dropout",
            "0.1",
            "--silos-per-round",
            "50",
            "--rounds",
            "100",
            "--colluding",
            "10",
            "--no-paper",
            "--format",
            "csv",
        )
        .output.strip()
        .splitlines()
    )
    assert len(csv) == 1 + 2 * 3 and sum(",coalition," in line for line in csv) == 2
    table = run(*BASE, "--dropout", "0.1", "--silos-per-round", "50", "--rounds", "100", "--colluding", "10")
    assert "yes, coalition" in table.output and "none, coalition" in table.output
    assert "coalition" not in run(*BASE, "--dropout", "0.1", "--rounds", "100").output.split("Assumptions")[0]


def _assumptions_block(output: str) -> list[str]:
    return output.split("Assumptions\n")[1].split("Notes\n")[0].splitlines()


def test_table_leads_with_what_matters_and_verbose_prints_every_assumption():
    """The default block is about a dozen lines (issue 34: it was ~55); --verbose prints every
    line and JSON always has them all (what the brief lines say: test_dropout_brief.py)."""
    args = [*BASE, "--dropout", "0,0.1", "--silos-per-round", "50", "--rounds", "10,100"]
    brief = _assumptions_block(run(*args).output)
    verbose = _assumptions_block(run(*args, "--verbose").output)
    every = run_json(*args)["assumptions"]
    labels = [line.split(":")[0].strip() for line in brief if not line.startswith("    ")]
    assert labels == [
        "delta",
        "accounting",
        "neighbouring",
        "dropouts",
        "epsilon",
        "colluding",
        "calibration",
        "participants",
        "more",
    ]
    assert len(brief) <= 16 and 2 * len(brief) < len(verbose)
    assert "--verbose" in " ".join(brief)
    for label in every:
        assert any(line.startswith(f"  {label}: ") for line in verbose), label
    assert every["participants"].startswith("50 sampled per round") and "neighbouring" in every
