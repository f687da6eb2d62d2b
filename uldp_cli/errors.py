"""Turning the library's complaints about its input into Click usage errors."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click


def one_line(message: object) -> str:
    """`message` with its lines joined, so `Error: ...` stays on one line."""
    return " ".join(str(message).split())


@contextmanager
def library_errors() -> Iterator[None]:
    """Re-raise a `ValueError` from the library as a `click.UsageError` (exit status 2).

    The accountants raise ValueError for input they cannot account (an unreachable target, an
    order list that is empty...). That is the user's input at fault, so they get Click's
    `Error: ...` line, not a traceback. Works as a context manager or a decorator.
    """
    try:
        yield
    except ValueError as error:
        ctx = click.get_current_context(silent=True)
        raise click.UsageError(one_line(error) or type(error).__name__, ctx) from error
