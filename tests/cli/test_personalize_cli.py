"""`uldp personalize` end to end: outputs, files, and bad input."""

import numpy as np
import pytest

from uldp.accountants.personalized.record_spend import EpsilonCurve, RecordSampledFL

from .invoke import command_runner, read_rows, write_budgets

RUN = ["--local-steps", "10", "--rounds", "50"]


run, run_json = command_runner("personalize")


def test_csv_round_trip_keeps_ids_and_reports_what_each_record_spends(tmp_path):
    ids = ["alice", "b,ob", "007", 'x"y', "42"]
    budgets = [0.5, 1.0, 2.0, 3.0, 1.0]
    src = write_budgets(tmp_path / "b.csv", zip(ids, budgets))
    out = tmp_path / "q.csv"
    doc = run_json("--epsilon-csv", src, "--sigma", "5", *RUN, "--out", str(out))
    rows = read_rows(out)
    assert [r["id"] for r in rows] == ids  # verbatim: leading zeros, commas, quotes
    assert [float(r["epsilon"]) for r in rows] == budgets
    q = np.array([float(r["q"]) for r in rows])
    spent = np.array([float(r["epsilon_spent"]) for r in rows])
    # The q read back is the q accounted: re-accounting it gives exactly the epsilon written.
    curve = EpsilonCurve(RecordSampledFL(5.0, 10, 50), 1e-5)
    np.testing.assert_array_equal(curve(q), spent)
    assert np.all(spent <= budgets) and q[1] == q[4] and {r["status"] for r in rows} == {"ok"}
    assert doc["methods"][0]["method"] == "exact" and doc["methods"][0]["overspent"] == 0

    # Reading its own output back (id column given) gives the same rates.
    again = tmp_path / "q2.csv"
    run_json("--epsilon-csv", str(out), "--id-column", "id", "--sigma", "5", *RUN, "--out", str(again))
    assert read_rows(again) == rows


def test_rows_without_an_id_column_are_numbered(tmp_path):
    src = write_budgets(tmp_path / "b.csv", [[1.0], [2.0]], header=("eps",))
    out = tmp_path / "q.csv"
    run_json("--epsilon-csv", src, "--epsilon-column", "eps", "--sigma", "5", *RUN, "--out", str(out))
    assert [r["row"] for r in read_rows(out)] == ["1", "2"]


def test_distribution_json_contract_with_all_methods():
    doc = run_json("--distribution", "group-100", "--records", "500", "--calibrate-sigma", *RUN, "--compare")
    assert [m["method"] for m in doc["methods"]] == ["exact", "scf", "bisect"]
    exact, scf, bisect = doc["methods"]
    assert exact["overspent"] == bisect["overspent"] == 0
    assert 0 < scf["r2"] <= 1 and "overspent" in scf
    assert doc["calibrated_sigma"] and doc["feasible"]["q_cap"] == 1.0
    # Calibration: the largest budget (5.95) is met at q = 1 (up to sigma's rounding).
    assert exact["q_max"] == 1.0 and doc["feasible"]["epsilon_max"] <= 5.95
    assert doc["feasible"]["epsilon_max"] == pytest.approx(5.95, rel=1e-3)
    assert "untrusted" in doc["assumptions"]["threat model"]
    assert doc["assumptions"]["bound"].startswith("every epsilon is an upper bound")


def test_table_shows_budgets_methods_assumptions_and_overspending():
    # 500 budgets: scf overspends for most of them (442), as for 2000, at a quarter of the cost.
    result = run("--distribution", "bounded-mix-gauss", "--records", "500", "--sigma", "3", *RUN, "--compare")
    assert result.exit_code == 0, result.output
    for text in (
        "budgets against epsilon spent",
        "exact",
        "scf",
        "bisect",
        "Assumptions",
        "threat model",
        "OVERSPEND",
        "p50",
    ):
        assert text in result.output


def test_csv_format_is_one_row_per_method():
    result = run("--distribution", "group-3", "--sigma", "8", *RUN, "--compare", "--format", "csv")
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("method,records,in_range,q_min") and len(lines) == 4


def test_server_threat_model_is_untrusted_unless_the_schedule_is_fixed():
    # The reviewer's run: lambda T tau rho is only the expected RDP under Poisson participation,
    # so by default the server gets the untrusted bound; the count formula needs --fixed-schedule.
    args = [
        "--distribution",
        "group-3",
        "--records",
        "100",
        "--calibrate-sigma",
        "--local-steps",
        "10",
        "--rounds",
        "20",
        "--silo-q",
        "0.2",
    ]
    untrusted = run_json(*args)
    server = run_json(*args, "--threat-model", "server")
    assert server["sigma"] >= untrusted["sigma"]
    assert server["feasible"]["epsilon_max"] >= untrusted["feasible"]["epsilon_max"] * (1 - 1e-12)
    assert "Poisson participation" in server["assumptions"]["threat model"]
    fixed = run_json(*args, "--threat-model", "server", "--fixed-schedule")
    assert fixed["sigma"] < untrusted["sigma"]  # k = 4 fixed rounds: no worse case to cover
    assert "exactly k = round(lambda T) = 4 rounds" in fixed["assumptions"]["run"]
    curve = EpsilonCurve(RecordSampledFL(fixed["sigma"], 10, 4), 1e-5)  # 4 rounds, every one
    assert fixed["feasible"]["epsilon_max"] == pytest.approx(curve(1.0)[0], rel=1e-12)


