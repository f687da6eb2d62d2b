"""`uldp account` and `uldp calibrate` take every algorithm with a plan, the `-w` variants too
(issue 33): ULDP-AVG-w's weights n_su / N_u (ULDP-FL Eq. 3) sum to 1 over silos as 1/|S| does, so
it releases ULDP-AVG's mechanism; the commands print ULDP-AVG's numbers and say so."""

import pytest

from uldp.trainers.algorithms import algorithm_names, get_algorithm

from .invoke import command_runner

account, account_json = command_runner("account")
calibrate, calibrate_json = command_runner("calibrate")

WEIGHTED = [("uldp-avg-w", "uldp-avg"), ("uldp-sgd-w", "uldp-sgd")]
RUN = ["--sigma", "5", "--rounds", "100", "--user-q", "0.5", "--silos", "3"]


def flat(text: str) -> str:
    """`text` with its line wrapping undone (the table and its notes wrap at the terminal width)."""
    return " ".join(text.split())


def without(row: dict, *keys: str) -> dict:
    return {k: v for k, v in row.items() if k not in keys}


@pytest.mark.parametrize(("weighted", "base"), WEIGHTED)
def test_account_prints_the_base_algorithms_rows_with_a_note(weighted, base):
    got = account_json("--algo", weighted, *RUN)
    want = account_json("--algo", base, *RUN)
    # Two rows each (the model's view and, with --user-q < 1, the server's): the same numbers.
    assert len(got["results"]) == len(want["results"]) == 2
    for row, expected in zip(got["results"], want["results"]):
        assert without(row, "algorithm", "note") == without(expected, "algorithm", "note")
        assert row["algorithm"] == weighted
        assert row["note"] == "; ".join(n for n in (expected["note"], f"accounted as {base}") if n)
    # The plan says why: its base algorithm's assumptions, plus the weights line.
    assert without(got["assumptions"], "weights") == want["assumptions"]
    assert "do not change the released mechanism" in got["assumptions"]["weights"]
    assert f"the guarantee is {base}'s" in got["assumptions"]["weights"]


def test_account_side_by_side_gives_equal_epsilons():
    doc = account_json("--algo", "uldp-avg,uldp-avg-w", *RUN, "--accountant", "rdp")
    by_algorithm: dict[str, list[float]] = {}
    for row in doc["results"]:
        by_algorithm.setdefault(row["algorithm"], []).append(row["epsilon"])
    assert by_algorithm["uldp-avg-w"] == by_algorithm["uldp-avg"]
    assert "uldp-avg-w: weights" in doc["assumptions"]


def test_account_table_and_csv_carry_the_note():
    result = account("--algo", "uldp-avg-w", *RUN)
    assert result.exit_code == 0, result.output
    text = flat(result.output)
    assert (
        "uldp-avg-w is accounted as uldp-avg: its weights do not change the released mechanism, "
        "so the guarantee is uldp-avg's" in text
    )
    assert "weights: n_su / N_u (Eq. 3" in text
    csv = account("--algo", "uldp-avg-w", *RUN, "--format", "csv")
    assert csv.exit_code == 0, csv.output
    header, *rows = csv.output.strip().splitlines()
    assert header.endswith(",note") and rows[0].startswith("uldp-avg-w,")
    assert rows[0].endswith(",accounted as uldp-avg")


def test_the_base_algorithm_gets_no_such_note():
    doc = account_json("--algo", "uldp-avg", *RUN)
    assert "weights" not in doc["assumptions"]
    assert all("accounted as" not in row["note"] for row in doc["results"])
    assert "is accounted as" not in flat(account("--algo", "uldp-avg", *RUN).output)


@pytest.mark.parametrize(("weighted", "base"), WEIGHTED)
def test_calibrate_solves_to_the_base_algorithms_setting_with_a_note(weighted, base):
    args = ["--epsilon", "2", "--rounds", "100", "--user-q", "0.5"]
    got = calibrate_json("--algo", weighted, *args)
    want = calibrate_json("--algo", base, *args)
    assert without(got, "algorithm", "note", "assumptions") == without(want, "algorithm", "assumptions")
    assert (got["algorithm"], got["note"]) == (weighted, f"accounted as {base}")
    assert "note" not in want
    assert without(got["assumptions"], "weights") == want["assumptions"]
    assert f"the guarantee is {base}'s" in got["assumptions"]["weights"]


def test_calibrate_table_shows_the_note_and_solving_for_rounds_agrees():
    result = calibrate("--epsilon", "2", "--algo", "uldp-avg-w", "--sigma", "20")
    assert result.exit_code == 0, result.output
    assert "uldp-avg-w is accounted as uldp-avg: its weights do not change" in flat(result.output)
    got = calibrate_json("--epsilon", "2", "--algo", "uldp-avg-w", "--sigma", "20")
    want = calibrate_json("--epsilon", "2", "--algo", "uldp-avg", "--sigma", "20")
    assert (got["rounds"], got["epsilon"]) == (want["rounds"], want["epsilon"])


# The trained algorithms these commands still refuse: those without a plan, each told which
# command accounts it (per record, from its observed rounds, per subject; or nothing to account).
NO_PLAN = [name for name in algorithm_names() if get_algorithm(name).plan is None]


def test_every_algorithm_with_a_plan_is_offered_and_the_others_are_not():
    assert NO_PLAN == [
        "default",
        "rpdp",
        "unidp",
        "dp-fedavg-robust",
        "userldp",
        "localgroupdp",
        "higradavgdp",
        "localitemdp",
    ]
    offered = "|".join(name for name in algorithm_names() if name not in NO_PLAN)
    assert offered == "uldp-naive|uldp-group|uldp-avg|uldp-avg-w|uldp-sgd|uldp-sgd-w"
    for command in ("account", "calibrate"):
        runner, _ = command_runner(command)
        assert f"--algo [{offered}]" in flat(runner("--help").output), command


@pytest.mark.parametrize("name", NO_PLAN)
def test_algorithms_without_a_plan_are_refused_with_the_command_that_accounts_them(name):
    for result in (
        account("--algo", name, "--sigma", "5", "--rounds", "10"),
        calibrate("--epsilon", "2", "--algo", name, "--rounds", "10"),
    ):
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output and "give --algo" not in result.output
        said = flat(result.output)
        expected = {
            "default": "is not private, there is nothing to account",
            "rpdp": "uldp personalize",
            "unidp": "uldp personalize",
            "dp-fedavg-robust": "uldp dropout",
        }.get(name, f"uldp subject --algo {name}")
        assert expected in said, said
