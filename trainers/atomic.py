"""Writing files so that a reader never sees half of one, and a killed writer leaves no debris.

Every output of `uldp` (tables, plots, metrics, checkpoints) is written to a temporary file in
the target's directory, fsynced, and renamed over the target: a crash leaves the old file or the
new, whole. The temporary file is named `.{target}.{pid}.{random}.tmp`, so that a writer killed
by SIGKILL (which no handler sees) can be recognised later: the next write to the same target
removes such files whose writer process is gone, or which are older than `STALE_AGE_S` (a pid
can be reused, and a file from another host names a pid that means nothing here).

A target that is not a regular file is never replaced (issue 32): a symlink (a chain of them,
or a dangling one) is followed, and its final target is replaced in the target's own folder, the
link left as it was; a character device (`/dev/null`, a terminal) or a FIFO is written through,
opened as it is, never renamed over or chmod-ed; a FIFO with no reader is an error at once
(opening it blocks otherwise); a block device, a socket or a folder is refused.

This module is plain Python (no torch, no click): the trainers write metrics and checkpoints
with it, and the CLI's `uldp.cli.files` builds on it for every command's outputs.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

#: A temporary file older than this is stale whatever its pid says: no write of ours takes a day.
STALE_AGE_S = 24 * 3600.0


def temp_prefix(target: Path) -> str:
    """The prefix of this process's temporary files for `target`: `.name.PID.`."""
    return f".{target.name}.{os.getpid()}."


def _temp_pattern(target: Path) -> re.Pattern[str]:
    # 8 characters of [a-z0-9_] (hex now, mkstemp's before); older versions wrote no pid part.
    return re.compile(rf"^\.{re.escape(target.name)}\.(?:(\d+)\.)?[a-z0-9_]{{8}}\.tmp$")


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists on this machine (signal 0 checks without sending)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by another user
    except OverflowError:
        return False
    return True


def remove_stale_temps(target: str | os.PathLike[str], *, now: float | None = None) -> list[Path]:
    """Remove the temporary files a killed writer left next to `target`; return those removed.

    Only files of our own naming for this very target are considered (`.name.PID.XXXXXXXX.tmp`),
    and only those whose pid is not a live process, or (any of them) older than `STALE_AGE_S`.
    A file that vanishes meanwhile (another run cleaning up) is not an error.
    """
    target = Path(target)
    pattern = _temp_pattern(target)
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > STALE_AGE_S
        except FileNotFoundError:
            continue
        pid = int(match.group(1)) if match.group(1) else None
        if pid == os.getpid() and not old:
            continue  # ours, in flight (a write in another thread)
        if old or pid is None or not pid_alive(pid):
            try:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
            except FileNotFoundError:
                pass
            except OSError:
                continue  # not ours to remove after all (permissions): leave it
    return removed


def atomic_write(
    path: str | os.PathLike[str], write: Callable[[BinaryIO], object], *, mode: int | None = None
) -> None:
    """Replace `path` by what `write(file)` writes, in one rename, fsynced (file and directory).

    A crash, Ctrl-C, SIGTERM or SIGHUP (uldp.cli.signals turns the last two into exceptions)
    leaves the old file or the new, whole, and no temporary file; a SIGKILL leaves one, which the
    next write to `path` removes (`remove_stale_temps`). The new file gets `mode`, else the mode
    of the file it replaces, else the usual mode of a new file (0666 less the umask).

    A symlink's final target is replaced (in its own folder), the link kept; a character device
    or a FIFO is written through and kept (a FIFO no process reads: OSError ENXIO at once); a
    block device, a socket or a folder is refused with OSError. An OSError names `path`.
    """
    try:
        _write(Path(path), write, mode)
    except OSError as error:
        if error.errno is not None and error.filename != os.fspath(path):
            # Name the path the user gave, not our temporary file or the link's target: a caller
            # (the CLI) tells which option it was by it.
            raise type(error)(error.errno, error.strerror or str(error), os.fspath(path)) from error
        raise


