"""Which options of a command the fuzz tests throw values at, and which values (issue 12).

The numeric options are read from the Click command itself, so an option added later is fuzzed
without anyone listing it; each command's fuzz test (tests/cli/test_fuzz_*.py) maps every one of
them to a cheap base command line and fails for an option it has no base line for.
"""

from __future__ import annotations

import math

import click
import pytest

from uldp.cli.accounting_options import OrdersType
from uldp.cli.main import cli
from uldp.cli.options import CommaList, Interval, PositiveInt

from .fuzz import HOSTILE_VALUES, assert_contract, run

_NUMERIC = (Interval, PositiveInt, click.types.IntParamType, click.types.FloatParamType, OrdersType)


def command_named(*path: str) -> click.Command:
    """The Click command `uldp PATH...` (e.g. "bench", "protocol")."""
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None, name
        command = found
    return command


def _item_type(param: click.Parameter) -> click.ParamType:
    return param.type.item_type if isinstance(param.type, CommaList) else param.type


def numeric_options(command: click.Command) -> list[str]:
    """The long name of every option of `command` that takes a number (or a list of numbers)."""
    return [
        param.opts[0]
        for param in command.params
        if isinstance(param, click.Option) and not param.is_flag and isinstance(_item_type(param), _NUMERIC)
    ]


def _shown(number: float) -> str:
    return repr(int(number)) if float(number).is_integer() and abs(number) < 2**63 else repr(number)


def limit_values(command: click.Command, option: str) -> list[str]:
    """The values at and just beyond each end of the option's own range."""
    param = next(p for p in command.params if p.opts[0] == option)
    kind = _item_type(param)
    if isinstance(kind, Interval):
        values: list[float] = []
        for end in (kind.low, kind.high):
            if math.isfinite(end):
                values += [end, math.nextafter(end, -math.inf), math.nextafter(end, math.inf)]
        return [_shown(v) if v != 0 else "0" for v in values]
    if isinstance(kind, PositiveInt):
        return ["0", "1", str(kind.high), str(kind.high + 1)]
    if isinstance(kind, click.IntRange):
        ends = [e for e in (kind.min, kind.max) if e is not None]
        return [str(v) for e in ends for v in (e - 1, e, e + 1)]
    if isinstance(kind, OrdersType):
        return ["1", "1.0000001", "1000000", "1000001", "2,3,,4", "default"]
    return []


def fuzz_values(command: click.Command, option: str) -> list[str]:
    """HOSTILE_VALUES and the option's limit neighbours, without repeats."""
    return list(dict.fromkeys([*HOSTILE_VALUES, *limit_values(command, option)]))


def with_value(base: list[str], option: str, value: str) -> list[str]:
    """`base` with `option` set to `value` (replacing the base's own value of it, if any)."""
    args = list(base)
    if option in args:
        args[args.index(option) + 1] = value
        return args
    return [*args, option, value]


def check_every_value(
    command: click.Command, bases: dict[str, list[str]], option: str, *, skip: frozenset[str] = frozenset()
) -> None:
    """Run `option` with every fuzz value (but `skip`) on its base line in `bases`; assert the
    contract. An option without a base line fails: a new option must get one where it is used."""
    if option not in bases:
        pytest.fail(f"{option} has no cheap base command line in BASES: add one where it is used")
    for value in fuzz_values(command, option):
        if value in skip:
            continue
        args = with_value(bases[option], option, value)
        assert_contract(run(*args), args)


#: A few orders keep each accounting fast; --orders itself is fuzzed in their place.
FEW_ORDERS = ["--orders", "2,4,8,16,32,64"]


def algorithm_bases(head: list[str]) -> dict[str, list[str]]:
    """Cheap base lines, after `head` (the command and its target: `account --sigma 1`, or
    `calibrate --epsilon 3`), for the plan options of `--algo` that account and calibrate share."""
    group_q = [*head, "--algo", "uldp-group", "--rounds", "2", "--k", "2", "--record-q", "0.01", *FEW_ORDERS]
    group_batch = [
        *[*head, "--algo", "uldp-group", "--rounds", "2", "--k", "2"],
        *["--batch-size", "10", "--silo-sizes", "100,200", *FEW_ORDERS],
    ]
    user = [*head, "--algo", "uldp-avg", "--rounds", "2", "--user-q", "0.5", *FEW_ORDERS]
    group_k = [*head, "--algo", "uldp-group", "--rounds", "2", "--record-q", "0.01", *FEW_ORDERS]
    private = [*head, "--algo", "uldp-avg-w", "--rounds", "2", "--user-q", "0.5", "--private-sampling"]
    private += FEW_ORDERS
    return {
        "--sampling-slots": private,
        "--group-k": group_k,
        "--rounds": user,
        "--user-q": user,
        "--silos": group_q,
        "--silo-sizes": group_batch,
        "--batch-size": group_batch,
        "--record-q": group_q,
        "--local-epochs": group_q,
    }


#: `uldp bench protocol` with a 512-bit test key, two users, two silos, two parameters: a run
#: takes a fraction of a second.
CHEAP_BENCH = ["bench", "protocol", "--key-bits", "512", "--test-keys", "--params", "2", "--users", "2"]
CHEAP_BENCH += ["--silos", "2"]
