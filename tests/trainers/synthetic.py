"""Small synthetic FederatedData sets for the trainer tests (seconds, no files)."""

from __future__ import annotations

import numpy as np

from uldp.trainers.data import FederatedData


def make_data(
    task: str = "binary",
    *,
    n: int = 240,
    users: int = 12,
    silos: int = 3,
    features: int = 6,
    image: bool = False,
    seed: int = 0,
    n_classes: int = 3,
) -> FederatedData:
    """Records with a learnable signal, allocated uniformly to users and silos."""
    rng = np.random.default_rng(seed)
    shape = (1, 28, 28) if image else (features,)
    total = n + n // 4
    x = rng.normal(size=(total, *shape)).astype(np.float32)
    signal = x.reshape(total, -1)[:, :3].sum(axis=1)
    if task == "multiclass":
        y = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, n_classes + 1)[1:-1])).astype(np.int64)
        metric, classes = "accuracy", n_classes
    elif task == "binary":
        y = (signal + 0.5 * rng.normal(size=total) > 0).astype(np.int64)
        metric, classes = "roc_auc", 2
    else:
        time = rng.exponential(np.exp(-signal)).astype(np.float32)
        event = (rng.random(total) < 0.7).astype(np.float32)
        y = np.stack([time, event], axis=1)
        metric, classes = "c_index", 0
    return FederatedData(
        name="synthetic",
        task=task,
        metric=metric,
        source="synthetic test records",
        synthetic=True,
        x_train=x[:n],
        y_train=y[:n],
        user_train=rng.integers(0, users, n).astype(np.int64),
        silo_train=rng.integers(0, silos, n).astype(np.int64),
        x_test=x[n:],
        y_test=y[n:],
        silo_test=rng.integers(0, silos, total - n).astype(np.int64),
        n_users=users,
        n_silos=silos,
        n_classes=classes,
        allocation={"method": "uniform"},
    )


def without_user(data: FederatedData, user: int) -> FederatedData:
    """The neighbouring data set: every record of `user` removed, in every silo."""
    keep = data.user_train != user
    return FederatedData(
        **{
            **data.__dict__,
            "x_train": data.x_train[keep],
            "y_train": data.y_train[keep],
            "user_train": data.user_train[keep],
            "silo_train": data.silo_train[keep],
        }
    )
