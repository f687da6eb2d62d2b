"""GBSG2: German Breast Cancer Study Group 2 survival data, as lifelines ships it.

686 women with node-positive breast cancer; recurrence-free survival time in days and whether
the recurrence was observed (cens = 1) or the time censored. It stands in for FLamby's
TcgaBrca (a Cox model scored by the C-index; ULDP-FL §5.1), which needs a download.
"""

from __future__ import annotations

import csv
import importlib.util
from functools import lru_cache
from pathlib import Path

import numpy as np

from uldp.errors import DataError

from .records import Records, frozen

FEATURES = ("horTh", "age", "menostat", "tsize", "pnodes", "progrec", "estrec", "tgrade_II", "tgrade_III")
SOURCE = (
    "lifelines' GBSG2 (German Breast Cancer Study Group 2, Schumacher et al. 1994; "
    "686 patients, 9 features, recurrence-free survival)"
)
TCGA_BRCA_SILOS = 6


def shipped_file() -> Path:
    """lifelines' `datasets/gbsg2.csv`, found without importing lifelines (2 s of imports)."""
    spec = importlib.util.find_spec("lifelines")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("--dataset gbsg2 needs the lifelines package: pip install 'uldp[data]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "gbsg2.csv"
    if not path.is_file():
        raise DataError(f"--dataset gbsg2: lifelines has no {path.name}; reinstall lifelines")
    return path


@lru_cache(maxsize=1)
def table() -> tuple[np.ndarray, np.ndarray]:
    """(features, (time, event)) of all 686 patients, as `lifelines.datasets.load_gbsg2()`."""
    with shipped_file().open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    features = np.array(
        [
            [
                float(row["horTh"] == "yes"),
                float(row["age"]),
                float(row["menostat"] == "Post"),
                float(row["tsize"]),
                float(row["pnodes"]),
                float(row["progrec"]),
                float(row["estrec"]),
                float(row["tgrade"] == "II"),
                float(row["tgrade"] == "III"),
            ]
            for row in rows
        ],
        dtype=np.float32,
    )
    outcome = np.array([[float(row["time"]), float(row["cens"])] for row in rows], dtype=np.float32)
    return frozen(features, outcome)


def load() -> Records:
    """Records without natural silos; 6 silos by default, as TcgaBrca's 6 regions."""
    features, outcome = table()
    return Records(
        name="gbsg2",
        task="survival",
        source=SOURCE,
        synthetic=False,
        x=features,
        y=outcome,
        n_classes=1,
        default_silos=TCGA_BRCA_SILOS,
    )
