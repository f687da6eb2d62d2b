"""`uldp calibrate` keeps the issue-12 contract for every value of every numeric option."""

from __future__ import annotations

import pytest

from .fuzz_options import check_every_value, command_named, numeric_options

COMMAND = command_named("calibrate")
#: A few orders keep each accounting fast; --orders itself is fuzzed in their place.
FEW_ORDERS = ["--orders", "2,4,8,16,32,64"]
SOLVE_SIGMA = ["calibrate", "--epsilon", "3", "--q", "0.01", "--steps", "10", *FEW_ORDERS]
SOLVE_STEPS = ["calibrate", "--epsilon", "3", "--q", "0.01", "--sigma", "5", *FEW_ORDERS]
GROUP_Q = [
    *["calibrate", "--epsilon", "3", "--algo", "uldp-group", "--rounds", "2", "--k", "2"],
    *["--record-q", "0.01", *FEW_ORDERS],
]
GROUP_BATCH = [
    *["calibrate", "--epsilon", "3", "--algo", "uldp-group", "--rounds", "2", "--k", "2"],
    *["--batch-size", "10", "--silo-sizes", "100,200", *FEW_ORDERS],
]
USER = [
    *["calibrate", "--epsilon", "3", "--algo", "uldp-avg", "--rounds", "2", "--user-q", "0.5"],
    *FEW_ORDERS,
]
#: The cheap command line each numeric option is fuzzed on: one where the option is used.
BASES = {
    "--epsilon": SOLVE_SIGMA,
    "--q": SOLVE_SIGMA,
    "--steps": SOLVE_SIGMA,
    "--sigma": SOLVE_STEPS,
    "--delta": SOLVE_SIGMA,
    "--k": SOLVE_SIGMA,
    "--orders": SOLVE_SIGMA,
    "--rounds": USER,
    "--user-q": USER,
    "--silos": GROUP_Q,
    "--silo-sizes": GROUP_BATCH,
    "--batch-size": GROUP_BATCH,
    "--record-q": GROUP_Q,
    "--local-epochs": GROUP_Q,
}


@pytest.mark.parametrize("option", numeric_options(COMMAND))
def test_every_value_of_every_numeric_option_keeps_the_contract(option: str) -> None:
    check_every_value(COMMAND, BASES, option)
