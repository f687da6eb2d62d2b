"""`uldp train --engine flower` inside a Flower ServerApp: the run on a deployed federation.

A deployment's ServerApp (uldp.cli.flower_app) runs the `uldp train` command itself, so the
table, metrics file, plot and checkpoint are the command's own; `serving(grid)` hands that
command the ServerApp's `Grid`, and `runner.train` then trains on the SuperNodes connected to
it instead of starting a simulation. Each SuperNode reads its own silo's partition file (its
`--node-config "partition-id=S data-file=F"`, partitions.py); the server reads of the data set
only its description and test records.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

_GRID: ContextVar[Any] = ContextVar("uldp_flower_grid", default=None)

T = TypeVar("T")


@contextlib.contextmanager
def serving(grid: Any) -> Iterator[None]:
    """Within this block, `--engine flower` trains on the SuperNodes of `grid`."""
    token = _GRID.set(grid)
    try:
        yield
    finally:
        _GRID.reset(token)


def current_grid() -> Any:
    """The deployment's Grid when running inside a ServerApp, else None (simulate)."""
    return _GRID.get()


def deploy(
    data,
    cfg,
    grid: Any,
    loop: Callable[..., T],
    *,
    on_stage: Callable[[str], None] | None = None,
    **options: Any,
) -> T:
    """The round loop `loop` (`runner.run`) over the SuperNodes of `grid` (each with its own
    partition file); `on_stage` and the summary's `startup_s` as in `simulation.simulate`."""
    from .server import FlowerSilos
    from .simulation import describe, with_startup

    started = time.perf_counter()
    model, name = options.pop("model", None), options.pop("model_name", None)
    model = model if model is not None else name
    description = describe(data, model)
    silos = FlowerSilos(grid, description, on_stage=on_stage, started=started)
    result = loop(data, silos, cfg, model=model, **options)
    with_startup(result, [silos])
    return result
