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
def stage(fmt: str, label: str, text: str) -> Iterator[None]:
    """`label: text` for a step that gives no count (loading Flower and Ray before a run): a
    spinner on a terminal while the block runs, one line on stderr elsewhere, silent for json
    and csv (as `round_progress`)."""
    from rich.console import Console

    if fmt != "table":
        yield
        return
    console = Console(stderr=True)
    if not console.is_terminal:
        click.echo(f"{label}: {text}", err=True)
        yield
        return
    with console.status(f"{label}: {text}"):
        yield


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
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        SpinnerColumn(),  # moves while a step gives no count (Ray starting), so no bar looks stuck
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


class RoundProgress:
    """`update(done, text)` after each round; `update.stage(text)` for a step before round 1 that
    takes a while (starting Ray and the silos' ClientApps under --engine flower)."""

    def __init__(self, round_done: Callable[[int, str], None], stage: Callable[[str], None]) -> None:
        self._round_done = round_done
        self.stage = stage

    def __call__(self, done: int, text: str) -> None:
        self._round_done(done, text)


@contextmanager
def round_progress(fmt: str, total: int, label: str) -> Iterator[RoundProgress]:
    """Yield `update(done, text)`, called after each of `total` rounds, for a table's reader, and
    `update.stage(text)` for the steps before round 1 (as Flower's `flwr run` prints its stages).

    On a terminal: a rich progress bar on stderr with a spinner, the stage as its status, cleared
    at the end. Elsewhere (a CI log, a `| tee`, a file): one plain line per round and per stage
    on stderr as it comes, so a long run shows progress where a bar cannot. Machine-readable
    formats (json, csv) stay silent: their readers parse the output, and stderr is often merged
    into it.
    """
    from rich.console import Console

    if fmt != "table":
        yield RoundProgress(lambda done, text: None, lambda text: None)
        return
    if Console(stderr=True).is_terminal:
        with progress_bar(fmt, total, label) as bar:
            yield RoundProgress(
                lambda done, text: bar(completed=done, status=text), lambda text: bar(status=text)
            )
        return
    width = len(str(total))

    def line(done: int, text: str) -> None:
        click.echo(f"{label}: round {done:>{width}}/{total}  {text}", err=True)

    yield RoundProgress(line, lambda text: click.echo(f"{label}: {text}", err=True))
