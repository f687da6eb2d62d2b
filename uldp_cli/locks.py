"""One writer per output: a lock file next to a file that a long run keeps rewriting.

Two `uldp train` runs given the same --checkpoint or --metrics would each replace the other's
file after every round, and both would look fine. `output_lock(path)` creates `path.lock` with
O_CREAT | O_EXCL (atomic on local file systems: exactly one creator wins) holding the owner's
pid and host, and removes it on every way out of the block (return, exception, Ctrl-C, and
SIGTERM/SIGHUP through uldp.cli.signals). SIGKILL leaves the lock behind: a lock whose pid is
not a live process on this host is stale, and the next run takes it over. A lock written on
another host cannot be checked from here, so it is refused with its host and pid named.

A known limit: two runs that find the same stale lock at the same instant may both take it
over (the check and the removal are two steps); the window is microseconds, after a SIGKILL.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import click

from uldp.trainers.atomic import pid_alive

SUFFIX = ".lock"


class Locked(click.UsageError):
    """Another live run holds the lock of a file this run would write."""


def lock_path(path: str | os.PathLike[str]) -> Path:
    target = Path(path)
    return target.with_name(target.name + SUFFIX)


def _owner(lock: Path) -> tuple[int | None, str]:
    """(pid, host) recorded in `lock`; pid None if the file is unreadable or half-written."""
    try:
        fields = dict(line.split("=", 1) for line in lock.read_text().splitlines() if "=" in line)
        return int(fields["pid"]), fields.get("host", "")
    except (OSError, ValueError, KeyError):
        return None, ""


def acquire(path: str | os.PathLike[str], option: str) -> Path:
    """Create the lock of `path`, taking over a stale one; `Locked` naming `option`, the file and
    the holder's pid if a live run holds it. Returns the lock file (release with `release`)."""
    lock = lock_path(path)
    host = socket.gethostname()
    for _ in range(3):  # a stale lock removed, then one more try; a race lost, then refuse
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            pid, owner_host = _owner(lock)
            if pid is None:
                # Just created by another run that has not written its pid yet, or garbage.
                if _age(lock) < 5.0:
                    raise Locked(
                        f"{option}: {path} is being opened by another run ({lock} exists); "
                        "wait for it, or use another file"
                    ) from None
            elif owner_host and owner_host != host:
                raise Locked(
                    f"{option}: {path} is in use by process {pid} on host {owner_host} ({lock}); "
                    f"if that run is over, remove {lock}"
                ) from None
            elif pid_alive(pid) and pid != os.getpid():
                raise Locked(
                    f"{option}: {path} is in use by another run (pid {pid}, lock {lock}); wait for "
                    "it to finish, or give another file"
                ) from None
            lock.unlink(missing_ok=True)  # stale: its writer is gone (SIGKILL, power loss)
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(f"pid={os.getpid()}\nhost={host}\n")
        return lock
    raise Locked(f"{option}: could not take the lock {lock}: another run keeps taking it")


def _age(lock: Path) -> float:
    try:
        return time.time() - lock.stat().st_mtime
    except OSError:
        return 0.0


def release(lock: Path) -> None:
    """Remove `lock` if it is still ours (a run that found it stale may have taken it over)."""
    pid, _ = _owner(lock)
    if pid == os.getpid():
        lock.unlink(missing_ok=True)


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
