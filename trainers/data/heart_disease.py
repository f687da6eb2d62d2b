"""UCI Heart Disease with its four hospitals as silos, prepared as FLamby's Fed-Heart-Disease.

The table ships with `uldp` (`files/heart_disease.csv`, see `files/README.md`): the 920
patients of the UCI processed files with the hospital of each. As FLamby does, we drop the
three attributes missing for most patients outside Cleveland (slope, ca, thal), drop patients
missing any of the other ten, one-hot encode chest-pain type and resting ECG (dropping their
first level) and call any diagnosis above 0 a disease: 740 patients (303 Cleveland, 261
Hungary, 46 Switzerland, 130 Long Beach VA), 13 features, a binary target.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import numpy as np

from .records import Records, frozen

HOSPITALS = ("cleveland", "hungarian", "switzerland", "va")
HOSPITAL_NAMES = ("Cleveland", "Hungary", "Switzerland", "Long Beach VA")
NUMERIC = ("age", "sex", "trestbps", "chol", "fbs", "thalach", "exang", "oldpeak")
ONE_HOT = {"cp": (2, 3, 4), "restecg": (1, 2)}
FEATURES = NUMERIC + tuple(f"{column}_{level}" for column, levels in ONE_HOT.items() for level in levels)
SOURCE = (
    "UCI Heart Disease (Janosi, Steinbrunn, Pfisterer, Detrano 1988; CC BY 4.0), "
    "4 hospitals as silos, FLamby's preprocessing: 740 patients, 13 features"
)


@lru_cache(maxsize=1)
def table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, disease 0/1, hospital index) of the 740 complete patients, read once."""
    import csv
    import io

    path = resources.files("uldp.trainers.data") / "files" / "heart_disease.csv"
    # read_text, not open(newline=""): a Traversable (maybe inside a zip) takes no newline argument
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))
    used = NUMERIC + tuple(ONE_HOT)
    complete = [row for row in rows if all(row[column] != "" for column in used)]
    features = np.array(
        [
            [float(row[column]) for column in NUMERIC]
            + [float(float(row[column]) == level) for column, levels in ONE_HOT.items() for level in levels]
            for row in complete
        ],
        dtype=np.float32,
    )
    disease = np.array([int(row["num"]) > 0 for row in complete], dtype=np.int64)
    hospital = np.array([HOSPITALS.index(row["hospital"]) for row in complete], dtype=np.int64)
    return frozen(features, disease, hospital)


def load() -> Records:
    """Records with the hospital of each patient as its fixed silo."""
    features, disease, hospital = table()
    return Records(
        name="heart-disease",
        task="binary",
        source=SOURCE,
        synthetic=False,
        x=features,
        y=disease,
        n_classes=2,
        silos=hospital,
        silo_names=HOSPITAL_NAMES,
        default_silos=len(HOSPITALS),
        metric="accuracy",
    )  # what ULDP-FL §5.2 and FLamby report
