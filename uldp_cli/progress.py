"""A status line on stderr for long computations, silent for machine-readable output."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def status(fmt: str, initial: str = "accounting") -> Iterator[Callable[[str], None]]:
    """Yield an `update(text)` callback that shows progress while the block runs."""
    from rich.console import Console  # rich costs start-up time; `--help` should not pay it

    console = Console(stderr=True)
    if fmt != "table" or not console.is_terminal:
        yield lambda text: None
        return
    with console.status(initial) as live:
        yield lambda text: live.update(f"accounting: {text}")


@contextmanager
def progress_bar(fmt: str, total: int, label: str) -> Iterator[Callable[..., None]]:
    """Yield `update(**fields)` for a rich progress bar of `total` steps on stderr.

    `fields` are rich's: `advance=1`, `completed=n`, `description=...`, or `status=...` (a text
    after the bar). Silent unless the output is a table on a terminal.
    """
    from rich.console import Console

    console = Console(stderr=True)
    if fmt != "table" or not console.is_terminal:
        yield lambda **fields: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[status]}"),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total, status="")
        yield lambda **fields: bar.update(task, **fields)
