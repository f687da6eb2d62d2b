"""Your own federated data, for `uldp train --data examples/own_data.py:load`.

    uldp train --algo uldp-avg --data examples/own_data.py:load --model examples/own_model.py:make_model

`load` is what your loader would be: it reads (here: draws) the records, says whose each record
is (`users`: any ids, one per record) and which silo holds it (`silos`), and hands them to
`federated_data`. A person's records may sit in several silos: user-level DP protects the
person, wherever their records are. A loader may also return the tuple (x, y, users, silos)
itself; it is called with `seed` when it takes it.
"""

from __future__ import annotations

import numpy as np

from uldp.trainers.data.own_data import federated_data

HOSPITALS = ("north", "south", "east")
SIZE = 12  # images of 1 x SIZE x SIZE pixels


def load(seed: int = 0):
    """1,200 small synthetic images of 3 classes (horizontal, vertical and diagonal stripes),
    belonging to 120 patients spread over 3 hospitals."""
    rng = np.random.default_rng(seed)
    n = 1200
    y = rng.integers(0, 3, size=n)
    rows, cols = np.indices((SIZE, SIZE))
    patterns = np.stack([(rows % 4 < 2), (cols % 4 < 2), ((rows + cols) % 4 < 2)]).astype(np.float32)
    x = patterns[y][:, None] + rng.normal(0.0, 0.6, size=(n, 1, SIZE, SIZE)).astype(np.float32)
    patients = np.array([f"patient-{i:02d}" for i in rng.integers(0, 120, size=n)])
    hospitals = np.array(HOSPITALS)[rng.integers(0, len(HOSPITALS), size=n)]
    return federated_data(
        x,
        y,
        patients,
        hospitals,
        name="stripes",
        source="SYNTHETIC stripes drawn by examples/own_data.py",
        synthetic=True,
        seed=seed,
    )
