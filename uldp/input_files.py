"""Opening a file the user named as input: a regular file of bounded size, or a one-line refusal.

Every reader of a user-given file (`--config`, `--epsilon-csv`, `--holdings`, `--user-budgets`,
`--dropout-schedule`, `--opacus`, `--data-path`, `--run`, a checkpoint) opens it here (issue 32):

* the path is followed through its links and must end at a regular file: a FIFO blocked for
  ever, `/dev/zero` was read until memory ran out, and a folder gave a traceback. The file is
  opened without blocking and checked on the open descriptor (`fstat`), so a path swapped for a
  FIFO between a check and the open cannot block either;
* its size must be within a cap for its kind (`CAPS`, docs/cli.md "Files"), checked before any
  byte is read, and `read_bytes`/`read_text` read at most cap + 1 bytes, so a file that grows
  while it is read is refused too.

A refusal is a `DataError` naming the option and the path (the CLI's one `Error:` line, exit
status 2). This module imports nothing of ours but the error types, so every layer may use it.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Mapping
from types import MappingProxyType
from typing import BinaryIO

from .errors import DataError

MiB = 1 << 20
GiB = 1 << 30

#: The largest file of each kind that is read. Generous: each is far above any real input of
#: its kind, and only guards against reading a disk image or a runaway file into memory.
CAPS: Mapping[str, int] = MappingProxyType(
    {
        "config": 1 * MiB,  # a YAML file of option values: a few hundred bytes in practice
        "json": 256 * MiB,  # an Opacus state, a dp-accounting event, a run record
        "table": 8 * GiB,  # CSV or Parquet data and budget tables (creditcard.csv is 150 MB)
        "checkpoint": 16 * GiB,  # a torch.save checkpoint: the model's weights and the run's state
    }
)


_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # POSIX; Windows has no FIFOs to open


class InputFileError(DataError):
    """A user-given input that is not a readable regular file within its cap."""

    def __init__(self, option: str | None, path: str | os.PathLike[str], reason: str) -> None:
        self.option = option
        self.path = os.fspath(path)
        self.reason = reason
        where = f"{option} {self.path}" if option else self.path
        super().__init__(f"{where}: {reason}")


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _unreadable(error: OSError) -> str:
    if isinstance(error, FileNotFoundError):
        return "no such file"
    return f"cannot read it ({error.strerror or error})"


def _size_text(size: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


def check_status(
    status: os.stat_result, path: str | os.PathLike[str], option: str | None, cap: int | None
) -> None:
    """Refuse what `status` (of `path`, through its links) says is not a regular file within `cap`."""
    if not stat.S_ISREG(status.st_mode):
        raise InputFileError(option, path, f"is {_kind_of(status.st_mode)}; expected a regular file")
    if cap is not None and status.st_size > cap:
        raise InputFileError(
            option,
            path,
            f"is {_size_text(status.st_size)}, over the {_size_text(cap)} read for this kind of file",
        )


def check_input(path: str | os.PathLike[str], option: str | None = None, *, cap: int | None = None) -> int:
    """Refuse `path` unless it leads to a regular file within `cap` bytes; return its size.

    For readers that open the file themselves by name (pandas, pyarrow, torch): the check and
    their open are two steps, but a file swapped between them is the user's own doing.
    """
    try:
        status = os.stat(path)
    except OSError as error:
        raise InputFileError(option, path, _unreadable(error)) from error
    check_status(status, path, option, cap)
    return status.st_size


def open_input(
    path: str | os.PathLike[str], option: str | None = None, *, cap: int | None = None
) -> BinaryIO:
    """`path` opened for reading in binary mode, once it is known to be a regular file within `cap`."""
    try:
        # O_NONBLOCK: opening a FIFO without a writer would block; the check below refuses it.
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | getattr(os, "O_BINARY", 0))
    except OSError as error:
        raise InputFileError(option, path, _unreadable(error)) from error
    try:
        check_status(os.fstat(fd), path, option, cap)
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_bytes(path: str | os.PathLike[str], option: str | None = None, *, cap: int) -> bytes:
    """The content of `path` (a regular file of at most `cap` bytes)."""
    with open_input(path, option, cap=cap) as handle:
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise InputFileError(option, path, f"grew past the {_size_text(cap)} read for this kind of file")
    return data


def read_text(
    path: str | os.PathLike[str], option: str | None = None, *, cap: int, encoding: str = "utf-8-sig"
) -> str:
    """The text of `path`, decoded with `encoding` (UTF-8, a byte-order mark dropped, unless told).

    A UnicodeDecodeError is left to the caller, which knows what the file should hold.
    """
    return read_bytes(path, option, cap=cap).decode(encoding)


def open_text(
    path: str | os.PathLike[str],
    option: str | None = None,
    *,
    cap: int,
    encoding: str = "utf-8-sig",
    newline: str | None = "",
) -> io.TextIOWrapper:
    """`path` opened as text for a streaming reader (csv), after the same checks as `open_input`."""
    return io.TextIOWrapper(open_input(path, option, cap=cap), encoding=encoding, newline=newline)


__all__ = [
    "CAPS",
    "GiB",
    "InputFileError",
    "MiB",
    "check_input",
    "open_input",
    "open_text",
    "read_bytes",
    "read_text",
]
