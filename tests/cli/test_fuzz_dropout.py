"""`uldp dropout` keeps the issue-12 contract for every value of every numeric option."""

from __future__ import annotations

import pytest

from .fuzz_options import check_every_value, command_named, numeric_options

COMMAND = command_named("dropout")
#: A few orders keep each accounting fast; --orders itself is fuzzed in their place.
FEW_ORDERS = ["--orders", "2,4,8,16,32,64"]
PARTICIPANTS = [
    *["dropout", "--sigma", "1", "--silo-q", "0.01", "--dropout", "0.1", "--silos-per-round", "50"],
    *["--rounds", "10", "--no-paper", *FEW_ORDERS],
]
EXAMPLES = [
    *["dropout", "--sigma", "1", "--silo-q", "0.01", "--dropout", "0.1", "--examples", "5,10,20"],
    *["--n-max", "10", "--rounds", "10", "--no-paper", *FEW_ORDERS],
]
BUDGET = [*PARTICIPANTS[:9], "--epsilon", "2", "--no-paper", *FEW_ORDERS]
#: The cheap command line each numeric option is fuzzed on: one where the option is used.
BASES = {
    "--sigma": PARTICIPANTS,
    "--silo-q": PARTICIPANTS,
    "--dropout": PARTICIPANTS,
    "--rounds": PARTICIPANTS,
    "--epsilon": BUDGET,
    "--silos-per-round": PARTICIPANTS,
    "--examples": EXAMPLES,
    "--n-max": EXAMPLES,
    "--min-weight-sum": PARTICIPANTS,
    "--colluding": PARTICIPANTS,
    "--clip": PARTICIPANTS,
    "--delta": PARTICIPANTS,
    "--orders": PARTICIPANTS,
}


@pytest.mark.parametrize("option", numeric_options(COMMAND))
def test_every_value_of_every_numeric_option_keeps_the_contract(option: str) -> None:
    check_every_value(COMMAND, BASES, option)
