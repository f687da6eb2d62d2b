"""`uldp account` as a user runs it: the total-variation rule is named, the refined order is
printed, and the ULDP-GROUP PLD row over unequal silos (issue 11 point 10)."""

from .invoke import command_runner

run, run_json = command_runner("account")


def test_total_variation_rule_is_named_in_the_row():
    doc = run_json("--sigma", "2", "--q", "1e-6", "--steps", "1", "--conversion", "classic")
    row = doc["results"][0]
    assert row["epsilon"] == 0 and "total-variation rule" in row["note"]
    table = run("--sigma", "2", "--q", "1e-6", "--steps", "1", "--conversion", "classic").output
    assert "total-variation" in table


def test_refined_order_between_grid_orders():
    doc = run_json("--sigma", "4.21", "--q", "4.07e-4", "--steps", "74", "--delta", "1.23e-9")
    row = doc["results"][0]
    assert abs(row["epsilon"] - 0.05056) < 1e-5 and 256 < row["order"] < 283


def test_view_lines_of_uldp_group_say_what_was_assumed():
    doc = run_json(
        "--algo", "uldp-group", "--sigma", "2", "--rounds", "20", "--silo-sizes", "1000,500,2000",
        "--batch-size", "64", "--local-epochs", "2", "--k", "4", "--group-method", "rdp",
    )  # fmt: skip
    silos = doc["assumptions"]["silos"]
    assert "each silo's own mechanism" in silos and "worst split" in silos
    assert "every draw of the flags" in doc["assumptions"]["contribution bound"]
