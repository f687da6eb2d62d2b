"""`uldp bench protocol` keeps the issue-12 contract for every value of every numeric option."""

from __future__ import annotations

import click
import pytest

from uldp.cli.options import PositiveInt

from .fuzz_options import CHEAP_BENCH, check_every_value, command_named, numeric_options

COMMAND = command_named("bench", "protocol")
BASE = CHEAP_BENCH
#: The cheap command line each numeric option is fuzzed on: one where the option is used.
BASES = {
    "--params": BASE,
    "--users": BASE,
    "--silos": BASE,
    "--key-bits": BASE,
    "--rounds": BASE,
    "--precision": BASE,
    "--n-max": BASE,
    "--workers": BASE,
    # Private sampling's options (issue 36) are read only with the flag.
    "--sampling-slots": [*BASE, "--private-sampling"],
    "--user-q": [*BASE, "--private-sampling"],
    "--audit-rate": [*BASE, "--private-sampling"],
}
#: Options whose own ceiling is a valid but long benchmark (|U| = 1e4, a 16384-bit key, 1024
#: processes): that value is checked by the option's type, not run; the value above it is run.
LONG_AT_CEILING = {"--params", "--users", "--silos", "--key-bits", "--rounds", "--workers"}


def _param(option: str) -> click.Option:
    return next(p for p in COMMAND.params if isinstance(p, click.Option) and p.opts[0] == option)


def _ceiling(option: str) -> str | None:
    kind = _param(option).type
    kind = getattr(kind, "item_type", kind)
    return str(kind.high) if isinstance(kind, PositiveInt) and option in LONG_AT_CEILING else None


@pytest.mark.parametrize("option", numeric_options(COMMAND))
def test_every_value_of_every_numeric_option_keeps_the_contract(option: str) -> None:
    ceiling = _ceiling(option)
    if ceiling is not None:
        # A run at the ceiling would be a long benchmark: check that the value parses instead.
        assert _param(option).type.convert(ceiling, None, None) in (int(ceiling), [int(ceiling)])
    check_every_value(COMMAND, BASES, option, skip=frozenset([ceiling] if ceiling else []))
