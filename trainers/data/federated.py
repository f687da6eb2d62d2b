"""A data set split into users and silos, ready for cross-silo training (ULDP-FL §5.1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TASKS = ("multiclass", "binary", "survival")
METRICS = {"multiclass": "accuracy", "binary": "roc_auc", "survival": "c_index"}


@dataclass(frozen=True, eq=False)
class FederatedData:
    """Training records linked to a user and a silo each, and a test split per silo.

    (eq=False: fields are arrays, so two instances compare by identity.)

    Labels are int64 class ids for `multiclass` and `binary`; for `survival` they are float32
    pairs (time, event) with event 1 for an observed event and 0 for a censored time. Test
    records carry a silo but no user: users only matter for what training releases.
    """

    name: str
    task: str
    metric: str
    source: str
    synthetic: bool
    x_train: np.ndarray
    y_train: np.ndarray
    user_train: np.ndarray
    silo_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    silo_test: np.ndarray
    n_users: int
    n_silos: int
    n_classes: int
    allocation: dict
    # Row numbers, in the source table or built-in set, of the training records (in training
    # order), and how many records the source holds: per-record budgets given for the source's
    # records (a file `uldp personalize` wrote, a drawn scenario) are matched through them.
    record_index: np.ndarray | None = None
    source_records: int = 0
    # Personalised budgets (issue 14), set by `trainers.rates.personalize_data`: each training
    # record's budget and sampling rate q (rPDP-FL), or each user's budget and rate q_u (ULDP).
    record_budget: np.ndarray | None = None
    record_q: np.ndarray | None = None
    user_budget: np.ndarray | None = None
    user_q: np.ndarray | None = None
    rates_assumptions: dict | None = None  # where the budgets came from, how the rates were made
    # The caller's own id of each user, in user order (user u is user_ids[u]), when the data named
    # its users with ids of its own (`trainers.data.own_data`: strings, any sortable ids); None
    # when users are numbered by uldp (built-in sets, tables).
    user_ids: np.ndarray | None = None

    @property
    def feature_shape(self) -> tuple[int, ...]:
        """Shape of one record's features, e.g. (1, 28, 28) for MNIST or (13,) for heart-disease."""
        return tuple(self.x_train.shape[1:])

    def records_per_user(self) -> np.ndarray:
        """Training records of each user, over all silos (N_u of ULDP-FL §4.1)."""
        return np.bincount(self.user_train, minlength=self.n_users)

    def user_silo_counts(self) -> np.ndarray:
        """Matrix n[s, u] of user u's training records in silo s (the histogram of §4.1)."""
        flat = self.silo_train * self.n_users + self.user_train
        counts = np.bincount(flat, minlength=self.n_silos * self.n_users)
        return counts.reshape(self.n_silos, self.n_users)
