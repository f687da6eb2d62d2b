"""uldp_cli/locks.py: one holder per lock, arbitrated by the kernel (issue 32, item 6)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from uldp.cli import locks
from uldp.cli.locks import Locked, acquire, lock_path, release

TRIALS = 30
RACERS = 4


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _racer(folder: str, start, tried, results) -> None:
    """For each trial: wait for the others, try the lock, hold it until every racer has tried."""
    for trial in range(TRIALS):
        start.wait()
        try:
            held = acquire(Path(folder) / f"out{trial}.jsonl", "--metrics")
        except Locked:
            held = None
        results.put((trial, held is not None))
        tried.wait()
        if held is not None:
            release(held)


def test_racers_on_a_stale_lock_get_it_exactly_once_each_time(tmp_path: Path, monkeypatch) -> None:
    # The stale lock of a dead run, as uldp wrote it before flock (a flock-era one has no holder
    # either once its process is gone): every racer sees it stale at the same moment. Checking a
    # pid is made slow, as on a loaded machine: a lock that decides by pid then hands itself to
    # several racers (5 of 60 trials in the audit); one the kernel arbitrates cannot.
    dead = _dead_pid()
    real_pid_alive = locks.pid_alive

    def slow_pid_alive(pid: int) -> bool:
        time.sleep(0.005)
        return real_pid_alive(pid)

    monkeypatch.setattr(locks, "pid_alive", slow_pid_alive)  # before the fork: the racers get it
    context = multiprocessing.get_context("fork")
    start, tried = context.Barrier(RACERS + 1), context.Barrier(RACERS)
    results = context.Queue()
    racers = [
        context.Process(target=_racer, args=(str(tmp_path), start, tried, results)) for _ in range(RACERS)
    ]
    for racer in racers:
        racer.start()
    try:
        winners = []
        for trial in range(TRIALS):
            lock_path(tmp_path / f"out{trial}.jsonl").write_text(f"pid={dead}\nhost={socket.gethostname()}\n")
            start.wait(timeout=60)
            outcomes = [results.get(timeout=60) for _ in range(RACERS)]
            assert {t for t, _ in outcomes} == {trial}
            winners.append(sum(won for _, won in outcomes))
    finally:
        for racer in racers:
            racer.join(timeout=60)
            if racer.is_alive():
                racer.kill()
    assert winners == [1] * TRIALS
    assert all(racer.exitcode == 0 for racer in racers)
    assert not list(tmp_path.glob("*.lock"))  # each winner removed its lock on release


HOLDER = """
import sys, time
from uldp.cli.locks import acquire
acquire(sys.argv[1], "--checkpoint")
print("held", flush=True)
time.sleep(120)
"""


def test_a_sigkilled_holder_is_refused_while_alive_and_taken_over_after(tmp_path: Path) -> None:
    target = tmp_path / "checkpoint.pt"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(target)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(
            Locked, match=rf"^--checkpoint: {target} is in use by another run \(pid {holder.pid},"
        ):
            acquire(target, "--checkpoint")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert f"pid={holder.pid}" in lock_path(target).read_text()  # SIGKILL: no way out ran
    held = acquire(target, "--checkpoint")  # the kernel dropped the dead holder's flock
    assert f"pid={os.getpid()}" in lock_path(target).read_text()
    release(held)
    assert not lock_path(target).exists()


def test_a_lock_released_between_open_and_flock_is_not_shared(tmp_path: Path, monkeypatch) -> None:
    """The holder unlinks its file while it still holds it; a run that opened that file just
    before gets its flock after the release, on a file no longer at the path: it must not win on
    it (a third run would then lock the new file, and two would hold "the" lock)."""
    target = tmp_path / "m.jsonl"
    first = acquire(target, "--metrics")
    real_flock, calls = locks.fcntl.flock, []

    def released_meanwhile(fd: int, operation: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            release(first)  # between the racer's open and its flock
        real_flock(fd, operation)

    monkeypatch.setattr(locks.fcntl, "flock", released_meanwhile)
    second = acquire(target, "--metrics")
    monkeypatch.undo()
    assert len(calls) == 2  # the first flock landed on the unlinked file: opened again
    assert os.fstat(second.fd).st_ino == os.stat(lock_path(target)).st_ino
    with pytest.raises(Locked, match=f"pid {os.getpid()}"):
        acquire(target, "--metrics")  # the kernel arbitrates per open file, this process included
    release(second)
    assert not lock_path(target).exists()


def test_a_lock_file_is_judged_by_the_kernel_unless_an_older_uldp_wrote_it(tmp_path: Path) -> None:
    """A flock-era file naming a live pid but locked by no one: its writer is gone and the pid was
    reused, so it is taken over. An older uldp's file (no flock line) naming a live pid is that
    run's only lock: refused, as before."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        target, host = tmp_path / "m.jsonl", socket.gethostname()
        lock_path(target).write_text(f"pid={live.pid}\nhost={host}\nflock=1\n")
        release(acquire(target, "--metrics"))
        lock_path(target).write_text(f"pid={live.pid}\nhost={host}\n")
        with pytest.raises(Locked, match=rf"^--metrics: {target} is in use by another run \(pid {live.pid},"):
            acquire(target, "--metrics")
        lock_path(target).write_text(f"pid={live.pid}\nhost=elsewhere.example\nflock=1\n")
        with pytest.raises(Locked, match=rf"in use by process {live.pid} on host elsewhere.example"):
            acquire(target, "--metrics")
    finally:
        live.kill()
        live.wait()
