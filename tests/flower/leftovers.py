"""Which processes a run left behind: every process a run starts (Ray's gcs_server, raylet,
log_monitor, workers...) inherits its environment, so a variable set for the run alone marks them
all, re-parented or not."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

MARK = "ULDP_TEST_RUN_MARK"


def new_mark() -> str:
    """A value for `MARK` that no other run carries."""
    return uuid.uuid4().hex


def marked_env(mark: str) -> dict[str, str]:
    """This process's environment with `MARK` set to `mark`, for a subprocess."""
    return {**os.environ, MARK: mark}


def processes_marked(mark: str) -> list[str]:
    """The command lines of the live processes (zombies are dead: they hold no resources but a
    process-table entry, until their new parent reaps them) whose environment holds `mark`."""
    needle = f"{MARK}={mark}".encode()
    left = []
    for proc in Path("/proc").glob("[0-9]*"):
        if proc.name == str(os.getpid()):  # a test that marked its own environment
            continue
        try:
            if needle not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state not in ("Z", "X"):
            left.append(f"{proc.name}: {cmdline.strip()}")
    return left
