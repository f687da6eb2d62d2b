"""`uldp calibrate` keeps the issue-12 contract for every value of every numeric option."""

from __future__ import annotations

import pytest

from .fuzz_options import FEW_ORDERS, algorithm_bases, check_every_value, command_named, numeric_options

COMMAND = command_named("calibrate")
SOLVE_SIGMA = ["calibrate", "--epsilon", "3", "--q", "0.01", "--steps", "10", *FEW_ORDERS]
SOLVE_STEPS = ["calibrate", "--epsilon", "3", "--q", "0.01", "--sigma", "5", *FEW_ORDERS]
#: A DP-SGD description as Opacus and TF-Privacy give it: q = batch / N, steps from epochs.
EPOCHS = ["calibrate", "--epsilon", "3", "--dataset-size", "1000", "--batch-size", "10", "--epochs", "1"]
EPOCHS += FEW_ORDERS
#: The cheap command line each numeric option is fuzzed on: one where the option is used.
BASES = {
    "--epochs": EPOCHS,
    "--dataset-size": EPOCHS,
    "--epsilon": SOLVE_SIGMA,
    "--q": SOLVE_SIGMA,
    "--steps": SOLVE_SIGMA,
    "--sigma": SOLVE_STEPS,
    "--delta": SOLVE_SIGMA,
    "--k": SOLVE_SIGMA,
    "--orders": SOLVE_SIGMA,
    **algorithm_bases(["calibrate", "--epsilon", "3"]),
}


@pytest.mark.parametrize("option", numeric_options(COMMAND))
def test_every_value_of_every_numeric_option_keeps_the_contract(option: str) -> None:
    check_every_value(COMMAND, BASES, option)
