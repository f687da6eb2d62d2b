"""Options listed under headings in `--help` (Data, Model, Privacy, ...), with Click alone.

Click lists a command's options in one flat "Options" section; a command with dozens of them
(`uldp train`) is easier to read when they are grouped, as rich-click's option groups or
click-option-group do. `OptionGroup.of(heading, *decorators)` turns ordinary `click.option(...)`
decorators into the parameters listed under one heading; `grouped_command(name, *groups)` builds a
`GroupedCommand` whose parameters are the groups' own, in their order. Parameters outside every
group (`--help`, options added by a plain decorator) come last, under "Other options".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click
from click.formatting import term_len

#: Click's own widest first column of a definition list (`HelpFormatter.write_dl`).
COLUMN_MAX = 30


@dataclass(frozen=True)
class OptionGroup:
    """One heading of `--help` and the parameters listed under it, in order."""

    heading: str
    params: tuple[click.Parameter, ...]

    @classmethod
    def of(cls, heading: str, *options: Callable[[Any], Any]) -> OptionGroup:
        """The parameters that the `click.option(...)` decorators `options` declare, in the order
        given (as they would read stacked on a function, the first on top)."""

        def declared() -> None:
            """Collects the parameters; never called."""

        for option in reversed(options):  # the decorator nearest the function is applied first
            declared = option(declared)
        return cls(heading, tuple(click.command()(declared).params))


class GroupedCommand(click.Command):
    """A `click.Command` whose `--help` lists its options under its `option_groups`' headings."""

    def __init__(
        self,
        *args: Any,
        option_groups: Sequence[OptionGroup] = (),
        other_heading: str = "Other options",
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.option_groups = tuple(option_groups)
        self.other_heading = other_heading
        grouped = [id(p) for group in self.option_groups for p in group.params]
        self._grouped = frozenset(grouped)
        # A mistake here would hide an option from --help or list it twice: refuse it at import.
        if len(self._grouped) != len(grouped):
            raise ValueError(f"{self.name}: a parameter is in more than one option group")
        if not self._grouped <= {id(p) for p in self.params}:
            raise ValueError(f"{self.name}: an option group holds a parameter the command does not have")

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections = [(group.heading, _records(group.params, ctx)) for group in self.option_groups]
        others = [p for p in self.get_params(ctx) if id(p) not in self._grouped]
        sections.append((self.other_heading, _records(others, ctx)))
        # One first column for every section, as Click's single list has: each definition list
        # sizes its own, which would leave the headings' descriptions starting at different places.
        width = min(max((term_len(t) for _, rows in sections for t, _ in rows), default=0), COLUMN_MAX)
        for heading, rows in sections:
            if rows:
                with formatter.section(heading):
                    formatter.write_dl([(term.ljust(width), text) for term, text in rows], col_max=COLUMN_MAX)


def _records(params: Sequence[click.Parameter], ctx: click.Context) -> list[tuple[str, str]]:
    """The help rows of the shown options among `params` (hidden ones have none)."""
    rows = []
    for param in params:
        record = None if isinstance(param, click.Argument) else param.get_help_record(ctx)
        if record is not None:
            rows.append(record)
    return rows


def grouped_command(
    name: str, *groups: OptionGroup, **attrs: Any
) -> Callable[[Callable[..., Any]], GroupedCommand]:
    """`click.command(name)` taking its options from `groups`, listed under their headings; a
    decorator such as `@config_option` below it adds one more, under "Other options"."""

    def decorator(f: Callable[..., Any]) -> GroupedCommand:
        params = [p for group in groups for p in group.params]
        return click.command(name, cls=GroupedCommand, params=params, option_groups=groups, **attrs)(f)

    return decorator
