"""Holding Ctrl-C, SIGTERM and SIGHUP back while a round is committed.

A round is committed in three steps: its metrics row is appended, its checkpoint replaced, and
the caller told (`on_round`, which `uldp train` uses to say "Interrupted after round t").
Each write is atomic on its own, but a signal between two of them would leave the checkpoint
at round t while the message says t - 1 (or the reverse), and a resume would then start from a
round other than the one the user was told. `uninterrupted()` makes the three one step: a
signal that arrives inside is recorded and delivered again, to the handler that was in place,
as soon as the block ends.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: The signals a user or a scheduler stops a run with (SIGHUP does not exist on Windows).
HELD = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextmanager
def uninterrupted() -> Iterator[None]:
    """Run the block to its end, then deliver any of `HELD` that arrived meanwhile.

    Outside the main thread (where Python cannot set handlers) the block runs unprotected.
    A handler installed from C (which `signal.getsignal` reports as None) is left in place.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {}
    for signum in HELD:
        handler = signal.getsignal(signum)
        if handler is not None:
            previous[signum] = signal.signal(signum, lambda got, _frame: arrived.append(got))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(arrived):  # once each, in the order they came
            signal.raise_signal(signum)
