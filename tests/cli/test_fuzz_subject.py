"""`uldp subject` keeps the issue-12 contract for every value of every numeric option."""

from __future__ import annotations

import pytest

from .fuzz_options import check_every_value, command_named, numeric_options

COMMAND = command_named("subject")
#: A few orders keep each accounting fast; --orders itself is fuzzed in their place.
FEW_ORDERS = ["--orders", "2,4,8,16,32,64"]
BASE = [
    *["subject", "--members", "4", "--per-round", "2", "--rounds", "2", "--local-steps", "2"],
    *["--record-q", "0.01", "--sigma", "1", *FEW_ORDERS],
]
BUDGET = [*BASE, "--epsilon", "4"]
POWER = [*BASE, "--subject-items", "8", "--distribution", "power", "--alpha", "2"]
#: The cheap command line each numeric option is fuzzed on: one where the option is used.
BASES = {
    "--members": BASE,
    "--per-round": BASE,
    "--rounds": BASE,
    "--local-steps": BASE,
    "--record-q": BASE,
    "--sigma": BASE,
    "--epsilon": BUDGET,
    "--k": BUDGET,
    "--subject-members": BASE,
    "--items-per-member": BASE,
    "--subject-items": BASE,
    "--alpha": POWER,
    "--delta": BASE,
    "--orders": BASE,
}


@pytest.mark.parametrize("option", numeric_options(COMMAND))
def test_every_value_of_every_numeric_option_keeps_the_contract(option: str) -> None:
    check_every_value(COMMAND, BASES, option)
