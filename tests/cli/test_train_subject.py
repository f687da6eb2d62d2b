"""`uldp train` with the subject-level algorithms (issue 16) as a user runs it: the epsilons it
prints are `uldp subject --holdings`'s for the data's holdings, its table and JSON, the power
allocation, a subject column of one's own table, and its refusals (one line, exit status 2)."""

from __future__ import annotations

import re
import shlex

import numpy as np
import pytest

from tests.cli.invoke import command_runner
from uldp.trainers.data import load_dataset
from uldp.trainers.subject_accounting import cap_items, holdings_rows

train, train_json = command_runner("train")
subject, subject_json = command_runner("subject")

DATA = ("--dataset", "mnist", "--users", "30", "--silos", "4", "--model", "logistic")
RUN = ("--rounds", "2", "--local-steps", "2", "--batch-size", "16", "--noise-seed", "3")


def _holdings_file(tmp_path, data) -> str:
    path = tmp_path / "holdings.csv"
    path.write_text("subject,member\n" + "".join(f"{s},{m}\n" for s, m in holdings_rows(data)))
    return str(path)


def _check_command(document: dict, holdings: str) -> list[str]:
    """The `uldp subject` command the run's assumptions name, with the holdings file filled in."""
    command = re.search(r"`(uldp subject [^`]*)`", document["assumptions"]["check"]).group(1)
    return shlex.split(command.replace("HOLDINGS.csv", holdings))[2:]


@pytest.mark.parametrize("algo", ["higradavgdp", "userldp", "localgroupdp", "localitemdp"])
def test_training_prints_what_uldp_subject_plans_for_the_same_holdings(tmp_path, algo):
    document = train_json("--algo", algo, *DATA, *RUN, "--epsilon", "3")
    last = document["history"][-1]
    summary = document["summary"]
    assert summary["level"] == "subject" and summary["epsilon_target"] == 3
    assert last["epsilon"] <= 3
    data = load_dataset("mnist", users=30, silos=4, seed=0)
    if algo == "localgroupdp":
        data = cap_items(data, summary["group_size"], 0)
    planned = subject_json(*_check_command(document, _holdings_file(tmp_path, data)))
    assert planned["algo"] == algo
    assert planned["local_epsilon"] == pytest.approx(last["subject_epsilon_member"], rel=1e-9)
    assert planned["federation_epsilon"] == pytest.approx(last["subject_epsilon_federation"], rel=1e-9)
    if algo == "userldp":
        assert planned["user_ldp_epsilon"] == pytest.approx(last["user_ldp_epsilon"], rel=1e-9)
    if algo == "localitemdp":
        assert last["epsilon"] == last["item_epsilon"] < last["subject_epsilon_federation"]
    else:
        assert last["epsilon"] == last["subject_epsilon_federation"]


def test_the_table_shows_both_guarantees_and_the_batches(tmp_path):
    result = train("--algo", "localgroupdp", *DATA, *RUN, "--epsilon", "3")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for heading in ("(member)", "(federation)", "eps item"):  # the headings wrap in 80 columns
        assert heading in text
    assert "largest subject group per mini-batch (Z, Fig. 1(c))" in text
    assert "distinct subjects per mini-batch (Fig. 1(d))" in text
    assert "Corollary 3.5" in text and "calibrated so that the worst subject's federation-wide" in text


def test_power_allocation_concentrates_subjects_and_raises_the_group_size():
    def mean_z(alpha: str) -> float:
        document = train_json(
            "--algo", "higradavgdp", *DATA, *RUN, "--sigma", "2", "--allocation", "power", "--alpha", alpha
        )
        z = {int(k): v for k, v in document["summary"]["batch_z"].items()}
        return sum(k * v for k, v in z.items()) / sum(z.values())

    assert mean_z("16") > mean_z("1")


def test_own_table_with_a_subject_column(tmp_path):
    rng = np.random.default_rng(0)
    rows = ["patient,hospital,x1,x2,y"]
    for i in range(120):
        x1, x2 = rng.normal(size=2)
        rows.append(f"p{i % 15},h{i % 3},{x1:.4f},{x2:.4f},{int(x1 + x2 > 0)}")
    path = tmp_path / "own.csv"
    path.write_text("\n".join(rows) + "\n")
    document = train_json(
        "--algo", "higradavgdp", "--data-path", str(path), "--subject-column", "patient",
        "--silo-column", "hospital", "--label-column", "y", "--rounds", "1", "--local-steps", "2",
        "--sigma", "2", "--noise-seed", "1",
    )  # fmt: skip
    assert document["summary"]["subjects"] == 15 and document["summary"]["silos"] == 3


def test_a_table_without_its_subject_column_is_refused(tmp_path):
    path = tmp_path / "own.csv"
    path.write_text("patient,x,y\np1,0.5,1\np2,-0.5,0\n")
    result = train("--algo", "higradavgdp", "--data-path", str(path), "--label-column", "y", "--sigma", "1")
    assert result.exit_code == 2 and "--subject-column" in result.output, result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--algo", "higradavgdp", "--epsilon", "0"), "--epsilon"),
        (("--algo", "higradavgdp", "--epsilon", "2", "--sigma", "1"), "not both"),
        (("--algo", "localgroupdp"), "give --epsilon"),
        (("--algo", "localgroupdp", "--epsilon", "2", "--sigma", "1"), "--sigma"),
        (("--algo", "default", "--epsilon", "2"), "--epsilon does not apply here"),
        (("--algo", "higradavgdp", "--alpha", "2"), "--alpha applies to --allocation power"),
        (("--algo", "higradavgdp", "--allocation", "power"), "--allocation power needs --alpha"),
        (("--algo", "higradavgdp", "--user-q", "0.5"), "--user-q does not apply here"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = train(*args, "--dataset", "mnist", "--users", "20", "--silos", "2", "--rounds", "1")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert message in result.output
    assert "Traceback" not in result.output
    assert sum(1 for line in lines if line.startswith("Error")) == 1


def test_the_command_line_overrides_the_configs_noise(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("epsilon: 3\n")
    document = train_json("--config", str(config), "--algo", "higradavgdp", *DATA, *RUN, "--sigma", "2")
    assert document["summary"]["sigma"] == 2 and document["summary"]["epsilon_target"] is None
