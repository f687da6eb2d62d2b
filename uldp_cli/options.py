"""Click parameter types and option decorators shared by the subcommands.

Every rejection goes through `ParamType.fail`, so the user sees Click's one line
`Error: Invalid value for '--q': 1.5 is not in (0, 1]` and exit status 2.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, TypeVar

import click

from uldp.cli.files import writes_through
from uldp.cli.render import FORMATS

F = TypeVar("F", bound=Callable[..., Any])


def _shown(value: Any) -> str:
    """The value as the user wrote it: their string verbatim, anything else (from YAML) by repr."""
    return value if isinstance(value, str) else repr(value)


class Interval(click.ParamType):
    """A float in an interval; each end open or closed. NaN is never inside."""

    name = "float"

    def __init__(self, low: float, high: float, *, low_open: bool = True, high_open: bool = True) -> None:
        self.low, self.high = low, high
        self.low_open, self.high_open = low_open, high_open

    def describe(self) -> str:
        """The interval in the usual notation, e.g. `(0, 1]`."""
        left = "(" if self.low_open else "["
        right = ")" if self.high_open else "]"
        return f"{left}{self.low:g}, {self.high:g}{right}"

    def contains(self, number: float) -> bool:
        above = number > self.low if self.low_open else number >= self.low
        below = number < self.high if self.high_open else number <= self.high
        return above and below

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        # YAML gives real bools for `yes`/`true`; float(True) == 1.0 would slip through.
        if isinstance(value, bool):
            self.fail(f"{_shown(value)} is not a number.", param, ctx)
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):  # OverflowError: a YAML int past 1e308
            self.fail(f"{_shown(value)} is not a number.", param, ctx)
        if not self.contains(number):
            self.fail(f"{_shown(value)} is not in {self.describe()}", param, ctx)
        if number != 0 and abs(number) < sys.float_info.min:
            # Subnormal doubles lose precision and turn into 0 or inf in the first product.
            self.fail(
                f"{_shown(value)} is too small to compute with (the smallest usable magnitude is "
                f"{sys.float_info.min:.1e})",
                param,
                ctx,
            )
        return number

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.describe()}"


class PositiveFloat(Interval):
    """A finite float > 0: a noise multiplier, an epsilon, a clipping bound; `high` caps it where
    the maths stops being meaningful or representable (closed, so the cap itself is allowed)."""

    def __init__(self, high: float = math.inf) -> None:
        super().__init__(0.0, high, high_open=math.isinf(high))


#: --sigma (and dropout's z): a noise multiplier in [1e-6, 1e6]. Below, epsilon is beyond any
#: meaningful value (already 5e16 at 1e-8) and at about 1e-150 the accountants' 1 / (2 sigma^2)
#: times an order is infinite; above, the noise is a million times the signal, epsilon is ~0, and
#: at 1.3e154 sigma**2 overflows. Both ends are far outside any run worth accounting.
SIGMA_MIN, SIGMA_MAX = 1e-6, 1e6
#: --epsilon as a budget: [1e-6, 1e6]. Smaller budgets need a sigma beyond SIGMA_MAX; larger
#: ones bound nothing (e^epsilon overflows long before 1e6).
EPSILON_MIN, EPSILON_MAX = 1e-6, 1e6
#: A count of releases (steps, rounds): at least one (zero releases spend nothing and calibrate
#: nothing) and at most 1e12, far beyond any run (the PLD and PRV accountants stop earlier).
COUNT_MAX = 10**12


class NoiseMultiplier(Interval):
    """--sigma: a float in [SIGMA_MIN, SIGMA_MAX]."""

    def __init__(self) -> None:
        super().__init__(SIGMA_MIN, SIGMA_MAX, low_open=False, high_open=False)


class EpsilonBudget(Interval):
    """--epsilon as a budget: a float in [EPSILON_MIN, EPSILON_MAX]."""

    def __init__(self) -> None:
        super().__init__(EPSILON_MIN, EPSILON_MAX, low_open=False, high_open=False)


class Probability(Interval):
    """A float in (0, 1]: a sampling rate, where 1 means every user or record."""

    def __init__(self) -> None:
        super().__init__(0.0, 1.0, high_open=False)


class OpenUnitInterval(Interval):
    """A float in (0, 1): a delta, which is meaningless at 0 and vacuous at 1."""

    def __init__(self) -> None:
        super().__init__(0.0, 1.0)


#: The largest integer any option takes unless it says less: a signed 64-bit integer, which is what
#: numpy and torch store counts and seeds in ("Overflow when unpacking long long" above it).
INT64_MAX = 2**63 - 1


class PositiveInt(click.ParamType):
    """An integer in [1, high]: a step count, a group size k, a number of silos."""

    name = "integer"

    def __init__(self, high: int = INT64_MAX) -> None:
        self.high = high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        number = integral(value)
        if number is None:
            self.fail(f"{_shown(value)} is not an integer.", param, ctx)
        if number < 1:
            self.fail(f"{_shown(value)} is not a positive integer.", param, ctx)
        if number > self.high:
            self.fail(f"{_shown(value)} is above the largest supported value, {self.high}.", param, ctx)
        return number


#: Beyond every integer option's range (int64): an integral value past it is clamped here, so
#: `1e999999999` is refused by the range check without building a billion-digit int.
_INTEGRAL_CAP = 10**30


def integral(value: Any) -> int | None:
    """`value` as an int when it is one exactly, else None.

    Accepts an int, an integral float (YAML's 4.0) and a string of an integer, also in
    exponent form (`1e9`, `2.5e3` = 2500, as people write step counts); refuses a bool (YAML's
    `yes`), a fraction (`1.5` is never truncated), NaN and infinities. A value of 1e30 or more
    in magnitude comes back as +-1e30: past every range an option allows, and cheap to compare.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        pass
    if not isinstance(value, str):
        return None
    try:
        exact = Decimal(value.strip())
    except InvalidOperation:
        return None
    if not exact.is_finite():
        return None
    if exact.adjusted() >= 30:  # the decimal exponent alone: nothing here can overflow
        return _INTEGRAL_CAP if exact > 0 else -_INTEGRAL_CAP
    if exact != exact.to_integral_value():
        return None
    return int(exact)


#: --seed of every command: numpy's legacy seeds and torch.manual_seed take 32 bits without surprise.
SEED_MAX = 2**32 - 1


class IntegerIn(click.ParamType):
    """An integer in [low, high] (a seed, key bits): no float truncation, no int64 overflow."""

    name = "integer"

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        number = integral(value)
        if number is None:
            self.fail(f"{_shown(value)} is not an integer.", param, ctx)
        if not self.low <= number <= self.high:
            self.fail(f"{_shown(value)} is not in [{self.low}, {self.high}]", param, ctx)
        return number


def given_source(ctx: click.Context, name: str) -> click.core.ParameterSource | None:
    """Where the user gave parameter `name` (command line, environment, a --config file), or None
    for a default: the commands refuse a value the run would ignore only when the user set it."""
    source = ctx.get_parameter_source(name)
    return None if source in (None, click.core.ParameterSource.DEFAULT) else source


class OutputFile(click.Path):
    """A file the command will write: refused before any work when its directory is missing or
    not writable (the write itself is atomic, uldp.cli.files)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, writable=True, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        if not os.fsdecode(value).strip():
            self.fail("an empty path; give a file name", param, ctx)
        path = Path(os.fsdecode(super().convert(value, param, ctx)))  # path_type=Path: a Path already
        try:
            if path.is_dir():
                self.fail(f"{path} is a directory; give a file name", param, ctx)
            # A character device or a FIFO (/dev/null, /dev/stdout) is written through, not
            # replaced (uldp.trainers.atomic): its folder need not take new files.
            through = writes_through(path)
            directory = path.resolve().parent
            if not through and (not directory.is_dir() or not can_create_in(directory)):
                self.fail(f"{path}: directory {directory} does not exist or is not writable", param, ctx)
        except (OSError, RuntimeError) as error:  # a name too long, a symlink loop (issue 32)
            reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            self.fail(f"{path}: {reason}", param, ctx)
        return path


def can_create_in(directory: Path) -> bool:
    """Whether a file can really be created in `directory`: os.access says yes to root even on
    read-only or virtual file systems (/proc), where the atomic write would fail after the work."""
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".uldp-probe-"):
            return True
    except OSError:
        return False


class AlgorithmChoice(click.Choice):
    """--algo: a name from the algorithm registry (`uldp.trainers.algorithms`).

    The choices are read from the registry whenever they are needed, not copied when the option
    is declared, so an algorithm registered later (a plug-in, a test) is offered too.
    `accounted`: only the algorithms with a plan, for account and calibrate (`plan_names`: not
    the non-private `default`, nor those accounted per record, per round or per subject; a `-w`
    variant prints its base algorithm's rows).
    """

    def __init__(self, *, accounted: bool = False) -> None:
        self.accounted = accounted
        super().__init__(())

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        from uldp.trainers.algorithms import algorithm_names, plan_names

        return plan_names() if self.accounted else algorithm_names()

    @choices.setter
    def choices(self, value: Any) -> None:
        pass  # the registry is the only source of the choices

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from uldp.trainers.algorithms import algorithm_names
        from uldp.trainers.algorithms.registry import unaccounted_reason

        # A registered algorithm that account / calibrate do not take: say what accounts it.
        if self.accounted and value in algorithm_names() and value not in self.choices:
            self.fail(unaccounted_reason(value), param, ctx)
        return super().convert(value, param, ctx)

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[click.shell_completion.CompletionItem]:
        from click.shell_completion import CompletionItem

        from uldp.trainers.algorithms import get_algorithm

        return [
            CompletionItem(name, help=get_algorithm(name).help)
            for name in self.choices
            if name.startswith(incomplete)
        ]


class AlgorithmOption(click.Option):
    """--algo, whose help ends with each offered algorithm's own help, read from the registry."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from uldp.trainers.algorithms import get_algorithm

        record = super().get_help_record(ctx)
        choice = self.type.item_type if isinstance(self.type, CommaList) else self.type
        if record is None or not isinstance(choice, AlgorithmChoice):
            return record
        listed = "; ".join(f"{name}: {get_algorithm(name).help.rstrip('.')}" for name in choice.choices)
        text, extra = record[1], ""
        if text.endswith("]") and "  [" in text:  # keep click's "[required]" / "[default: ...]" last
            cut = text.rindex("  [")
            text, extra = text[:cut], text[cut:]
        return record[0], f"{text} {listed}.{extra}"


class CommaList(click.ParamType):
    """One occurrence of a repeatable option: `1,2` -> [1, 2], each item checked by `item_type`.

    Also accepts a list or a single value, as a YAML config gives them. Use it through
    `comma_list_option`, which repeats the option and flattens the occurrences.
    """

    def __init__(self, item_type: Any) -> None:
        self.item_type: click.ParamType = click.types.convert_type(item_type)
        self.name = f"{self.item_type.name} list"

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        item = self.item_type.get_metavar(param, ctx)
        if item is None:
            # click.IntRange is named "integer range"; the range shows in the help text anyway.
            item = self.item_type.name.removesuffix(" range").upper()
        return f"{item},..."

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> list[Any]:
        if isinstance(value, str):
            items: Sequence[Any] = [item.strip() for item in value.split(",")]
            if "" in items:
                self.fail(f"{value!r} has an empty item.", param, ctx)
        elif isinstance(value, (list, tuple)):
            items = value
        else:
            items = [value]
        if any(isinstance(item, (list, tuple, dict)) for item in items):
            self.fail(f"{_shown(value)} is nested; give a flat list.", param, ctx)
        return [self.item_type.convert(item, param, ctx) for item in items]


def comma_list_option(*param_decls: str, item_type: Any, **attrs: Any) -> Callable[[F], F]:
    """An option taking comma lists and repeats: `--k 1,2 --k 4` gives [1, 2, 4].

    `default` may be a list (`default=[1]`); a `callback` in `attrs` receives the flat list.
    """
    callback = attrs.pop("callback", None)
    if isinstance(attrs.get("default"), str):
        attrs["default"] = [attrs["default"]]

    def flatten(ctx: click.Context, param: click.Parameter, value: Sequence[list[Any]]) -> list:
        flat = [item for occurrence in value or () for item in occurrence]
        return callback(ctx, param, flat) if callback is not None else flat

    return click.option(*param_decls, type=CommaList(item_type), multiple=True, callback=flatten, **attrs)


def format_option(f: F) -> F:
    """`--format table|json|csv`, passed to the command as `fmt` (for `render.emit`)."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="table for people; json (one document) or csv (header and rows) for programs.",
    )(f)


#: --delta for every command that prints an epsilon (default 1e-5, as the papers use).
delta_option = click.option(
    "--delta", type=OpenUnitInterval(), default=1e-5, show_default=True, help="Target delta, in (0, 1)."
)


def zero_epsilon_note(delta: float) -> str:
    """What an epsilon of 0 means: `--delta` is large enough that the output distributions of
    neighbouring data sets are within total variation delta, with no privacy loss left to bound.

    Valid (every accountant gives 0 only when (0, delta)-DP holds) but easy to misread as
    perfect privacy, so every command that prints such an epsilon says this next to it
    (issue 32); the delta stays allowed, as in dp-accounting, which also answers 0 there.
    """
    return (
        f"epsilon 0 at delta {delta:g}: so large a delta holds without any privacy loss (the "
        "outputs on neighbouring data differ by at most delta in total variation), which promises "
        "little; take delta well below 1/(number of records or users)"
    )
