"""`uldp train` keeps the issue-12 contract (tests/cli/fuzz.py) for every value of every numeric
option: exit 0 or 2, never a traceback, exactly one `Error:` line, no non-finite number printed.

The numeric options are read from the Click command, so an option added later is fuzzed without
editing this file. Each runs on top of a cheap valid command line (heart-disease, 1 round, 8
users) with an algorithm that uses it (from the registry's `AlgorithmSpec.options`), through
every hostile value; then the neighbours of its own limits: the value just outside is refused by
name, the limit itself is accepted by the parser (parsed only: a run at --rounds 100000 is not
what this file should spend its time on).
"""

from __future__ import annotations

import math
import sys

import click
import pytest

from tests.cli.fuzz import HOSTILE_VALUES, assert_contract, run
from uldp.cli.commands import train as train_command
from uldp.cli.options import IntegerIn, Interval, PositiveInt
from uldp.trainers.algorithms import algorithm_names, get_algorithm

COMMAND = train_command.command
BASE = ("train", "--dataset", "heart-disease", "--rounds", "1", "--users", "8", "--format", "json")
# Options that need more than the base line to be used at all.
EXTRA = {
    "key_bits": ("--secure", "--test-keys"),
    "every": ("--format", "table"),
    # rpdp / unidp need per-record budgets to run at all
    "local_steps": ("--distribution", "three-levels"),
    "silo_q": ("--distribution", "three-levels"),
    # dp-fedavg-robust's Shamir threshold applies to its secure aggregation only
    "threshold": ("--secure",),
}


def _numeric(param: click.Parameter) -> bool:
    kind = param.type
    return isinstance(
        kind,
        (
            Interval,
            PositiveInt,
            IntegerIn,
            train_command.GroupK,
            click.types.IntParamType,
            click.types.FloatParamType,
        ),
    )


NUMERIC = sorted(p.name for p in COMMAND.params if isinstance(p, click.Option) and _numeric(p) and p.name)


def _option(name: str) -> click.Option:
    return next(p for p in COMMAND.params if p.name == name and isinstance(p, click.Option))


def _flag(name: str) -> str:
    return next(o for o in _option(name).opts if o.startswith("--"))


def _algo_for(name: str) -> str:
    """A private algorithm that reads option `name` (uldp-avg when any does)."""
    field = train_command.ALGORITHM_OPTIONS.get(name)
    if name == "key_bits":
        return "uldp-avg-w"
    for algo in ("uldp-avg", *algorithm_names()):
        spec = get_algorithm(algo)
        if spec.private and (field is None or field in spec.options):
            return algo
    raise AssertionError(f"no algorithm uses --{name}")


def _args(name: str, value: str) -> list[str]:
    base = list(BASE)
    extra = list(EXTRA.get(name, ()))
    if "--format" in extra:
        i = base.index("--format")
        del base[i : i + 2]
    return [*base, "--algo", _algo_for(name), *extra, _flag(name), value]


def _limits(name: str) -> tuple[list[str], list[str]]:
    """(values just outside the option's range, values at its edges) as the user would type them."""
    kind = _option(name).type
    if isinstance(kind, train_command.GroupK):
        kind = PositiveInt(train_command.MAX_GROUP_K)
    if isinstance(kind, Interval):
        low, high = kind.low, kind.high
        outside = [repr(math.nextafter(low, -math.inf)) if not kind.low_open else repr(low)]
        # Just above an open 0 is a subnormal, refused on purpose (options.Interval): the smallest
        # normal double is the first usable value there.
        first = sys.float_info.min if low == 0 else math.nextafter(low, math.inf)
        inside = [repr(first) if kind.low_open else repr(low)]
        if math.isfinite(high):
            outside.append(repr(math.nextafter(high, math.inf)) if not kind.high_open else repr(high))
            inside.append(repr(high) if not kind.high_open else repr(math.nextafter(high, -math.inf)))
        return outside, inside
    if isinstance(kind, PositiveInt):
        return ["0", str(kind.high + 1)], ["1", str(kind.high)]
    if isinstance(kind, IntegerIn):
        return [str(kind.low - 1), str(kind.high + 1)], [str(kind.low), str(kind.high)]
    raise AssertionError(f"--{name}: no limits known for {kind!r}")


def test_every_numeric_option_is_fuzzed() -> None:
    # The enumeration must not silently shrink: these are the numeric options today.
    expected = {"rounds", "sigma", "clip", "users", "silos", "labels_per_user", "seed", "noise_seed"}
    expected |= {"user_q", "group_k", "local_epochs", "lr", "global_lr", "batch_size", "local_batch_size"}
    expected |= {"delta", "key_bits", "every", "threads", "local_steps", "silo_q"}
    assert expected <= set(NUMERIC)


@pytest.mark.parametrize("name", NUMERIC)
def test_hostile_values(name: str) -> None:
    for value in HOSTILE_VALUES:
        args = _args(name, value)
        assert_contract(run(*args), args)


@pytest.mark.parametrize("name", NUMERIC)
def test_limits(name: str) -> None:
    outside, inside = _limits(name)
    for value in outside:
        args = _args(name, value)
        result = run(*args)
        assert_contract(result, args)
        assert result.exit_code == 2, f"--{name} {value} was accepted"
        assert _flag(name) in result.stderr, result.stderr
    for value in inside:
        args = _args(name, value)
        ctx = COMMAND.make_context("train", args[1:], resilient_parsing=False)
        assert ctx.params[name] is not None, f"--{name} {value} was not parsed"