def _write(target: Path, write: Callable[[BinaryIO], object], mode: int | None) -> None:
    try:
        status: os.stat_result | None = os.stat(target)  # through any links
    except FileNotFoundError:
        status = None  # a new file, or a dangling link: replaced at the link's end below
    if status is not None and (not stat.S_ISREG(status.st_mode) or _opened_by_shell(target)):
        # A device, a FIFO (a folder: refused there), or the file a shell opened for us behind
        # /dev/stdout or /dev/fd/N (/proc/self/fd/N): it receives the bytes, never replaced.
        _write_through(target, status, write)
        return
    target = Path(os.path.realpath(target))
    directory = target.parent
    remove_stale_temps(target)
    mode = _mode_for(target) if mode is None else mode
    # The temporary file's name is chosen before the file is made, inside the `try`: a signal
    # (Ctrl-C, SIGTERM, SIGHUP) raised the moment the file exists still finds the name to remove.
    # (tempfile.mkstemp would leave it: its file exists before it returns the name.)
    temp_name: str | None = None
    try:
        while True:
            temp_name = f"{directory / temp_prefix(target)}{secrets.token_hex(4)}.tmp"
            try:
                fd = os.open(
                    temp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600
                )
                break
            except FileExistsError:  # a name of this process's, taken: draw another
                continue
        with os.fdopen(fd, "wb") as temp:
            write(temp)
            temp.flush()
            os.fsync(temp.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, target)
    except BaseException:
        # Also on KeyboardInterrupt and the signal exits: never leave a stray temporary file.
        if temp_name is not None:
            Path(temp_name).unlink(missing_ok=True)
        raise
    fsync_directory(directory)


def writes_through(path: str | os.PathLike[str]) -> bool:
    """Whether `atomic_write(path)` writes into what is there (a character device, a FIFO, the
    shell's file behind /dev/stdout) instead of replacing it: then its folder need take no file."""
    try:
        kind = os.stat(path).st_mode
    except OSError:
        return False
    if stat.S_ISCHR(kind) or stat.S_ISFIFO(kind):
        return True
    return stat.S_ISREG(kind) and _opened_by_shell(Path(path))


def _opened_by_shell(target: Path) -> bool:
    """Whether a link on the way to `target` passes through /proc (/dev/stdout, /dev/fd/N)."""
    hop = os.path.abspath(target)
    for _ in range(64):  # the kernel gives up after 40 links
        if os.path.realpath(os.path.dirname(hop)).startswith("/proc/"):
            return True
        if not os.path.islink(hop):
            return False
        hop = os.path.abspath(os.path.join(os.path.dirname(hop), os.readlink(hop)))
    return False


def _write_through(target: Path, status: os.stat_result, write: Callable[[BinaryIO], object]) -> None:
    """Write into `target` as it is: a character device or a FIFO (or /proc's view of a shell's
    file), which a rename would replace by a regular file (as root, /dev/null for everyone)."""
    kind = status.st_mode
    if stat.S_ISDIR(kind):
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", os.fspath(target))
    if not (stat.S_ISCHR(kind) or stat.S_ISFIFO(kind) or stat.S_ISREG(kind)):
        what = "a block device" if stat.S_ISBLK(kind) else "a socket" if stat.S_ISSOCK(kind) else "not a file"
        # A PNG written onto a disk would destroy it; nobody means that.
        raise OSError(
            errno.EINVAL,
            f"is {what}; outputs go to regular files, character devices or FIFOs",
            os.fspath(target),
        )
    flags = os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    if stat.S_ISREG(kind):
        flags |= os.O_APPEND  # after what the command already printed there, as `>>` would
    try:
        # Non-blocking: opening a FIFO that no process reads would block for ever; ENXIO instead.
        fd = os.open(target, flags | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        if error.errno == errno.ENXIO and stat.S_ISFIFO(kind):
            raise OSError(
                errno.ENXIO, "a FIFO that no process is reading (start the reader first)", os.fspath(target)
            ) from error
        raise
    with os.fdopen(fd, "wb") as handle:
        os.set_blocking(fd, True)  # writes then wait for a slow reader, as usual
        write(handle)
        handle.flush()


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes | memoryview, *, mode: int | None = None
) -> None:
    """`atomic_write` of `data`."""
    atomic_write(path, lambda handle: handle.write(data), mode=mode)


def _mode_for(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        # The temporary file is made 0600; a report written by the CLI should be readable like any file.
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def fsync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable (its entry on disk). Windows cannot open a directory
    for fsync, and there the rename is already as durable as it gets."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
