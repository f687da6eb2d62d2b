"""Turning the library's complaints about its input, and a missing optional extra, into Click
usage errors (one `Error:` line, exit status 2)."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType, TracebackType

import click

from uldp.errors import ProtocolError, UldpError

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


class PartyFailed(click.ClickException):
    """Another party of the run failed or sent what fails its checks (a `uldp.ProtocolError`): one
    `Error:` line and exit status 2 like bad input, but no usage text, as the command line was
    not at fault (issue 32: a dead Flower SuperNode was shown with Click's usage lines)."""

    exit_code = 2


@contextmanager
def library_errors() -> Iterator[None]:
    """Re-raise a `uldp.UldpError` as a `click.UsageError` (exit status 2), a `ProtocolError`
    as `PartyFailed` (the same status, no usage text).

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
        if isinstance(error, ProtocolError):
            raise PartyFailed(message) from error
        raise click.UsageError(message, ctx) from error


#: What a user can fix about a path they gave: a name too long, a missing or unwritable folder, a
#: full or read-only disk, a folder where a file belongs (issue 32: these were "internal error").
USER_ERRNOS = frozenset(
    getattr(errno, name)
    for name in (
        "ENAMETOOLONG", "ENOENT", "ENOTDIR", "EISDIR", "EACCES", "EPERM", "ENOSPC", "EDQUOT",
        "EROFS", "ELOOP", "ENXIO", "EFBIG", "EINVAL", "EEXIST", "EXDEV", "ETXTBSY", "EBUSY",
    )
    if hasattr(errno, name)
)  # fmt: skip


def file_error_line(error: OSError) -> str | None:
    """The one-line message for an `OSError` about a path one of the command's options gave,
    naming the option and the path; None when it is not about such a path (then it is a bug).

    The option is found by its value: the deepest Click context of the failed command (in the
    traceback) holds the parsed options, and the failing path is an option's value or lies
    under it (`--checkpoint DIR`'s files, `--metrics FILE`'s `FILE.run.json`).
    """
    if error.errno not in USER_ERRNOS or error.filename is None:
        return None
    try:
        failed = os.fspath(error.filename)
    except TypeError:
        return None
    if not isinstance(failed, str):
        return None
    best: tuple[int, str] | None = None
    for param, value in _option_values(error.__traceback__):
        for given in value if isinstance(value, (tuple, list)) else (value,):
            if not isinstance(given, (str, os.PathLike)):
                continue
            path = os.fspath(given)
            if not isinstance(path, str) or not path or not _under(failed, path):
                continue
            if best is None or len(path) > best[0]:
                best = (len(path), param)
    if best is None:
        return None
    reason = error.strerror or type(error).__name__
    return f"{best[1]} {failed!r}: {reason}"


def _under(failed: str, given: str) -> bool:
    """`failed` is `given`, a file in folder `given`, or a file named after it (`FILE.run.json`)."""
    return failed == given or failed.startswith((given.rstrip(os.sep) + os.sep, given + "."))


def _option_values(trace: TracebackType | None) -> list[tuple[str, object]]:
    """(--option, value) of every option of the deepest Click context in `trace`, and of the
    option whose value was being converted when it failed (a parameter type's `convert`)."""
    context: click.Context | None = None
    values: list[tuple[str, object]] = []
    while trace is not None:
        local = trace.tb_frame.f_locals
        for name in ("sub_ctx", "ctx"):
            candidate = local.get(name)
            if isinstance(candidate, click.Context) and candidate.params:
                context = candidate
        if isinstance(local.get("param"), click.Parameter) and "value" in local:
            values.append((_option_name(local["param"]), local["value"]))
        trace = trace.tb_next
    if context is None:
        return values
    for param in context.command.params:
        if param.name in context.params:
            values.append((_option_name(param), context.params[param.name]))
    return values


def _option_name(param: click.Parameter) -> str:
    return next((opt for opt in param.opts if opt.startswith("--")), str(param.name))
