"""The key of a federated data set: what a checkpoint and a silo's partition file are checked
against, so that neither is used with other data than it was written for."""

from __future__ import annotations


def data_key(data) -> dict:
    """What identifies `data` (a FederatedData): its name, sizes, allocation and, with personal
    budgets, the digest of its rates; JSON-ready. A checkpoint holds it, so that a run resumes
    only on the data it started on, and a silo's partition file holds its digest
    (`flower.partitions.federation_id`), so that a silo trains only on its own federation's."""
    from .rates import rates_digest

    return {
        "name": data.name,
        "n_train": int(len(data.y_train)),
        "n_users": int(data.n_users),
        "n_silos": int(data.n_silos),
        "synthetic": bool(data.synthetic),
        "allocation": repr(sorted(data.allocation.items())) if isinstance(data.allocation, dict) else "",
        **({"rates": rates_digest(data)} if data.record_q is not None or data.user_q is not None else {}),
    }
