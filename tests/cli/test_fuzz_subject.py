"""`uldp subject` keeps the issue-12 contract for every value of every numeric option."""

from __future__ import annotations

import pytest

from .fuzz import HOSTILE_VALUES, assert_contract, run
from .fuzz_options import check_every_value, command_named, numeric_options

COMMAND = command_named("subject")
#: A few orders keep each accounting fast; --orders itself is fuzzed in their place.
FEW_ORDERS = ["--orders", "2,4,8,16,32,64"]
BASE = [
    *["subject", "--silos", "4", "--silos-per-round", "2", "--rounds", "2", "--local-steps", "2"],
    *["--record-q", "0.01", "--sigma", "1", *FEW_ORDERS],
]
BUDGET = [*BASE, "--epsilon", "4"]
POWER = [*BASE, "--subject-items", "8", "--distribution", "power", "--alpha", "2"]
#: The cheap command line each numeric option is fuzzed on: one where the option is used.
BASES = {
    "--silos": BASE,
    "--silos-per-round": BASE,
    "--rounds": BASE,
    "--local-steps": BASE,
    "--record-q": BASE,
    "--sigma": BASE,
    "--epsilon": BUDGET,
    "--k": BUDGET,
    "--subject-silos": BASE,
    "--items-per-silo": BASE,
    "--subject-items": BASE,
    "--alpha": POWER,
    "--delta": BASE,
    "--orders": BASE,
}


@pytest.mark.parametrize("option", numeric_options(COMMAND))
def test_every_value_of_every_numeric_option_keeps_the_contract(option: str) -> None:
    check_every_value(COMMAND, BASES, option)


#: The options whose accounting --algo changes, fuzzed again under the two mechanisms that
#: differ most from HiGradAvgDP's: UserLDP (2C, and its unsampled user-level LDP row) and
#: LocalItemDP (m items: m steps at sigma / sqrt(m), and its cross-check's sigma / m can fall far
#: below --sigma's own range).
ALGO_OPTIONS = ("--rounds", "--local-steps", "--record-q", "--sigma", "--items-per-silo", "--subject-items")


@pytest.mark.parametrize("algo", ["userldp", "localitemdp"])
@pytest.mark.parametrize("option", ALGO_OPTIONS)
def test_every_value_keeps_the_contract_under_each_algo(option: str, algo: str) -> None:
    check_every_value(COMMAND, {o: [*base, "--algo", algo] for o, base in BASES.items()}, option)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_hostile_algo_names_are_one_error_line(accountant: str) -> None:
    for value in (*HOSTILE_VALUES, "HiGradAvgDP", "dp-sgd"):
        args = [*BASE, "--accountant", accountant, "--algo", value]
        result = run(*args)
        assert_contract(result, args)
        assert result.exit_code == 2, args


@pytest.mark.parametrize("items", ["2", "16385", "1048576"])
def test_localitemdp_items_under_pld_keep_the_contract(items: str) -> None:
    """Issue 32: a subject's items at a member are the Binomial(m, q) mixture; PLD builds it for up
    to 2^14 items and refuses more in one line (exit 2), before any work."""
    args = [
        *["subject", "--silos", "4", "--silos-per-round", "2", "--rounds", "2", "--local-steps", "2"],
        *["--record-q", "0.2", "--sigma", "3", "--items-per-silo", items],
        *["--algo", "localitemdp", "--accountant", "pld"],
    ]
    result = run(*args)
    assert_contract(result, args)
    assert result.exit_code == (0 if items == "2" else 2), result.output
