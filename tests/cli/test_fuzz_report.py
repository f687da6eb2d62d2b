"""`uldp report` keeps the issue-12 contract for every value of every numeric option."""

from __future__ import annotations

import pytest

from .fuzz_options import FEW_ORDERS, algorithm_bases, check_every_value, command_named, numeric_options

COMMAND = command_named("report")
#: The RDP accountant alone keeps each statement fast; the tight ones are fuzzed through --sigma.
RDP = ["--accountant", "rdp", *FEW_ORDERS]
MECHANISM = ["report", "--sigma", "1", "--q", "0.01", "--steps", "10", *RDP]
TIGHT = ["report", "--sigma", "1", "--q", "0.01", "--steps", "10", "--accountant", "pld,prv"]
DP_SGD = ["report", "--sigma", "1", "--dataset-size", "1000", "--batch-size", "100", "--epochs", "1", *RDP]
USER = [*DP_SGD, "--max-examples-per-user", "2", "--group-method", "rdp,normal"]
#: The cheap command line each numeric option is fuzzed on: one where the option is used.
BASES = {
    "--sigma": MECHANISM,
    "--q": MECHANISM,
    "--steps": MECHANISM,
    "--delta": MECHANISM,
    "--k": [*MECHANISM, "--group-method", "rdp,normal"],
    "--orders": MECHANISM,
    **algorithm_bases(["report", "--sigma", "1", "--accountant", "rdp"]),
    "--dataset-size": DP_SGD,
    "--epochs": DP_SGD,
    "--max-examples-per-user": USER,
}


@pytest.mark.parametrize("option", numeric_options(COMMAND))
def test_every_value_of_every_numeric_option_keeps_the_contract(option: str) -> None:
    check_every_value(COMMAND, BASES, option)


@pytest.mark.parametrize("option", ["--sigma", "--q", "--steps", "--delta"])
def test_the_tight_accountants_keep_the_contract(option: str) -> None:
    check_every_value(COMMAND, {option: TIGHT}, option)


@pytest.mark.parametrize("flag", ["--microbatching", "--no-microbatching"])
@pytest.mark.parametrize("base", [MECHANISM, DP_SGD, USER], ids=["plan", "dp-sgd", "user"])
def test_the_microbatching_flags_keep_the_contract_on_every_source(base: list[str], flag: str) -> None:
    # Issue 32: a DP-SGD description's flag, refused in one line elsewhere.
    from .fuzz import assert_contract, run

    args = [*base, flag]
    result = run(*args)
    assert_contract(result, args)
    assert (result.exit_code == 0) == ("--dataset-size" in base)
