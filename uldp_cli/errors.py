"""Turning the library's complaints about its input into Click usage errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from uldp.errors import UldpError


def one_line(message: object) -> str:
    """`message` with its lines joined, so `Error: ...` stays on one line."""
    return " ".join(str(message).split())


@contextmanager
def library_errors() -> Iterator[None]:
    """Re-raise a `uldp.UldpError` as a `click.UsageError` (exit status 2).

    The library raises `UldpError` subclasses exactly for input it cannot use (a parameter out
    of range, an unreachable budget, unusable data), which is the user's to fix, so they get
    Click's `Error: ...` line. Any other exception, a `ValueError` from numpy or torch included,
    is a bug and is left to `LazyGroup.main` (exit status 1). Works as a context manager or a
    decorator.
    """
    try:
        yield
    except UldpError as error:
        ctx = click.get_current_context(silent=True)
        raise click.UsageError(one_line(error) or type(error).__name__, ctx) from error
