"""Issue 12: every numeric option of `uldp personalize` through the hostile values and the
neighbours of its own limits, on top of a cheap valid command line; the contract of fuzz.py.

The options are read from the Click command, so an option added later is fuzzed too.
"""

from __future__ import annotations

import math

import click
import pytest

from uldp.cli.commands.personalize import command
from uldp.cli.options import Interval, PositiveInt

from .fuzz import HOSTILE_VALUES, assert_contract, run

# Cheap: ten records, one round of one step; every option the fuzzed one may need is given.
BASE = {
    "--distribution": "group-3",
    "--records": "10",
    "--sigma": "1.2",
    "--local-steps": "1",
    "--rounds": "1",
    "--format": "json",
}


def _numeric(param: click.Parameter) -> bool:
    return isinstance(param.type, (Interval, PositiveInt, click.types._NumberParamTypeBase))


def _limit_neighbours(param: click.Parameter) -> list[str]:
    """The option's own ends and the values just beyond and just inside them."""
    kind = param.type
    values: list[float | int] = []
    if isinstance(kind, PositiveInt):
        values = [0, 1, 2, kind.high - 1, kind.high, kind.high + 1]
    elif isinstance(kind, click.IntRange):
        for end in (kind.min, kind.max):
            if end is not None:
                values += [end - 1, end, end + 1]
    elif isinstance(kind, Interval):
        for end in (kind.low, kind.high):
            if math.isfinite(end):
                values += [end, math.nextafter(end, -math.inf), math.nextafter(end, math.inf)]
    return [repr(v) if isinstance(v, float) else str(v) for v in values]


NUMERIC = [p for p in command.params if isinstance(p, click.Option) and _numeric(p)]
CASES = [
    (param.opts[0], value)
    for param in NUMERIC
    for value in dict.fromkeys([*HOSTILE_VALUES, *_limit_neighbours(param)])
]


def test_every_numeric_option_is_fuzzed():
    names = {p.opts[0] for p in NUMERIC}
    assert {"--records", "--seed", "--sigma", "--local-steps", "--rounds", "--silo-q"} <= names
    assert {"--delta", "--q-cap", "--q-min", "--tolerance"} <= names


@pytest.mark.parametrize(("option", "value"), CASES)
def test_hostile_value_keeps_the_contract(option, value):
    args = dict(BASE)
    if option == "--tolerance":
        args["--method"] = "bisect"  # --tolerance applies to bisect only
    args[option] = value
    argv = ["personalize", *[item for pair in args.items() for item in pair]]
    result = run(*argv)
    assert_contract(result, argv)
    # No numpy RuntimeWarning (nor any other) reaches the terminal on a success either.
    assert result.exit_code != 0 or "Warning" not in result.stderr, result.stderr


# --level user (issue 14 point 3): the options its run reads, on a user-level base line; the
# record-only options are refused there (tests/cli/test_personalize_user_level.py).
USER_BASE = {
    "--level": "user",
    "--distribution": "group-3",
    "--records": "10",
    "--sigma": "1.2",
    "--rounds": "1",
    "--format": "json",
}
USER_OPTIONS = ("--sigma", "--rounds", "--q-cap", "--q-min")
USER_CASES = [(option, value) for option, value in CASES if option in USER_OPTIONS]


def test_the_user_level_base_line_runs_and_its_options_are_fuzzed():
    # Otherwise every case would keep the contract by being refused (exit 2, one line).
    result = run("personalize", *[item for pair in USER_BASE.items() for item in pair])
    assert result.exit_code == 0 and '"level": "user"' in result.stdout, result.output
    assert {option for option, _ in USER_CASES} == set(USER_OPTIONS)


@pytest.mark.parametrize(("option", "value"), USER_CASES)
def test_hostile_value_keeps_the_contract_at_the_user_level(option, value):
    args = {**USER_BASE, option: value}
    argv = ["personalize", *[item for pair in args.items() for item in pair]]
    result = run(*argv)
    assert_contract(result, argv)
    assert result.exit_code != 0 or "Warning" not in result.stderr, result.stderr
