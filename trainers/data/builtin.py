"""The built-in data sets by name, and `load_dataset`, which federates one of them."""

from __future__ import annotations

import numpy as np

from uldp.errors import DataError

from . import creditcard, gbsg2, heart_disease, mnist
from .allocation import ALLOCATIONS, check_alpha, describe, fixed_power_message
from .federated import FederatedData
from .pipeline import federate
from .records import Records

DATASETS: tuple[str, ...] = ("mnist", "heart-disease", "gbsg2", "creditcard")


def check_count(value: object, option: str, minimum: int = 1) -> int:
    """`value` as an int, or a ValueError naming `option` if it is not an integer >= minimum."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise DataError(f"{option} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_fraction(value: object, option: str = "--test-fraction") -> float:
    """`value` as a float strictly between 0 and 1, or a ValueError naming `option`."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0.0 < value < 1.0:
        raise DataError(f"{option} must be a number in (0, 1), got {value!r}")
    return float(value)


def records_of(name: str, path: str | None = None) -> Records:
    """The records of built-in data set `name` (creditcard: the file at `path`, else synthetic)."""
    if name not in DATASETS:
        raise DataError(
            f"--dataset must be one of {', '.join(DATASETS)}, got {name!r} "
            "(for your own CSV or Parquet file use load_table)"
        )
    if path is not None and name != "creditcard":
        raise DataError(f"--path is only read by --dataset creditcard, not {name}")
    if name == "mnist":
        return mnist.load()
    if name == "heart-disease":
        return heart_disease.load()
    if name == "gbsg2":
        return gbsg2.load()
    return creditcard.read(path) if path is not None else creditcard.synthetic()


def load_dataset(
    name: str,
    *,
    users: int,
    silos: int | None = None,
    allocation: str = "uniform",
    seed: int = 0,
    labels_per_user: int | None = None,
    path: str | None = None,
    test_fraction: float = 0.2,
    alpha: float | None = None,
) -> FederatedData:
    """Built-in data set `name` with its records allocated to `users` users and `silos` silos.

    `allocation` is 'uniform' or 'zipf' (ULDP-FL §5.1; see trainers/data/allocation.py), or
    'power' with its `alpha` in [1e-3, 1e3] (subject-level DP-FL §4.2; free silos only: mnist,
    gbsg2, creditcard); `labels_per_user` makes users non-i.i.d. (at most that many classes
    each); `silos` defaults to the paper's setting (5; heart-disease has its 4 hospitals, gbsg2
    6 like TcgaBrca). The same arguments give the same data, record for record.
    """
    method = allocation
    users = check_count(users, "--users")
    silos = None if silos is None else check_count(silos, "--silos")
    seed = check_count(seed, "--seed", minimum=0)
    test_fraction = check_fraction(test_fraction)
    if method not in ALLOCATIONS:
        raise DataError(f"--allocation must be one of {', '.join(ALLOCATIONS)}, got {method!r}")
    alpha = check_alpha(method, alpha)
    records = records_of(name, path)
    fixed = records.silos is not None
    if fixed and method == "power":
        raise DataError(fixed_power_message(name))
    if fixed and silos is not None and silos != records.default_silos:
        raise DataError(
            f"--silos: {name} has {records.default_silos} fixed silos "
            f"({', '.join(records.silo_names)}), got {silos}"
        )
    n_silos = records.default_silos if silos is None else silos
    _check_sizes(users, n_silos, len(records.y), name)
    if labels_per_user is not None:
        _check_labels_per_user(labels_per_user, records, name)
    description = describe(method, fixed_silos=fixed, labels_per_user=labels_per_user, seed=seed, alpha=alpha)
    if fixed:
        description["silo_names"] = list(records.silo_names)
    return federate(
        records,
        n_users=users,
        n_silos=n_silos,
        method=method,
        seed=seed,
        labels_per_user=labels_per_user,
        test_fraction=test_fraction,
        description=description,
        alpha=alpha,
    )


def _check_sizes(users: int, silos: int, n_records: int, name: str) -> None:
    """Every user and every silo must be able to hold a record: more of them than records would
    train users with no data while the epsilon and the averaging count them (issue 12)."""
    if users > n_records:
        raise DataError(
            f"--users {users} is more than the {n_records} records of {name}: "
            f"give --users {n_records} or fewer"
        )
    if silos > n_records:
        raise DataError(
            f"--silos {silos} is more than the {n_records} records of {name}: "
            f"give --silos {n_records} or fewer"
        )


def _check_labels_per_user(labels_per_user: int, records: Records, name: str) -> None:
    check_count(labels_per_user, "--labels-per-user")
    if records.task == "survival":
        raise DataError(f"--labels-per-user needs class labels; {name} is a survival task")
    if records.silos is not None:
        raise DataError(f"--labels-per-user is not available for {name}, whose silos are fixed by the data")
