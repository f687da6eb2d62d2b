"""`uldp train` with personalised budgets (issue 14), run as a user runs it.

rpdp / unidp / default under the same flags, the per-tier table, the JSON and metrics columns,
the q equal to `uldp personalize`'s for the same budgets, the threat models' two epsilons, the
budget sources and every refusal (one line, exit 2).
"""

from __future__ import annotations

import csv

import numpy as np
import pytest

from tests.cli.invoke import command_runner
from uldp.trainers import runner

run, run_json = command_runner("train")
personalize_run, _ = command_runner("personalize")

BASE = ("--dataset", "heart-disease", "--rounds", "2", "--local-steps", "3", "--noise-seed", "1")
HEART_RECORDS = 740  # heart-disease's source records: budgets are drawn for all of them


def _one_error_line(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:"), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def rpdp_json():
    return run_json("--algo", "rpdp", *BASE, "--distribution", "three-levels")


def test_table_shows_each_tier_next_to_its_budget_and_the_budget_check():
    result = run("--algo", "rpdp", *BASE, "--distribution", "three-levels")
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    for budget in ("0.1", "1", "5"):
        assert f"eps b={budget}" in out
    assert "no record exceeded its budget" in out
    assert "threat models: both printed per tier" in out
    assert "budgets: ThreeLevels" in out and "--records 740 --seed 0" in out


def test_json_carries_both_threat_models_per_tier_and_the_check(rpdp_json):
    summary, history = rpdp_json["summary"], rpdp_json["history"]
    assert [t["budget"] for t in summary["tiers"]] == [0.1, 1.0, 5.0]
    assert summary["budget_check"]["over_budget"] == 0
    for row in history:
        for i in (1, 2, 3):
            assert row[f"tier{i}_epsilon_untrusted"] == row[f"tier{i}_epsilon_server"]
            assert row[f"tier{i}_epsilon_untrusted"] <= row[f"tier{i}_budget"]
    assert history[-1]["epsilon"] == max(history[-1][f"tier{i}_epsilon_untrusted"] for i in (1, 2, 3))


@pytest.mark.parametrize("threat_model", ["untrusted", "server"])
def test_q_and_epsilon_equal_uldp_personalize_for_the_same_budgets(rpdp_json, tmp_path, threat_model):
    summary, last = rpdp_json["summary"], rpdp_json["history"][-1]
    out = tmp_path / "q.csv"
    result = personalize_run(
        "--distribution",
        "three-levels",
        "--records",
        str(HEART_RECORDS),
        "--seed",
        "0",
        "--sigma",
        repr(summary["sigma"]),
        "--local-steps",
        "3",
        "--rounds",
        "2",
        "--threat-model",
        threat_model,
        "--out",
        str(out),
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for i, tier in enumerate(summary["tiers"], start=1):
        mine = [r for r in rows if float(r["epsilon"]) == tier["budget"]]
        assert {float(r["q"]) for r in mine} == {tier["q"]}  # the same q for the same budget
        for r in mine:
            assert float(r["epsilon_spent"]) == pytest.approx(
                last[f"tier{i}_epsilon_{threat_model}"], rel=1e-9
            )


def test_a_personalize_file_gives_the_same_run_as_the_scenario(rpdp_json, tmp_path):
    out = tmp_path / "q.csv"
    args = ("--distribution", "three-levels", "--records", str(HEART_RECORDS), "--sigma", "1")
    assert personalize_run(*args, "--local-steps", "3", "--rounds", "2", "--out", str(out)).exit_code == 0
    document = run_json("--algo", "rpdp", *BASE, "--epsilon-csv", str(out))
    assert document["summary"]["tiers"] == rpdp_json["summary"]["tiers"]
    assert document["summary"]["sigma"] == rpdp_json["summary"]["sigma"]
    assert [r["loss"] for r in document["history"]] == [r["loss"] for r in rpdp_json["history"]]


def test_metrics_csv_has_the_tier_columns(tmp_path):
    metrics = tmp_path / "m.csv"
    result = run("--algo", "rpdp", *BASE, "--distribution", "three-levels", "--metrics", str(metrics))
    assert result.exit_code == 0, result.output
    with open(metrics, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2
    assert {"tier1_budget", "tier1_epsilon_untrusted", "tier1_epsilon_server", "tier3_epsilon_server"} <= set(
        rows[0]
    )


@pytest.mark.parametrize("algo", ["unidp", "default"])
def test_the_baselines_run_under_the_same_flags(algo):
    flags = BASE if algo == "unidp" else tuple(a for a in BASE if a not in ("--local-steps", "3"))
    document = run_json("--algo", algo, *flags, "--distribution", "three-levels")
    check = document["summary"]["budget_check"]
    if algo == "unidp":
        assert check["distinct_rates"] == 1 and check["over_budget"] == 0
        spent = [document["history"][-1][f"tier{i}_epsilon_untrusted"] for i in (1, 2, 3)]
        assert spent[0] == spent[1] == spent[2] <= 0.1  # everyone at the smallest budget
    else:
        assert check["view"] is None and check["over_budget"] == check["count"]
        assert document["history"][-1]["tier1_epsilon_untrusted"] is None  # JSON null: unbounded


def test_budget_column_of_your_table_is_not_a_feature(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "t.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["patient", "a", "b", "y", "eps"])
        for i in range(200):
            writer.writerow([i % 40, rng.normal(), rng.normal(), i % 2, [0.5, 2.0][i % 3 == 0]])
    args = ("--data-path", str(path), "--user-column", "patient", "--label-column", "y")
    document = run_json(
        "--algo",
        "rpdp",
        *args,
        "--epsilon-column",
        "eps",
        "--rounds",
        "1",
        "--local-steps",
        "2",
        "--model",
        "logistic",
    )
    assert document["summary"]["parameters"] == 3  # logistic on a, b: eps is not a feature
    assert [t["budget"] for t in document["summary"]["tiers"]] == [0.5, 2.0]
    missing = run("--algo", "rpdp", *args, "--epsilon-column", "nope", "--rounds", "1")
    _one_error_line(missing, "--epsilon-column", "no column 'nope'")


def _write_table(path, budgets):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["patient", "a", "y", "eps"])
        for i, b in enumerate(budgets):
            writer.writerow([i % 10, i * 0.1, i % 2, b])


@pytest.mark.parametrize(
    "bad, needle",
    [
        ("0", "row 4 is 0"),
        ("-1", "row 4 is -1"),
        ("nan", "row 4 is missing"),
        ("", "row 4 is missing"),
        ("x", "not a finite"),
    ],
)
def test_a_bad_budget_in_the_column_is_refused(tmp_path, bad, needle):
    path = tmp_path / "t.csv"
    _write_table(path, ["1"] * 3 + [bad] + ["1"] * 36)
    args = ("--data-path", str(path), "--user-column", "patient", "--label-column", "y")
    _one_error_line(
        run("--algo", "rpdp", *args, "--epsilon-column", "eps", "--rounds", "1"), "--epsilon-column", needle
    )


def test_a_budget_file_missing_records_or_with_a_zero_is_refused(tmp_path):
    short = tmp_path / "short.csv"
    short.write_text("id,epsilon\n" + "".join(f"{i},1\n" for i in range(1, 600)))
    _one_error_line(
        run("--algo", "rpdp", *BASE, "--epsilon-csv", str(short)), "--epsilon-csv", "no budget for"
    )
    zero = tmp_path / "zero.csv"
    zero.write_text("id,epsilon\n" + "".join(f"{i},{0 if i == 7 else 1}\n" for i in range(1, 741)))
    result = run("--algo", "rpdp", *BASE, "--epsilon-csv", str(zero))
    _one_error_line(result, "finite numbers > 0")
    column = tmp_path / "col.csv"
    column.write_text("id,budget\n1,1\n")
    _one_error_line(
        run("--algo", "rpdp", *BASE, "--epsilon-csv", str(column)), "--epsilon-csv", "no column 'epsilon'"
    )


def test_a_budget_below_every_reachable_epsilon_names_the_records(tmp_path):
    tiny = tmp_path / "tiny.csv"
    tiny.write_text("id,epsilon\n" + "".join(f"{i},{1e-9 if i % 100 == 0 else 1}\n" for i in range(1, 741)))
    result = run("--algo", "rpdp", *BASE, "--epsilon-csv", str(tiny), "--sigma", "1", "--local-steps", "500")
    _one_error_line(result, "below the smallest reachable epsilon", "record 100 (1e-09)")


@pytest.mark.parametrize(
    "args, needles",
    [
        (("--algo", "rpdp", *BASE), ("needs each record's budget",)),
        (("--algo", "rpdp", *BASE, "--distribution", "group-3", "--epsilon-csv", __file__), ("one source",)),
        (("--algo", "uldp-avg", *BASE[:2], "--distribution", "group-3"), ("--user-budgets",)),
        (("--algo", "uldp-naive", *BASE[:2], "--distribution", "group-3"), ("rpdp, unidp and default",)),
        (("--algo", "rpdp", *BASE, "--epsilon-column", "eps"), ("your own table",)),
        (("--algo", "rpdp", *BASE, "--distribution", "group-3", "--user-q", "0.5"), ("--user-q",)),
        (("--algo", "uldp-avg", *BASE[:2], "--threat-model", "server"), ("--threat-model",)),
        (("--algo", "uldp-avg", *BASE[:2], "--local-steps", "3"), ("--local-steps",)),
    ],
)
def test_misplaced_budget_options_are_refused_in_one_line(args, needles):
    _one_error_line(run(*args), *needles)


def test_help_lists_the_new_algorithms_and_options():
    text = " ".join(run("--help").stdout.split())
    for needle in ("rpdp", "unidp", "--distribution", "--epsilon-csv", "--epsilon-column", "--user-budgets"):
        assert needle in text


def test_the_issue_spellings_budgets_and_budget_column_work_and_name_the_vocabulary(tmp_path):
    path = tmp_path / "t.csv"
    _write_table(path, [0.5, 2.0] * 20)
    args = ("--data-path", str(path), "--user-column", "patient", "--label-column", "y")
    result = run("--algo", "rpdp", *args, "--budget-column", "eps", "--rounds", "1", "--local-steps", "2")
    assert result.exit_code == 0, result.output
    assert "--budget-column is an old spelling of --epsilon-column" in result.stderr
    out = tmp_path / "q.csv"
    assert (
        personalize_run(
            "--distribution",
            "group-3",
            "--records",
            "740",
            "--sigma",
            "2",
            "--local-steps",
            "3",
            "--rounds",
            "2",
            "--out",
            str(out),
        ).exit_code
        == 0
    )
    result = run("--algo", "unidp", *BASE, "--budgets", str(out))
    assert result.exit_code == 0, result.output
    assert "--budgets is an old spelling of --epsilon-csv" in result.stderr


def test_user_budgets_give_the_q_u_of_personalize_level_user_and_a_tier_table(tmp_path):
    flags = ("--dataset", "heart-disease", "--users", "60", "--rounds", "3", "--noise-seed", "2")
    document = run_json("--algo", "uldp-avg", *flags, "--user-budgets", "group-3")
    summary = document["summary"]
    out = tmp_path / "qu.csv"
    args = ("--level", "user", "--distribution", "group-3", "--records", "60", "--seed", "0")
    result = personalize_run(*args, "--sigma", repr(summary["sigma"]), "--rounds", "3", "--out", str(out))
    assert result.exit_code == 0, result.output
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for tier in summary["tiers"]:
        assert {float(r["q"]) for r in rows if float(r["epsilon"]) == tier["budget"]} == {tier["q"]}
    assert summary["budget_check"] == {**summary["budget_check"], "level": "user", "over_budget": 0}
    table = run("--algo", "uldp-avg-w", *flags, "--user-budgets", "group-3")
    assert table.exit_code == 0, table.output
    text = " ".join(table.stdout.split())
    assert "eps b=1" in text and "as `model | server`" in text and "no user exceeded its budget" in text


@pytest.mark.parametrize(
    "args, needles",
    [
        (("--algo", "rpdp", *BASE, "--user-budgets", "group-3"), ("--user-budgets applies to uldp-avg",)),
        (
            ("--algo", "uldp-avg", *BASE[:2], "--user-budgets", "group-3", "--user-q", "0.5"),
            ("drop --user-q",),
        ),
        (("--algo", "uldp-avg", *BASE[:2], "--user-budgets", "nope"), ("--user-budgets", "neither a file")),
    ],
)
def test_misplaced_user_budgets_are_refused_in_one_line(args, needles):
    _one_error_line(run(*args), *needles)


def test_an_interrupted_rpdp_run_resumes_from_its_checkpoint_as_the_whole_run(tmp_path):
    flags = ("--algo", "rpdp", *BASE, "--rounds", "3", "--distribution", "three-levels")
    whole = run_json(*flags)
    first = run_json(*flags, "--rounds", "2", "--checkpoint", str(tmp_path / "run"))
    assert len(first["history"]) == 2
    # the rates were made for 2 rounds: continuing that checkpoint for 3 is another run
    other = run(*flags, "--checkpoint", str(tmp_path / "run"), "--resume")
    _one_error_line(other, "different run")
    # a checkpoint of the 3-round run, cut after round 2 (the rows up to there are the whole run's)
    cut = tmp_path / "cut"
    original = runner.run

    def stop_after_two(*args, **kwargs):
        inner = kwargs.get("on_round")

        def on_round(row):
            if inner:
                inner(row)
            if row["round"] == 2:
                raise KeyboardInterrupt

        return original(*args, **{**kwargs, "on_round": on_round})

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "run", stop_after_two)
        interrupted = run(*flags, "--checkpoint", str(cut))
    assert interrupted.exit_code == 130
    assert "record-level epsilon up to" in interrupted.stderr
    resumed = run_json(*flags, "--checkpoint", str(cut), "--resume")
    assert [r["loss"] for r in resumed["history"]] == [r["loss"] for r in whole["history"]]
    assert (
        resumed["history"][-1]["tier1_epsilon_untrusted"] == whole["history"][-1]["tier1_epsilon_untrusted"]
    )


def test_the_distribution_choices_are_the_scenarios_of_uldp_personalize():
    from uldp.accountants.personalized.budgets import DISTRIBUTIONS
    from uldp.cli.commands import train as train_command

    assert train_command.BUDGET_DISTRIBUTIONS == tuple(DISTRIBUTIONS)
