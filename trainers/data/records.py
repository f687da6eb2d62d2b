"""A data set as loaded, before it is split into users, silos, train and test."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Records:
    """All records of one data set, with what the data itself says about silos and users.

    `silos` holds the natural silo of each record when the data has one (HeartDisease's
    hospitals, a silo column of the user's table), `users` the user of each record when the
    data names them (a user column); None means they are to be allocated (ULDP-FL §5.1).
    """

    name: str
    task: str
    source: str
    synthetic: bool
    x: np.ndarray
    y: np.ndarray
    n_classes: int
    silos: np.ndarray | None = None
    silo_names: tuple[str, ...] = ()
    users: np.ndarray | None = None
    standardize: bool = True
    default_silos: int = 5
    metric: str | None = None  # None: the task's usual metric (federated.METRICS)

    def strata(self) -> np.ndarray:
        """What train/test splits keep in proportion: the class, or the event for survival."""
        return self.y[:, 1].astype(np.int64) if self.task == "survival" else self.y


def frozen(*arrays: np.ndarray) -> Any:
    """The arrays, made read-only: the loaders cache them, and every caller shares one copy.

    Typed Any so that a loader's fixed-length tuple annotation says how many arrays it returns.
    """
    for array in arrays:
        array.flags.writeable = False
    return arrays
