"""A status line on stderr for long computations, silent for machine-readable output."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click


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


@contextmanager
def round_progress(fmt: str, total: int, label: str) -> Iterator[Callable[[int, str], None]]:
    """Yield `update(done, text)`, called after each of `total` rounds, for a table's reader.

    On a terminal: a rich progress bar on stderr, cleared at the end. Elsewhere (a CI log, a
    `| tee`, a file): one plain line per round on stderr as it completes, so a long run shows
    progress where a bar cannot. Machine-readable formats (json, csv) stay silent: their
    readers parse the output, and stderr is often merged into it.
    """
    from rich.console import Console

    if fmt != "table":
        yield lambda done, text: None
        return
    if Console(stderr=True).is_terminal:
        with progress_bar(fmt, total, label) as bar:
            yield lambda done, text: bar(completed=done, status=text)
        return
    width = len(str(total))

    def line(done: int, text: str) -> None:
        click.echo(f"{label}: round {done:>{width}}/{total}  {text}", err=True)

    yield line
