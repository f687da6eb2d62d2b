"""Clipping weights W and the server's weighted sum for ULDP-AVG-w (ULDP-FL §4.1).

- `uniform_weights`: w_{s,u} = 1/|S| (ULDP-AVG as evaluated in §5.1).
- `record_count_weights`: w_{s,u} = n_{s,u} / N_u with N_u = sum_s n_{s,u} (Eq. 3).
Both sum to one over silos for every user (Algorithm 3's constraint), so a user's weighted,
clipped deltas add up to norm at most C; Algorithm 4 sets the weights of users not sampled to 0.

`plaintext_weighted_sum` is the server computing sum_s sum_u sampled_u w_{s,u} Delta~_{s,u}
+ sum_s z_s in the clear (it then knows every n_{s,u}); `SecureWeighting` hands the same inputs
to Protocol 1 (`crypto.WeightingSession`), which returns the same sum while hiding the histogram.
"""

from __future__ import annotations

import numpy as np
import torch

from uldp.errors import InvalidParameter

from .base import SiloUserDeltas


def uniform_weights(n_silos: int, n_users: int) -> np.ndarray:
    """w_{s,u} = 1/|S| for every silo and user."""
    return np.full((n_silos, n_users), 1.0 / n_silos)


def record_count_weights(counts: np.ndarray) -> np.ndarray:
    """w_{s,u} = n_{s,u} / N_u (Eq. 3); users without records get weight 0 everywhere."""
    totals = counts.sum(axis=0)
    return np.divide(counts, totals, out=np.zeros(counts.shape, dtype=float), where=totals > 0)


def plaintext_weighted_sum(
    messages: list[SiloUserDeltas], counts: np.ndarray, sampled: np.ndarray, *, fault: str | None = None
) -> torch.Tensor:
    """sum_s sum_u sampled_u n_{s,u}/N_u Delta~_{s,u} + sum_s z_s, computed by the server in clear
    (`fault`: `uldp audit --break-mechanism` only, see `faults`)."""
    from . import faults

    weights = faults.weights(record_count_weights(counts), fault) * sampled[None, :]
    total = None
    for m in messages:
        w = torch.as_tensor(weights[m.silo, m.users], dtype=m.deltas.dtype, device=m.deltas.device)
        part = w @ m.deltas + m.noise
        if m.dirac is not None:  # `uldp audit`'s canaries, weighted as every row
            m.dirac.add_sum_to(part, torch.as_tensor(weights[m.silo, m.dirac.users], dtype=part.dtype))
        total = part if total is None else total + part
    assert total is not None  # every round has at least one silo's message
    return total


def secure_protocol():
    """Protocol 1's session class from the crypto package; ValueError (one line) if missing."""
    try:
        from uldp import crypto

        return crypto.WeightingSession
    except (ImportError, AttributeError) as err:
        raise InvalidParameter(
            "--secure needs the crypto package's Protocol 1 (crypto.WeightingSession), "
            f"which is not available ({err})"
        ) from None


class SecureWeighting:
    """The same weighted sum through Protocol 1 (Paillier, DH, blinding; ULDP-FL §4.1).

    The setup (keys, shared seeds, blinded histograms) runs once, at the first round, as the
    paper's "setup phase ... executed only once during the entire training process"; each
    round then runs the weighting phase (a)-(c). The result equals `plaintext_weighted_sum` to
    within the encoding precision P = 1e-10.
    """

    def __init__(
        self, counts: np.ndarray, dimension: int, *, key_bits: int, test_keys: bool, sampling: object = None
    ) -> None:
        session = secure_protocol()
        self.n_users = counts.shape[1]
        self.session = session(
            counts.astype(np.int64), dimension, key_bits=key_bits, test_keys=test_keys, sampling=sampling
        )

    def __call__(
        self, messages: list[SiloUserDeltas], sampled: np.ndarray | None, round_index: int | None = None
    ) -> torch.Tensor:
        """The weighted sum; `sampled` None under private sampling (the protocol draws it, from
        the training round `round_index`, as over Flower)."""
        ordered = sorted(messages, key=lambda m: m.silo)
        like = ordered[0].deltas
        inputs = [protocol_inputs(m, self.n_users) for m in ordered]
        chosen = None if sampled is None else sampled.astype(bool)
        total = self.session.round(
            [rows for rows, _ in inputs], chosen, [z for _, z in inputs], round_index=round_index
        )
        return torch.as_tensor(np.asarray(total, dtype=float), dtype=like.dtype, device=like.device)


def protocol_inputs(message: SiloUserDeltas, n_users: int) -> tuple[np.ndarray, np.ndarray]:
    """A silo's message as Protocol 1 takes it: (|U|, d) rows (zero for users it does not hold)
    and its (d,) noise share, in float64. The same at a silo over Flower as in process."""
    if message.dirac is not None:
        raise ValueError(
            "an audit's canary rows are not run through Protocol 1 (uldp audit refuses --secure)"
        )
    rows = np.zeros((n_users, message.deltas.shape[1]))
    rows[message.users] = message.deltas.detach().cpu().double().numpy()
    return rows, message.noise.detach().cpu().double().numpy()
