"""`uldp audit` keeps the issue-12 contract (tests/cli/fuzz.py) for every value of its own numeric
options: exit 0 or 2, never a traceback, exactly one `Error:` line, no non-finite number printed.

The options it shares with `uldp train` are the very same Click parameters (checked below), so
test_fuzz_train.py's fuzzing covers their parsing; here each of the audit's own options runs
through every hostile value on a cheap audit (heart-disease, 1 round, 8 users).
"""

from __future__ import annotations

import pytest

from uldp.cli.commands import audit as audit_command
from uldp.cli.commands import train as train_command

from .fuzz import HOSTILE_VALUES, assert_contract, run
from .fuzz_options import check_every_value, command_named

COMMAND = command_named("audit")
BASE = ["audit", "--algo", "uldp-avg", "--dataset", "heart-disease", "--rounds", "1", "--users", "8"]
# A fixed seed makes the run, hence its canaries' guesses, the same every time: at the least allowed
# confidence (1/2) a correct run is still called violated with probability up to 1/2 by design.
BASE += ["--noise-seed", "1", "--format", "json"]
OWN = ["--confidence"]


def test_the_shared_options_are_uldp_train_s_own_parameters() -> None:
    """Same objects, so the same names, ranges and messages as `uldp train` (fuzzed there)."""
    train_params = {id(p) for p in train_command.command.params}
    shared = [p for p in COMMAND.params if p.name in audit_command.TRAIN_OPTIONS]
    assert len(shared) == len(audit_command.TRAIN_OPTIONS)
    assert all(id(p) in train_params for p in shared)


@pytest.mark.parametrize("option", OWN)
def test_every_value_of_the_audit_s_numeric_options_keeps_the_contract(option: str) -> None:
    check_every_value(COMMAND, {option: BASE}, option)


@pytest.mark.parametrize("value", [*HOSTILE_VALUES, "2", "8", "9", "0.5", "100000", "100001", "1e3"])
def test_every_value_of_canaries_keeps_the_contract(value: str) -> None:
    """--canaries is a count or a fraction: every hostile value, and the edges 2, users, users + 1."""
    args = [*BASE, "--canaries", value]
    assert_contract(run(*args), args)


def test_the_parse_time_limits_equal_the_library_s() -> None:
    """The count limits and fault names the parser repeats (to import no torch) are the library's."""
    from uldp.trainers import audit
    from uldp.trainers.algorithms.faults import FAULTS

    assert audit_command.DEFAULT_CANARIES == audit.DEFAULT_CANARIES
    assert audit_command.MAX_CANARIES == audit.MAX_CANARIES
    assert audit_command.FAULT_NAMES == tuple(FAULTS)
