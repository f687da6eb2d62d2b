"""From loaded records to a FederatedData: allocation, per-silo train/test split, scaling."""

from __future__ import annotations

import numpy as np

from uldp.errors import DataError

from . import allocation
from .federated import METRICS, FederatedData
from .records import Records


def split_per_silo(
    silos: np.ndarray, strata: np.ndarray, test_fraction: float, rng: np.random.Generator
) -> np.ndarray:
    """Test mask: in each silo, round(test_fraction * n) of the n records of a class go to test.

    Splitting inside each silo gives every silo a local test set with its own label mix (events for
    survival data), as the reference setting does (ULDP-FL §5.1; FLamby's per-centre splits).
    """
    test = np.zeros(len(silos), dtype=bool)
    groups = silos.astype(np.int64) * (int(strata.max(initial=0)) + 1) + strata
    for group in np.unique(groups):
        members = rng.permutation(np.flatnonzero(groups == group))
        test[members[: int(round(test_fraction * len(members)))]] = True
    return test


def standardize(x_train: np.ndarray, x_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Features centred and scaled by the training records' mean and standard deviation.

    A constant feature keeps scale 1, so it becomes 0 rather than NaN.
    """
    mean = x_train.mean(axis=0, dtype=np.float64)
    scale = x_train.std(axis=0, dtype=np.float64)
    scale[scale == 0] = 1.0
    return (((x_train - mean) / scale).astype(np.float32), ((x_test - mean) / scale).astype(np.float32))


def federate(
    records: Records,
    *,
    n_users: int,
    n_silos: int,
    method: str,
    seed: int,
    labels_per_user: int | None,
    test_fraction: float,
    description: dict,
    alpha: float | None = None,
) -> FederatedData:
    """Link every record to a user and a silo, split each silo into train and test, scale.

    `alpha` is the power allocation's parameter (`method='power'`, free silos only).

    Fixed silos (the data names them) are split first, and users are drawn on the training
    records only; otherwise users and silos are drawn on all records and each silo is then
    split, as the reference implementation does for MNIST and Creditcard.
    """
    rng = np.random.default_rng(seed)
    strata = records.strata()
    if records.silos is not None:
        silos = records.silos
        test = split_per_silo(silos, strata, test_fraction, rng)
        train = ~test
        if records.users is not None:
            user_train = records.users[train]
        else:
            user_train = allocation.allocate_fixed(
                silos[train], n_users=n_users, n_silos=n_silos, method=method, rng=rng
            )
    else:
        if records.users is not None:
            users = records.users
            silos = allocation.uniform_silos(len(users), n_silos, rng)
        else:
            labels = None if records.task == "survival" else records.y
            users, silos = allocation.allocate_free(
                len(records.y),
                n_users=n_users,
                n_silos=n_silos,
                method=method,
                rng=rng,
                labels=labels,
                labels_per_user=labels_per_user,
                alpha=alpha,
            )
        test = split_per_silo(silos, strata, test_fraction, rng)
        train = ~test
        user_train = users[train]

    if not train.any():
        raise DataError(f"--test-fraction {test_fraction} leaves no training record")
    # records come in file order (MNIST's is sorted by digit); shuffle so order carries nothing
    order = rng.permutation(len(user_train))
    train, test = np.flatnonzero(train)[order], np.flatnonzero(test)
    user_train = user_train[order]
    x_train, x_test = records.x[train], records.x[test]
    if records.standardize:
        x_train, x_test = standardize(x_train, x_test)
    return FederatedData(
        name=records.name,
        task=records.task,
        metric=records.metric or METRICS[records.task],
        source=records.source,
        synthetic=records.synthetic,
        x_train=np.ascontiguousarray(x_train, dtype=np.float32),
        y_train=records.y[train].copy(),
        user_train=user_train.astype(np.int64),
        silo_train=silos[train].astype(np.int64),
        x_test=np.ascontiguousarray(x_test, dtype=np.float32),
        y_test=records.y[test].copy(),
        silo_test=silos[test].astype(np.int64),
        n_users=n_users,
        n_silos=n_silos,
        n_classes=records.n_classes,
        allocation=description,
        record_index=train.astype(np.int64),
        source_records=len(records.y),
    )
