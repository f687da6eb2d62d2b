"""Shared test settings: hypothesis without deadlines, and fewer examples on CI; a fixture for
tests that signal their own process."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest
from hypothesis import settings

# Accounting calls vary a lot in time (the first one pays for imports); a deadline would flake.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, max_examples=30, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI", "").lower() in {"true", "1"} else "dev")


@pytest.fixture
def signals_reach_main_thread() -> Iterator[None]:
    """A signal a test sends its own process (`os.kill(os.getpid(), ...)`) is handled at once in
    the main thread, whatever an earlier test in the worker left: SIGINT's default handler, and
    SIGINT and SIGTERM unblocked in the main thread. Were they blocked there, the kernel would hand
    the signal to another thread and the main thread could run on before it sees it; the
    clean-clone CI once failed two tests of tests/trainers/test_uninterrupted.py that way, after
    other tests in the same worker (reproduced by blocking SIGINT with a second thread alive)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, previous)
