"""Turning the library's complaints about its input, and a missing optional extra, into Click
usage errors (one `Error:` line, exit status 2)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType

import click

from uldp.errors import UldpError

#: Top-level module -> the pyproject extra that installs it (`[project.optional-dependencies]`;
#: tests/cli/test_missing_extras.py keeps the two in step). The distribution and import names
#: coincide for all of them.
EXTRA_OF_MODULE: Mapping[str, str] = MappingProxyType(
    {
        "torch": "train",
        "phe": "crypto",
        "gmpy2": "crypto",
        "cryptography": "crypto",
        "mlxtend": "data",
        "lifelines": "data",
        "pandas": "data",
        "pyarrow": "data",
        "flwr": "flower",
        "ray": "flower",
    }
)
# A library message's own hint, `pip install 'uldp[data]'`, which works only from an index.
_INDEX_HINT = re.compile(r"pip install 'uldp\[(\w+)\]'")


def install_hint(extra: str) -> str:
    """How to install `extra`, from a checkout (editable) and from a package index."""
    hint = f"pip install -e '.[{extra}]' in a checkout, or pip install 'uldp[{extra}]'"
    if extra == "train":
        # Without it pip resolves torch's CUDA build, gigabytes a CPU-only user never needs.
        hint += " (install the CPU-only torch wheel first, as README.md's set-up does)"
    return hint


def missing_extra(error: BaseException | None) -> str | None:
    """The extra whose absence raised `error` (a ModuleNotFoundError of a known module), else None."""
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return None
    return EXTRA_OF_MODULE.get(error.name.split(".")[0])


class MissingExtra(click.UsageError):
    """A command needs an optional extra that is not installed: say which, and how to install it."""

    def __init__(self, command: str, error: ModuleNotFoundError, extra: str) -> None:
        module = str(error.name).split(".")[0]
        super().__init__(
            f"{command} needs the '{extra}' extra ({module} is not installed): {install_hint(extra)}"
        )


def with_install_hints(message: str, error: BaseException) -> str:
    """`message` with every `pip install 'uldp[x]'` hint also giving the checkout's install, and
    with the install of the extra added when `error` was raised while a known module was missing."""
    if _INDEX_HINT.search(message):
        return _INDEX_HINT.sub(lambda match: install_hint(match.group(1)), message)
    extra = missing_extra(error.__cause__ or error.__context__)
    if extra is not None:
        return f"{message}; install the '{extra}' extra: {install_hint(extra)}"
    return message


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
        message = with_install_hints(one_line(error) or type(error).__name__, error)
        raise click.UsageError(message, ctx) from error
