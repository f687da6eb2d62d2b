"""One writer per output: a lock file next to a file that a long run keeps rewriting.

Two `uldp train` runs given the same --checkpoint or --metrics would each replace the other's
file after every round, and both would look fine. `output_locks` holds, for each path, an exclusive
`flock` on `path.lock`, a lock the kernel arbitrates: of any number of runs trying at once,
exactly one gets it, and the kernel drops it when its holder's process ends, however it ends
(SIGKILL and power loss included), so a stale lock is never something to detect and remove.
The file also holds the owner's pid and host, for the message a refused run prints.

Acquiring: open `path.lock` with O_CREAT (no O_EXCL: a file left by a killed run is reused),
`flock(LOCK_EX | LOCK_NB)`, then check that the file locked is still the one at `path.lock`
(fstat against stat, same inode): a holder releases by unlinking the file while it still holds
the lock, so a run that opened the old file just before must try again on the new one. The lock
is released on every way out of the block (return, exception, Ctrl-C, and SIGTERM/SIGHUP
through uldp.cli.signals).

Two cases the kernel cannot arbitrate are refused with the holder named, as before flock: a
lock file written by another host (a network file system may not carry flock between hosts),
and one written by an earlier uldp, which created the file with O_EXCL and never flocked it
(no `flock=1` line), whose pid is still a live process here.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import click

from uldp.trainers.atomic import pid_alive

SUFFIX = ".lock"
#: The marker of a lock file whose holder flocks it: a flock acquired on it means its writer is gone.
FLOCKED = "flock=1"


class Locked(click.UsageError):
    """Another live run holds the lock of a file this run would write."""


@dataclass(frozen=True)
class Held:
    """A lock this process holds: the file and the descriptor its flock is on."""

    path: Path
    fd: int


def lock_path(path: str | os.PathLike[str]) -> Path:
    target = Path(path)
    return target.with_name(target.name + SUFFIX)


def _fields(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _owner(fields: dict[str, str]) -> tuple[int | None, str]:
    """(pid, host) a lock file records; pid None if it is empty, half-written or garbage."""
    try:
        return int(fields["pid"]), fields.get("host", "")
    except (ValueError, KeyError):
        return None, ""


def _read(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, 4096).decode("utf-8", "replace")


def _refusal(option: str, path: str | os.PathLike[str], lock: Path, fields: dict[str, str]) -> Locked:
    pid, host = _owner(fields)
    here = not host or host == socket.gethostname()
    if pid is None or here and not pid_alive(pid):
        # Locked by a run that has not written its pid yet (between its flock and its write: the
        # file may still name the dead run that left it).
        return Locked(
            f"{option}: {path} is being opened by another run ({lock} is locked); wait for it, or "
            "use another file"
        )
    if not here:
        return Locked(
            f"{option}: {path} is in use by process {pid} on host {host} ({lock}); if that run is "
            f"over, remove {lock}"
        )
    return Locked(
        f"{option}: {path} is in use by another run (pid {pid}, lock {lock}); wait for it to "
        "finish, or give another file"
    )


def acquire(path: str | os.PathLike[str], option: str) -> Held:
    """Lock `path` for this run; `Locked` naming `option`, the file and the holder's pid if a live
    run holds it. Returns the lock held (release with `release`)."""
    lock = lock_path(path)
    host = socket.gethostname()
    for _ in range(100):  # each retry means a holder released between our open and our flock
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as error:
            raise Locked(f"{option}: cannot create the lock {lock} ({error.strerror})") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise _refusal(option, path, lock, _fields(_read(fd))) from None
            except OSError as error:  # ENOLCK: a network file system without a lock service
                raise Locked(
                    f"{option}: cannot lock {lock} ({error.strerror}): this file system does not "
                    "arbitrate locks; give a file on a local disk"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(lock).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # released (unlinked) by its holder after we opened it: try the new file
                os.close(fd)
                continue
            fields = _fields(_read(fd))
            pid, owner_host = _owner(fields)
            foreign = bool(owner_host) and owner_host != host  # a network file system may not share flock
            legacy = fields.get("flock") != "1"  # a uldp that did not flock: the kernel knows not its holder
            if pid is not None and (foreign or legacy and pid_alive(pid) and pid != os.getpid()):
                raise _refusal(option, path, lock, fields)
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"pid={os.getpid()}\nhost={host}\n{FLOCKED}\n".encode())
            return Held(lock, fd)
        except BaseException:
            os.close(fd)  # also drops the flock, if we got it
            raise
    raise Locked(f"{option}: could not take the lock {lock}: other runs keep taking and releasing it")


def release(held: Held) -> None:
    """Remove the lock file, then drop the flock: unlinking while still holding it means no other
    run can have locked the file being removed (a run that opened it meanwhile sees, after its
    flock, that it is no longer the file at that path, and opens the new one)."""
    try:
        if os.fstat(held.fd).st_ino == os.stat(held.path).st_ino:
            held.path.unlink()
    except FileNotFoundError:
        pass
    finally:
        os.close(held.fd)


@contextmanager
def output_locks(paths: dict[str, str | os.PathLike[str] | None]) -> Iterator[None]:
    """Hold the locks of every given path (option name -> path; None skipped) for the block."""
    with ExitStack() as stack:
        taken: set[Path] = set()
        for option, path in paths.items():
            if path is None:
                continue
            lock = lock_path(path).resolve()
            if lock in taken:
                continue
            acquired = acquire(path, option)
            taken.add(lock)
            stack.callback(release, acquired)
        yield
