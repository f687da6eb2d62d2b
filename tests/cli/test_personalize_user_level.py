"""`uldp personalize --level user` end to end (issue 14 point 3): per-user budgets to per-user
sampling probabilities q_u for ULDP-AVG / ULDP-SGD, run as a user would."""

from __future__ import annotations

import numpy as np
import pytest

from uldp.accountants.personalized.user_rates import (
    calibrate_user_sigma,
    server_epsilon,
    user_curve,
    user_rates,
)

from .invoke import command_runner, read_rows, write_budgets

run, run_json = command_runner("personalize")
account, account_json = command_runner("account")

USER_RUN = ["--level", "user", "--sigma", "5", "--rounds", "100"]
USERS = ("user", "epsilon")  # the budgets file's header


def one_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error:"), result.output
    return lines[0]


def test_the_table_names_users_and_states_the_user_level_run():
    result = run("--distribution", "group-3", "--records", "100", *USER_RUN)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # the assumptions wrap at the terminal's width
    assert "┃ users ┃" in result.output  # the budgets table counts users
    assert "(100 users, 3 distinct" in text
    assert "add or remove all records of one user, in every silo" in text
    assert "ULDP-FL Theorem 3" in text and "Algorithm 4" in text and "tau" not in text
    assert "server view: epsilon " in text and "known participation" in text
    assert "exact: every user's epsilon spent" in text and "per-user rates were not written" in text


def test_csv_round_trip_gives_each_user_its_q_and_what_it_spends(tmp_path):
    users = ["alice", "b,ob", "007", "dan"]
    budgets = [0.5, 1.0, 2.0, 1.0]
    src = write_budgets(tmp_path / "users.csv", zip(users, budgets), USERS)
    out = tmp_path / "q.csv"
    doc = run_json("--epsilon-csv", src, "--id-column", "user", *USER_RUN, "--out", str(out))
    rows = read_rows(out)
    assert list(rows[0]) == ["user", "epsilon", "q", "epsilon_spent", "status"]
    assert [r["user"] for r in rows] == users and [float(r["epsilon"]) for r in rows] == budgets
    q = np.array([float(r["q"]) for r in rows])
    spent = np.array([float(r["epsilon_spent"]) for r in rows])
    # The q read back is the q accounted: the user-level curve gives exactly the epsilon written,
    # within each budget, and the library's q_u for the same budgets.
    curve = user_curve(5.0, 100, 1e-5)
    np.testing.assert_array_equal(curve(q), spent)
    assert np.all(spent <= budgets) and q[1] == q[3] and q[0] < q[1] < q[2]
    np.testing.assert_array_equal(q, user_rates(np.array(budgets), curve).q)
    assert doc["level"] == "user" and doc["server_epsilon"] == server_epsilon(
        5.0, 100, 1e-5, q=float(q.max())
    )
    assert doc["methods"][0]["overspent"] == 0
    assert f"per-user rates written to {out} (4 rows" in doc["notes"][-1]


@pytest.mark.parametrize("budget", [0.5, 2.0])
def test_the_epsilon_spent_is_what_uldp_account_prints_for_that_q(tmp_path, budget):
    # Independent code: `uldp account` accounts ULDP-AVG with user sampling at the q_u handed out.
    src = write_budgets(tmp_path / "users.csv", [("u", budget)], USERS)
    row = run_json("--epsilon-csv", src, *USER_RUN)["budgets"][0]
    accounted = account_json(
        "--algo", "uldp-avg", "--user-q", repr(row["q"]), "--sigma", "5", "--rounds", "100"
    )["results"]
    model = next(r for r in accounted if r["method"] == "user")["epsilon"]
    assert row["spent"] == pytest.approx(model, rel=0.01) and row["spent"] <= budget


def test_calibrated_sigma_spends_the_largest_user_budget_at_the_cap():
    doc = run_json(
        "--level", "user", "--distribution", "group-3", "--records", "50", "--calibrate-sigma",
        "--rounds", "100", "--q-cap", "0.5",
    )  # fmt: skip
    assert doc["sigma"] == calibrate_user_sigma(3.0, 100, 1e-5, 0.5).value
    largest = next(row for row in doc["budgets"] if row["budget"] == 3.0)
    assert largest["q"] == pytest.approx(0.5, rel=0.002) and largest["spent"] <= 3.0
    assert "calibrated: epsilon*(q_cap = 0.5)" in doc["assumptions"]["sigma"]


def test_a_budget_no_rate_meets_gets_no_sampling_or_fails_on_request(tmp_path):
    # At sigma 0.5 even q_min = 1e-6 spends 1.35 over 100 rounds.
    src = write_budgets(tmp_path / "users.csv", [("a", 0.0), ("b", 2.0)], USERS)
    args = ["--epsilon-csv", src, "--level", "user", "--sigma", "0.5", "--rounds", "100"]
    doc = run_json(*args)
    statuses = {row["budget"]: (row["q"], row["status"]) for row in doc["budgets"]}
    assert statuses[0.0] == (0.0, "excluded-low") and statuses[2.0][1] == "ok"
    assert any("those below get q = 0 (never sampled)" in note for note in doc["notes"])
    line = one_error_line(run(*args, "--infeasible", "fail"))
    assert "1 budget(s) in [0, 0] below epsilon*(q_min" in line


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--local-steps", "3"], "'--local-steps'"),
        (["--silo-q", "0.5"], "'--silo-q'"),
        (["--threat-model", "server"], "'--threat-model'"),
        (["--fixed-schedule"], "'--fixed-schedule'"),
        (["--local-steps", "2", "--threat-model", "untrusted"], "'--local-steps', '--threat-model'"),
    ],
)
def test_record_level_options_are_refused_at_the_user_level(extra, named):
    line = one_error_line(run("--distribution", "group-3", *USER_RUN, *extra))
    assert named in line and "read only with --level record" in line


def test_the_record_level_still_needs_local_steps_and_is_the_default():
    line = one_error_line(run("--distribution", "group-3", "--sigma", "5", "--rounds", "10"))
    assert "Missing option '--local-steps' (required with --level record)" in line
    doc = run_json("--distribution", "group-3", "--sigma", "5", "--rounds", "10", "--local-steps", "2")
    assert doc["level"] == "record" and doc["server_epsilon"] is None
    assert doc["assumptions"]["neighbouring"] == "add or remove one record (record-level DP)"


def test_the_plot_is_drawn_for_users(tmp_path):
    plot = tmp_path / "curve.png"
    result = run("--distribution", "group-3", "--records", "20", *USER_RUN, "--plot", str(plot))
    assert result.exit_code == 0, result.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
