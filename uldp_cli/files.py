"""Writing output files so that a reader never sees half of one (uldp.trainers.atomic).

Every command's outputs (--out, --plot, --metrics, checkpoints) go through the same writer: a
temporary `.NAME.PID.XXXXXXXX.tmp` next to the target, fsynced and renamed over it. A symlink's
target is replaced, never the link; a character device or a FIFO is written through
(`writes_through`); docs/cli.md "Files". Ctrl-C,
SIGTERM and SIGHUP (uldp.cli.signals) remove the temporary file; one left by SIGKILL is removed
by the next write to the same target once its writer is gone.
"""

from __future__ import annotations

import os

from uldp.trainers.atomic import (
    STALE_AGE_S,
    atomic_write,
    atomic_write_bytes,
    remove_stale_temps,
    writes_through,
)

__all__ = [
    "STALE_AGE_S",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "remove_stale_temps",
    "writes_through",
]


def atomic_write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8") -> None:
    """`atomic_write_bytes` for text, encoded with `encoding` (UTF-8 unless told)."""
    atomic_write_bytes(path, text.encode(encoding))
