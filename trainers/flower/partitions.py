"""One silo's training records in a file of its own: what a silo's SuperNode is started with.

A partition is an `.npz` (numpy's format, read with `allow_pickle=False`: a file from elsewhere
cannot run code) holding the silo's features `x`, labels `y`, the owner `users` of every record,
and `silo`, `n_users` and `task`, so that a silo can check it was given its own file. In Flower's
simulation the run writes one per silo into a private temporary directory; in a deployment each
silo's operator points its SuperNode at its own (`--node-config "partition-id=S data-file=F"`),
and `write_partitions` makes them from any data set `uldp train` reads (docs/flower.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from uldp.errors import DataError

from ..atomic import atomic_write
from ..data_key import data_key

KEYS = frozenset(("x", "y", "users", "silo", "n_users", "task", "federation"))
#: What a partition may hold besides: `q`, each record's sampling rate (rpdp, unidp).
OPTIONAL = frozenset(("q",))


def federation_id(data) -> str:
    """A digest of the federation `data` describes (data set, sizes, allocation): the server
    sends it, and a silo refuses a partition file written for another federation."""
    return hashlib.sha256(json.dumps(data_key(data), sort_keys=True).encode()).hexdigest()[:16]


def partition_name(silo: int) -> str:
    return f"silo-{silo}.npz"


def write_partitions(data, directory: str | os.PathLike) -> list[Path]:
    """Write each silo's training records of `data` (a FederatedData) to `directory`/silo-S.npz."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(data.n_silos):
        idx = np.flatnonzero(data.silo_train == s)
        path = directory / partition_name(s)
        arrays = {
            "x": data.x_train[idx],
            "y": data.y_train[idx],
            "users": np.asarray(data.user_train[idx], dtype=np.int64),
            "silo": np.asarray(s, dtype=np.int64),
            "n_users": np.asarray(data.n_users, dtype=np.int64),
            "task": np.asarray(data.task),
            "federation": np.asarray(federation_id(data)),
        }
        if data.record_q is not None:
            arrays["q"] = np.asarray(data.record_q[idx], dtype=np.float64)
        atomic_write(path, functools.partial(_save, arrays=arrays), mode=0o600)
        paths.append(path)
    return paths


def _save(handle, *, arrays: dict[str, Any]) -> None:
    np.savez(handle, **arrays)


def read_partition(
    path: str | os.PathLike, silo: int, n_users: int, task: str, federation: str
) -> dict[str, np.ndarray]:
    """Silo `silo`'s records from `path`; `DataError` naming the file unless it is that silo's
    partition of this federation (`federation_id`) of `n_users` users and this task."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            if not KEYS <= set(archive.files) <= KEYS | OPTIONAL:
                raise DataError(f"data-file {path}: not a uldp partition (holds {sorted(archive.files)})")
            values = {key: archive[key] for key in archive.files}
    except FileNotFoundError:
        raise DataError(f"data-file {path}: no such file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise DataError(f"data-file {path}: cannot be read as a partition ({error})") from None
    if int(values["silo"]) != silo:
        raise DataError(f"data-file {path} holds silo {int(values['silo'])}'s records, not silo {silo}'s")
    if int(values["n_users"]) != n_users or str(values["task"]) != task:
        raise DataError(
            f"data-file {path} belongs to a federation of {int(values['n_users'])} users "
            f"({values['task']}), not this run's {n_users} ({task})"
        )
    if str(values["federation"]) != federation:
        raise DataError(
            f"data-file {path} was written for another federation (data set, users, silos, seed or "
            "allocation differ from the server's); write the partitions with the server's settings"
        )
    n = len(values["users"])
    if len(values["x"]) != n or len(values["y"]) != n:
        raise DataError(f"data-file {path}: x, y and users differ in length")
    if n and (values["users"].min() < 0 or values["users"].max() >= n_users):
        raise DataError(f"data-file {path}: user ids must lie in [0, {n_users})")
    if "q" in values:
        q = values["q"]
        if q.shape != (n,) or not np.all((q >= 0) & (q <= 1)):
            raise DataError(f"data-file {path}: q must hold one sampling rate in [0, 1] per record")
    return values
