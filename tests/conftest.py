"""Shared test settings: hypothesis without deadlines, and fewer examples on CI; the `slow` mark
from tests/slow.txt; a fixture for tests that signal their own process."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Accounting calls vary a lot in time (the first one pays for imports); a deadline would flake.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, max_examples=30, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI", "").lower() in {"true", "1"} else "dev")

SLOW_LIST = Path(__file__).resolve().parent / "slow.txt"


def _slow_entries() -> set[str]:
    lines = (line.split("#", 1)[0].strip() for line in SLOW_LIST.read_text(encoding="utf-8").splitlines())
    return {line for line in lines if line}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `slow` the tests tests/slow.txt names (measured; tests/update_slow.py), so that
    `pytest -m "not slow"` is the everyday subset. An entry naming no test of a module that was
    collected is an error: a renamed or split test must not silently join the fast subset."""
    entries = _slow_entries()
    used: set[str] = set()
    modules = set()
    for item in items:
        # Under `--dist loadgroup` pytest-xdist may already have suffixed the id with "@group".
        nodeid = item.nodeid
        if nodeid.rfind("@") > nodeid.rfind("]"):
            nodeid = nodeid.rsplit("@", 1)[0]
        module = nodeid.split("::", 1)[0]
        function = nodeid.split("[", 1)[0]
        modules.add(module)
        for entry in (module, function):
            if entry in entries:
                item.add_marker(pytest.mark.slow)
                used.add(entry)
    stale = sorted(e for e in entries - used if e.split("::", 1)[0] in modules)
    if stale:
        raise pytest.UsageError(f"tests/slow.txt names tests that do not exist: {', '.join(stale)}")


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
