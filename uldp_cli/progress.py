"""A status line on stderr for long computations, silent for machine-readable output."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console


@contextmanager
def status(fmt: str, initial: str = "accounting") -> Iterator[Callable[[str], None]]:
    """Yield an `update(text)` callback that shows progress while the block runs."""
    console = Console(stderr=True)
    if fmt != "table" or not console.is_terminal:
        yield lambda text: None
        return
    with console.status(initial) as live:
        yield lambda text: live.update(f"accounting: {text}")
