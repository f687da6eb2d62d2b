"""Writing output files so that a reader never sees half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes | memoryview) -> None:
    """Replace `path` with `data` in one step: a crash leaves the old file or the new, whole.

    The data goes to a temporary file in the same directory (so `os.replace` is a rename on
    one file system), is fsynced, then renamed over `path`. The new file keeps the mode of the
    one it replaces, or gets the usual mode for a new file (0666 less the umask).
    """
    target = Path(path)
    directory = target.parent
    mode = _mode_for(target)
    fd, temp_name = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as temp:
            temp.write(data)
            temp.flush()
            os.fsync(temp.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, target)
    except BaseException:
        # Also on KeyboardInterrupt: never leave a stray temporary file behind.
        Path(temp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(directory)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8") -> None:
    """`atomic_write_bytes` for text, encoded with `encoding` (UTF-8 unless told)."""
    atomic_write_bytes(path, text.encode(encoding))


def _mode_for(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        # mkstemp creates 0600; a report written by the CLI should be readable like any file.
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_directory(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk. Windows cannot open a
    # directory for fsync, and there the rename is already as durable as it gets.
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
