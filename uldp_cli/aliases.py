"""Old option spellings kept as hidden aliases (docs/cli.md, the option vocabulary).

An option declared with `cls=AliasedOption, aliases=("--z",)` accepts `--z` on the command line
and `z:` in a `--config` file exactly as it accepts its own name, but `--help` shows only the
current name, and every use of the old one prints one warning line to stderr naming the new
spelling. The alias is parsed under a separate destination, so the option can tell which
spelling the user typed and refuse both at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

_MARK = "\0alias:"


def warn_old_spelling(old: str, new: str) -> None:
    """One line on stderr: `old` still works, `new` is the spelling to use."""
    click.echo(f"Warning: {old} is an old spelling of {new}; it still works, but use {new}.", err=True)


class AliasedOption(click.Option):
    """A `click.Option` that also answers to hidden old spellings (`aliases`), with a warning."""

    def __init__(
        self, param_decls: Sequence[str] | None = None, *, aliases: Sequence[str] = (), **attrs: Any
    ):
        super().__init__(param_decls, **attrs)
        for alias in aliases:
            if not alias.startswith("--"):
                raise ValueError(f"alias {alias!r} of {self.name} must be a long option (--name)")
        self.aliases: tuple[str, ...] = tuple(aliases)

    @property
    def new_spelling(self) -> str:
        """The option's current long name, as `--help` shows it."""
        return next(opt for opt in self.opts if opt.startswith("--"))

    def _alias_dest(self, alias: str) -> str:
        return f"{_MARK}{self.name}:{alias}"

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        # Register each alias exactly as click registers the option itself (same action, nargs,
        # flag constant), under a destination of its own.
        saved = self.opts, self.secondary_opts, self.name
        # Each destination is named from the option's own name, before the loop renames it.
        dests = [self._alias_dest(alias) for alias in self.aliases]
        try:
            for alias, dest in zip(self.aliases, dests, strict=True):
                self.opts, self.secondary_opts, self.name = [alias], [], dest
                super().add_to_parser(parser, ctx)
        finally:
            self.opts, self.secondary_opts, self.name = saved

    def handle_parse_result(self, ctx: click.Context, opts: Mapping[str, Any], args: list[str]) -> Any:
        given = {
            alias: opts[self._alias_dest(alias)] for alias in self.aliases if self._alias_dest(alias) in opts
        }
        if given:
            opts = dict(opts)
            for alias in given:
                del opts[self._alias_dest(alias)]
            spellings = [*given, *([self.new_spelling] if self.name in opts else [])]
            if len(spellings) > 1:
                raise click.UsageError(f"give {' or '.join(spellings)}, not both (the same option)", ctx)
            alias, value = next(iter(given.items()))
            opts[str(self.name)] = value
            try:
                converted = super().handle_parse_result(ctx, opts, args)
            except click.BadParameter as error:
                error.param_hint = f"'{alias}' (old spelling of '{self.new_spelling}')"
                raise
            # After the value is accepted: a refused value gets its one Error line and nothing else.
            warn_old_spelling(alias, self.new_spelling)
            return converted
        return super().handle_parse_result(ctx, opts, args)


def aliases_of(param: click.Parameter) -> tuple[str, ...]:
    """The hidden old spellings of `param` (none for an ordinary option)."""
    return getattr(param, "aliases", ())
