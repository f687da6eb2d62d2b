"""Statistics of an allocation: how records spread over users and silos (for docs and checks)."""

from __future__ import annotations

import numpy as np

from .federated import FederatedData


def allocation_statistics(data: FederatedData) -> dict:
    """Summary of the training records' allocation.

    - records per user (N_u): mean, median, max, and the share of all records held by the
      10% of users with the most;
    - users with at least one record;
    - silos per user (how many silos hold some of a user's records), mean over those users;
    - main-silo share: the fraction of a user's records in the silo holding most of them,
      averaged over users weighted by N_u (0.8 by design for zipf on fixed silos);
    - records per silo and labels per user (max), for classification.
    """
    per_user = data.records_per_user()
    active = per_user > 0
    by_silo = data.user_silo_counts()[:, active]
    ranked = np.sort(per_user)[::-1]
    top = max(1, int(np.ceil(0.1 * data.n_users)))
    stats = {
        "records": int(per_user.sum()),
        "users": data.n_users,
        "users_with_records": int(active.sum()),
        "records_per_user_mean": float(per_user.mean()),
        "records_per_user_median": float(np.median(per_user)),
        "records_per_user_max": int(per_user.max(initial=0)),
        "top10pct_users_share": float(ranked[:top].sum() / max(1, per_user.sum())),
        "silos_per_user_mean": float((by_silo > 0).sum(axis=0).mean()) if active.any() else 0.0,
        "main_silo_share": float(by_silo.max(axis=0).sum() / max(1, per_user.sum())),
        "records_per_silo": np.bincount(data.silo_train, minlength=data.n_silos).tolist(),
        "test_records_per_silo": np.bincount(data.silo_test, minlength=data.n_silos).tolist(),
    }
    if data.task != "survival":
        pairs = np.unique(np.column_stack([data.user_train, data.y_train]), axis=0)
        stats["labels_per_user_max"] = int(np.bincount(pairs[:, 0]).max(initial=0))
    return stats