@pytest.mark.parametrize(
    "extra,words",
    [
        (["--fixed-schedule"], "server only"),
        (["--fixed-schedule", "--threat-model", "server", "--silo-q", "0.001"], "round("),
    ],
)
def test_fixed_schedule_needs_the_server_model_and_a_round(extra, words):
    result = run("--distribution", "group-3", "--sigma", "3", *RUN, *extra)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "--fixed-schedule" in lines[0]
    assert words in lines[0]


def test_scf_always_says_what_it_checked_and_marks_overspending_records(tmp_path):
    out = tmp_path / "q.csv"
    doc = run_json(
        "--distribution",
        "bounded-mix-gauss",
        "--records",
        "500",
        "--sigma",
        "3",
        *RUN,
        "--method",
        "scf",
        "--out",
        str(out),
    )
    scf = doc["methods"][0]
    statuses = [row["status"] for row in read_rows(out)]
    assert statuses.count("overspent") == scf["overspent"] == scf["overspent_up_to"] > 0
    over = [row for row in read_rows(out) if row["status"] == "overspent"]
    assert all(float(r["epsilon_spent"]) > float(r["epsilon"]) for r in over)
    assert any(note.startswith("scf: ") and "OVERSPEND" in note for note in doc["notes"])
    # No overspending (every budget capped): the note is still there, the fit is still no bound.
    src = write_budgets(tmp_path / "b.csv", [["a", 1e4], ["b", 2e4]])
    doc = run_json("--epsilon-csv", src, "--sigma", "3", *RUN, "--method", "scf")
    assert any(
        note.startswith("scf: no record overspends") and "not a bound" in note for note in doc["notes"]
    )


def test_exact_and_bisect_notes_say_what_was_compared_not_re_checked():
    doc = run_json("--distribution", "group-3", "--sigma", "3", *RUN, "--method", "bisect")
    assert any(
        note.startswith("bisect: every record's epsilon spent, epsilon*(q) evaluated at")
        for note in doc["notes"]
    )
    assert not any("re-checked" in note for note in doc["notes"])


def test_infeasible_budgets_are_reported_and_fail_on_request(tmp_path):
    src = write_budgets(tmp_path / "b.csv", [["a", 0.01], ["b", 1.0], ["c", 1e5]])
    args = ["--epsilon-csv", src, "--sigma", "1", "--local-steps", "50", "--rounds", "50", "--silo-q", "0.5"]
    out = tmp_path / "q.csv"
    doc = run_json(*args, "--out", str(out))
    assert doc["infeasible"]["below"] == 1 and doc["infeasible"]["above"] == 1
    assert doc["infeasible"]["below_range"] == [0.01, 0.01]
    assert [r["status"] for r in read_rows(out)] == ["excluded-low", "ok", "capped"]
    assert any("outside the feasible range" in note for note in doc["notes"])
    result = run(*args, "--infeasible", "fail")
    assert result.exit_code == 2 and "1 budget(s) in [0.01, 0.01] below" in result.output


def test_plot_is_a_png(tmp_path):
    plot = tmp_path / "curve.png"
    run_json("--distribution", "three-levels", "--records", "300", "--sigma", "3", *RUN, "--plot", str(plot))
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000


def test_config_file(tmp_path):
    config = tmp_path / "p.yaml"
    config.write_text("distribution: group-3\nsigma: 4\nlocal-steps: 10\nrounds: 50\nmethod: bisect\n")
    doc = run_json("--config", str(config))
    assert doc["methods"][0]["method"] == "bisect" and doc["sigma"] == 4


def _bad_files(tmp_path):
    return {
        "negative": write_budgets(tmp_path / "neg.csv", [["a", 1.0], ["b", -1.0]]),
        "nan": write_budgets(tmp_path / "nan.csv", [["a", "nan"], ["b", 1.0]]),
        "empty": write_budgets(tmp_path / "empty.csv", [["a", ""]]),
        "text": write_budgets(tmp_path / "text.csv", [["a", "lots"]]),
        "column": write_budgets(tmp_path / "col.csv", [["a", 1.0]], header=("id", "eps")),
    }


