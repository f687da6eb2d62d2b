"""Kaggle's credit-card fraud data (Dal Pozzolo et al. 2015), or a synthetic stand-in.

The real file (`creditcard.csv`: Time, V1..V28, Amount, Class; 284,807 transactions, 492
frauds) cannot ship with `uldp` (its licence is ODbL and it is 150 MB), so `--path` points to
a copy the user downloaded. As the paper does (§5.1, about 25K training records), we keep every
fraud and 10% of the legitimate transactions. Without a file we generate a stand-in with the
same 30 columns and a fraud rate of 0.4%, and every output says it is SYNTHETIC.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from uldp.errors import DataError
from uldp.input_files import CAPS, check_input

from .records import Records

FEATURES = ("Time",) + tuple(f"V{i}" for i in range(1, 29)) + ("Amount",)
LABEL = "Class"
LEGITIMATE_KEPT = 0.10
UNDERSAMPLING_SEED = 0
SYNTHETIC_RECORDS = 40_000
SYNTHETIC_FRAUD_RATE = 0.004
SYNTHETIC_SEED = 20150101


def read(path: str | Path) -> Records:
    """The user's creditcard.csv, every fraud and 10% of the legitimate records (fixed seed)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"--path: no file at {path}")
    check_input(path, "--path", cap=CAPS["table"])
    try:
        import pandas as pd
    except ModuleNotFoundError:
        raise DataError("--path: reading creditcard.csv needs pandas: pip install 'uldp[data]'") from None
    try:
        frame = pd.read_csv(path)
    except (ValueError, UnicodeDecodeError) as error:
        raise DataError(f"--path: {path} is not a readable CSV ({error})") from None
    missing = [column for column in FEATURES + (LABEL,) if column not in frame.columns]
    if missing:
        raise DataError(f"--path: {path} lacks the creditcard.csv columns {', '.join(missing)}")
    classes = set(np.unique(frame[LABEL].to_numpy()).tolist())
    if not classes <= {0, 1}:
        raise DataError(f"--path: column {LABEL} must hold 0 and 1, found {sorted(classes)}")
    features = frame[list(FEATURES)].to_numpy(dtype=np.float32)
    if not np.isfinite(features).all():
        raise DataError(f"--path: {path} has missing or infinite feature values")
    fraud = frame[LABEL].to_numpy().astype(np.int64)
    rng = np.random.default_rng(UNDERSAMPLING_SEED)
    legitimate = np.flatnonzero(fraud == 0)
    kept_legitimate = rng.choice(legitimate, size=int(len(legitimate) * LEGITIMATE_KEPT), replace=False)
    kept = np.sort(np.concatenate([np.flatnonzero(fraud == 1), kept_legitimate]))
    source = (
        f"Kaggle creditcard.csv at {path}: all {int(fraud.sum())} frauds and "
        f"{len(kept_legitimate)} of {len(legitimate)} legitimate transactions (10%, as §5.1)"
    )
    return Records(
        name="creditcard",
        task="binary",
        source=source,
        synthetic=False,
        x=features[kept],
        y=fraud[kept],
        n_classes=2,
        default_silos=5,
    )


def synthetic() -> Records:
    """A fixed synthetic stand-in: 40,000 records, 30 features, 0.4% frauds.

    V1..V28 are independent Gaussians with decreasing variance, like the principal
    components of the real file; frauds shift ten of them by 1 to 3 standard deviations and
    spend more. The data do not depend on the allocation seed, like a real file.
    """
    rng = np.random.default_rng(SYNTHETIC_SEED)
    n = SYNTHETIC_RECORDS
    fraud = np.zeros(n, dtype=np.int64)
    fraud[rng.choice(n, size=int(round(n * SYNTHETIC_FRAUD_RATE)), replace=False)] = 1
    scales = np.sqrt(2.0 / (1.0 + 0.15 * np.arange(28)))
    components = rng.normal(size=(n, 28)) * scales
    shifted = np.array([0, 1, 2, 3, 6, 9, 10, 11, 13, 16])
    shift = rng.choice([-1.0, 1.0], size=len(shifted)) * rng.uniform(1.0, 3.0, len(shifted))
    frauds = np.flatnonzero(fraud)
    components[np.ix_(frauds, shifted)] += shift * scales[shifted]
    time = np.sort(rng.uniform(0.0, 172_800.0, size=n))
    amount = np.exp(rng.normal(3.0, 1.3, size=n) + 0.6 * fraud)
    features = np.column_stack([time, components, amount]).astype(np.float32)
    source = (
        "SYNTHETIC stand-in for Kaggle creditcard.csv (no --path given): 40,000 records, "
        "30 features, 0.4% positives"
    )
    return Records(
        name="creditcard",
        task="binary",
        source=source,
        synthetic=True,
        x=features,
        y=fraud,
        n_classes=2,
        default_silos=5,
    )
