"""SIGTERM and SIGHUP end a command as Ctrl-C does: cleanly, with the shell's status 128 + signum.

By default Python dies on SIGTERM and SIGHUP without unwinding, so an atomic write in progress
(uldp.cli.files) leaves its temporary file, possibly hundreds of MB, and a lock file
(uldp.cli.locks) stays behind. `install()` turns both signals into a `Terminated` exception
raised in the main thread: every `finally` and `except BaseException` runs (temporary files are
removed, locks released), and the process exits with 128 + signum, as a shell reports a process
the signal killed. `Terminated` derives from SystemExit, so Click passes it through untouched;
`uldp train` catches it to say, as for Ctrl-C, which round was completed and how to resume.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

#: The signals handled like SIGINT (SIGHUP does not exist on Windows).
HANDLED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Terminated(SystemExit):
    """The process received `signum` (SIGTERM or SIGHUP); exits with 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


#: The process that installed the handlers; a child forked from it inherits them but not the duty.
_installer: int | None = None


def _raise(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _installer:
        # A forked worker (a process pool's): the parent reports the signal, once, and ends its
        # workers; the worker dies of the signal quietly, as it would without the handler.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    # Ignore a second signal while the first unwinds, so the clean-up itself is not cut short.
    for handled in HANDLED:
        signal.signal(handled, signal.SIG_IGN)
    try:
        print(f"Stopped by {signal.Signals(signum).name}: no half-written output is left.", file=sys.stderr)
    except (OSError, ValueError):
        pass  # SIGHUP: the terminal may be gone
    raise Terminated(signum)


def install() -> None:
    """Handle SIGTERM and SIGHUP in this process (main thread only; elsewhere a no-op)."""
    global _installer
    _installer = os.getpid()
    for handled in HANDLED:
        try:
            signal.signal(handled, _raise)
        except ValueError:
            return  # not the main thread (an embedding application): leave its handlers alone