@pytest.mark.parametrize(
    "case,extra,option,words",
    [
        ("negative", [], "--epsilon-csv", "row 2 (id b): budget -1.0"),
        ("nan", [], "--epsilon-csv", "row 1 (id a): budget nan"),
        ("empty", [], "--epsilon-csv", "row 1 (id a): budget missing"),
        ("text", [], "--epsilon-csv", "lots"),
        ("column", [], "--epsilon-csv", "no column 'epsilon'"),
        ("column", ["--epsilon-column", "eps", "--id-column", "user"], "--epsilon-csv", "no column 'user'"),
        (None, ["--q-cap", "0"], "--q-cap", "not in (0, 1]"),
        (None, ["--q-cap", "1.5"], "--q-cap", "not in (0, 1]"),
        (None, ["--q-min", "0.5", "--q-cap", "0.1"], "--q-min", "above --q-cap"),
        (None, ["--sigma", "-1"], "--sigma", "not in"),
        (None, ["--silo-q", "2"], "--silo-q", "not in (0, 1]"),
        (None, ["--out", "/nonexistent-dir/q.csv"], "--out", "does not exist"),
        (None, ["--plot", "/nonexistent-dir/c.png"], "--plot", "does not exist"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, case, extra, option, words):
    source = ["--epsilon-csv", _bad_files(tmp_path)[case]] if case else ["--distribution", "group-3"]
    sigma = [] if "--sigma" in extra else ["--sigma", "3"]
    result = run(*source, *sigma, *RUN, *extra)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:"), result.output
    assert option in lines[0] and words in lines[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "args,words",
    [
        (["--sigma", "3"], "exactly one of --epsilon-csv"),
        (["--distribution", "group-3"], "exactly one of --sigma or --calibrate-sigma"),
        (["--distribution", "group-3", "--sigma", "3", "--calibrate-sigma"], "exactly one of --sigma"),
    ],
)
def test_exactly_one_source_and_one_sigma(args, words):
    result = run(*args, *RUN)
    assert result.exit_code == 2 and words in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def test_without_pyarrow_the_csv_module_gives_the_same_files(tmp_path, monkeypatch):
    from uldp.cli import personalize_io

    ids = ["alice", "b,ob", "007", 'x"y', "42"]
    src = write_budgets(tmp_path / "b.csv", zip(ids, [0.5, 1.0, 2.0, 3.0, 1.0]))
    fast, slow = tmp_path / "fast.csv", tmp_path / "slow.csv"
    run_json("--epsilon-csv", src, "--sigma", "5", *RUN, "--out", str(fast))
    monkeypatch.setattr(personalize_io, "_pyarrow", lambda: False)
    run_json("--epsilon-csv", src, "--sigma", "5", *RUN, "--out", str(slow))
    fast_rows, slow_rows = read_rows(fast), read_rows(slow)
    assert [r["id"] for r in slow_rows] == ids
    for a, b in zip(fast_rows, slow_rows):
        assert a["id"] == b["id"] and a["status"] == b["status"]
        assert all(float(a[k]) == float(b[k]) for k in ("epsilon", "q", "epsilon_spent"))
    bad = write_budgets(tmp_path / "bad.csv", [["a", "1"], ["b", "lots"]])
    result = run("--epsilon-csv", bad, "--sigma", "5", *RUN)
    assert result.exit_code == 2 and "row 2: budget 'lots' is not a number" in result.output


def test_a_calibrated_largest_budget_is_spent_exactly_not_capped(tmp_path):
    """--calibrate-sigma spends the largest budget at q_cap: epsilon*(q_cap) <= it, short of it only
    by sigma's rounding up to 4 significant digits. Its records are `spent-exactly`, in range, not
    `capped` and "outside the feasible range" (issue 34, item 8), and still never over budget."""
    src = write_budgets(tmp_path / "b.csv", [["a", 1.0], ["b", 5.0], ["c", 5.0]])
    out = tmp_path / "q.csv"
    args = ["--epsilon-csv", src, "--calibrate-sigma", *RUN]
    doc = run_json(*args, "--out", str(out))
    cap = doc["feasible"]["epsilon_max"]
    assert cap < 5.0  # the case: 7.99866 <= 8 printed as "capped"
    rows = read_rows(out)
    assert [r["status"] for r in rows] == ["ok", "spent-exactly", "spent-exactly"]
    assert all(float(r["epsilon_spent"]) <= float(r["epsilon"]) for r in rows)
    assert float(rows[1]["q"]) == 1.0 and float(rows[1]["epsilon_spent"]) == cap
    assert doc["infeasible"]["above"] == 0 and doc["infeasible"]["above_range"] is None
    assert [row["status"] for row in doc["budgets"]] == ["ok", "spent-exactly"]
    assert doc["methods"][0]["in_range"] == 3
    assert not any("outside the feasible range" in note for note in doc["notes"])
    assert "spent exactly at q_cap" in doc["assumptions"]["sigma"]
    table = run(*args).output
    assert "spent-exactly" in table and "capped" not in table and "outside the feasible" not in table
