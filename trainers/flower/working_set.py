"""A silo's working set for one run on Flower: what its ClientApp (client_app.py) rebuilds from the
node's `context.state` and caches per worker process, and what the silo's side of Protocol 1
(protocol1.py) reads: the run's settings, the silo's records, the model's context, its own copy of
the algorithm, the parameters' layout and its noise entropy.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..algorithms.base import Algorithm, Context, SiloData, TrainConfig


@dataclasses.dataclass
class WorkingSet:
    """A silo's working set for one run, rebuilt from context.state when not cached."""

    cfg: TrainConfig
    data: SiloData
    ctx: Context
    algorithm: Algorithm
    like: dict[str, Any]  # the model's parameters: names, shapes, dtype
    entropy: int
