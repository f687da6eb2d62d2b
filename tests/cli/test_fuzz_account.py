"""`uldp account` keeps the issue-12 contract for every value of every numeric option."""

from __future__ import annotations

import pytest

from .fuzz_options import check_every_value, command_named, numeric_options

COMMAND = command_named("account")
#: A few orders keep each accounting fast; --orders itself is fuzzed in their place.
FEW_ORDERS = ["--orders", "2,4,8,16,32,64"]
MECHANISM = ["account", "--sigma", "1", "--q", "0.01", "--steps", "10", *FEW_ORDERS]
GROUP_Q = [
    *["account", "--sigma", "1", "--algo", "uldp-group", "--rounds", "2", "--k", "2", "--record-q", "0.01"],
    *FEW_ORDERS,
]
GROUP_BATCH = [
    *["account", "--sigma", "1", "--algo", "uldp-group", "--rounds", "2", "--k", "2"],
    *["--batch-size", "10", "--silo-sizes", "100,200", *FEW_ORDERS],
]
USER = ["account", "--sigma", "1", "--algo", "uldp-avg", "--rounds", "2", "--user-q", "0.5", *FEW_ORDERS]
#: The cheap command line each numeric option is fuzzed on: one where the option is used.
BASES = {
    "--sigma": MECHANISM,
    "--q": MECHANISM,
    "--steps": MECHANISM,
    "--delta": MECHANISM,
    "--k": MECHANISM,
    "--orders": MECHANISM,
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
