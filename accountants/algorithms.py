"""ULDP-FL algorithms compiled into the mechanism they release (ULDP-FL §3).

Each preset turns an algorithm's hyper-parameters into a `Mechanism` plus the assumptions the
guarantee rests on; any accountant then accounts that mechanism.

- ULDP-NAIVE (Algorithm 1, Theorem 1): a user may move every silo's clipped delta. The paper
  takes that move to be at most C per silo (sensitivity |S| C, noise N(0, sigma^2 C^2 |S|) per
  silo, Line 14), but removing a user does not remove a silo's delta, it changes it: the clipped
  delta can go from one point of the C-ball to the opposite one, 2C. So the sensitivity of the
  sum is 2 |S| C, and the guarantee of noise multiplier sigma per round holds when each silo adds
  N(0, 4 sigma^2 C^2 |S|) (sum std 2 sigma C |S|), which is what `uldp train` does; with the
  paper's noise the real multiplier is sigma / 2.
- ULDP-AVG / ULDP-SGD (Algorithm 3, Theorem 3): per-user clipping with weights summing to one
  over silos bounds a user's contribution by C; each silo adds N(0, sigma^2 C^2 / |S|), the sum
  has std sigma C: again noise multiplier sigma per round, whatever the local epochs.
- User-level sub-sampling (Algorithm 4, Remark 1): the server Poisson-samples users with
  probability q each round (weights of unsampled users set to 0), so each round is a
  Poisson-subsampled Gaussian (Lemma 4). We apply the same server-side sampling to ULDP-NAIVE
  and ULDP-SGD; the argument is the same.
- ULDP-GROUP-k (Algorithm 2, Theorem 2): DP-SGD in every silo with record sampling rate gamma_s
  and Q local epochs per round, i.e. ceil(Q / gamma_s) steps per round; silos hold disjoint
  records, so the federation's record-level RDP is the maximum over silos (§D.2); flags B keep at
  most k records per user, and group privacy of k records gives user-level DP (Proposition 1).
"""
from __future__ import annotations

from uldp.errors import InvalidParameter
import math
from dataclasses import dataclass, field
from typing import Sequence

from .mechanism import Mechanism, ParallelSilos, SubsampledGaussian

ALGORITHMS = ("uldp-naive", "uldp-group", "uldp-avg", "uldp-sgd")


@dataclass(frozen=True)
class Plan:
    """An algorithm's run as an accounted mechanism, with what the guarantee assumes."""

    algorithm: str
    mechanism: Mechanism
    group_k: int | None  # ULDP-GROUP-k needs group privacy for k records; None: user level directly
    assumptions: dict[str, str] = field(default_factory=dict)


def plan_algorithm(
    algorithm: str,
    *,
    sigma: float,
    rounds: int,
    user_q: float = 1.0,
    silos: int | None = None,
    silo_sizes: Sequence[int] | None = None,
    batch_size: int | None = None,
    record_q: float | None = None,
    local_epochs: int = 1,
    k: int | None = None,
) -> Plan:
    """Compile one ULDP-FL algorithm's hyper-parameters into the mechanism it releases."""
    if algorithm not in ALGORITHMS:
        raise InvalidParameter(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    if rounds < 0:
        raise InvalidParameter(f"rounds must be >= 0, got {rounds}")
    n_silos = _silo_count(silos, silo_sizes)
    if algorithm == "uldp-group":
        return _plan_group(sigma=sigma, rounds=rounds, silo_sizes=silo_sizes, n_silos=n_silos,
                           batch_size=batch_size, record_q=record_q, local_epochs=local_epochs,
                           k=k, user_q=user_q)
    theorem = {"uldp-naive": "Theorem 1", "uldp-avg": "Theorem 3", "uldp-sgd": "Theorem 3"}[algorithm]
    silo_label = str(n_silos) if n_silos else "|S|"
    if algorithm == "uldp-naive":
        # Twice the paper's std: a user moves each silo's clipped delta by up to 2C (see above).
        noise = (f"each silo adds N(0, 4 sigma^2 C^2 {silo_label}), twice the std of Algorithm 1 "
                 f"line 14: user-level sensitivity 2 {silo_label} C (a user moves each silo's "
                 "clipped delta by up to 2C; the paper counts C)")
    else:
        noise = (f"each silo adds N(0, sigma^2 C^2 / {silo_label}); per-user clipping with weights "
                 "summing to 1 over silos bounds a user's contribution by C")
    assumptions = {
        "algorithm": f"{algorithm} ({theorem})",
        "noise": noise,
        "mechanism": f"{rounds} rounds of a Gaussian with noise multiplier {sigma:g}",
        "user sampling": (f"Poisson, q = {user_q:g} per round (Algorithm 4); the amplification holds "
                          "for observers who do not learn the sample (the released models), not "
                          "for the server that draws it (`uldp account` prints its view too)"
                          if user_q < 1
                          else "none (every user every round)"),
        "neighbouring": "add or remove all records of one user, in every silo",
    }
    if algorithm in ("uldp-avg", "uldp-sgd"):
        assumptions["local epochs"] = "do not change the guarantee (Theorem 3)"
    return Plan(algorithm, SubsampledGaussian(sigma, user_q, rounds), None, assumptions)


def _silo_count(silos: int | None, silo_sizes: Sequence[int] | None) -> int | None:
    if silo_sizes is not None:
        if any(n < 1 for n in silo_sizes):
            raise InvalidParameter("silo sizes must be positive record counts")
        if silos is not None and silos != len(silo_sizes):
            raise InvalidParameter(f"--silos {silos} disagrees with {len(silo_sizes)} --silo-sizes")
        return len(silo_sizes)
    if silos is not None and silos < 1:
        raise InvalidParameter(f"silos must be >= 1, got {silos}")
    return silos


def dp_sgd_rate(batch_size: int, silo_size: int) -> float:
    """ULDP-GROUP-k's record sampling rate gamma_s = min(1, batch / |D'_s|) (Algorithm 2)."""
    return min(1.0, batch_size / silo_size)


def dp_sgd_steps(local_epochs: int, rate: float) -> int:
    """DP-SGD steps per round for Q local epochs at sampling rate gamma: ceil(Q / gamma)."""
    return math.ceil(local_epochs / rate - 1e-9)  # the tolerance keeps Q / 0.1 = 10 at 10


def _plan_group(*, sigma: float, rounds: int, silo_sizes: Sequence[int] | None, n_silos: int | None,
                batch_size: int | None, record_q: float | None, local_epochs: int, k: int | None,
                user_q: float) -> Plan:
    if k is None or k < 1:
        raise InvalidParameter("uldp-group needs --k, the most records kept per user (k >= 1)")
    if local_epochs < 1:
        raise InvalidParameter(f"local epochs must be >= 1, got {local_epochs}")
    if (batch_size is None) == (record_q is None):
        raise InvalidParameter("uldp-group needs exactly one of --batch-size (with --silo-sizes) or --record-q")
    if record_q is not None:
        if not 0 < record_q <= 1:
            raise InvalidParameter(f"record-q must be in (0, 1], got {record_q}")
        rates = [record_q] * (n_silos or 1)
        sampling = f"Poisson, gamma = {record_q:g} in every silo"
    else:
        if silo_sizes is None:
            raise InvalidParameter("--batch-size needs --silo-sizes (the record count of each silo)")
        if batch_size < 1:
            raise InvalidParameter(f"batch size must be >= 1, got {batch_size}")
        rates = [dp_sgd_rate(batch_size, n) for n in silo_sizes]
        sampling = (f"Poisson, gamma_s = batch {batch_size} / silo size "
                    f"({', '.join(f'{g:.4g}' for g in rates)})")
    mechanisms = tuple(SubsampledGaussian(sigma, g, rounds * dp_sgd_steps(local_epochs, g))
                       for g in rates)
    unique = tuple(dict.fromkeys(mechanisms))
    mechanism: Mechanism = unique[0] if len(unique) == 1 else ParallelSilos(unique)
    steps = ", ".join(str(m.steps) for m in unique)
    assumptions = {
        "algorithm": "uldp-group (Theorem 2, group privacy of k records)",
        "noise": "DP-SGD per silo, per-record clipping C, noise N(0, sigma^2 C^2) per step",
        "record sampling": sampling,
        "mechanism": (f"per silo {rounds} rounds x ceil({local_epochs} epochs / gamma) = {steps} "
                      f"steps of a subsampled Gaussian with noise multiplier {sigma:g}"),
        "silos": "disjoint records: record-level RDP is the maximum over silos (parallel composition)",
        "contribution bound": f"flags B keep at most k = {k} records per user across all silos",
        "neighbouring": "add or remove up to k records of one user",
    }
    if user_q < 1:
        assumptions["user sampling"] = "not used by uldp-group (Algorithm 2 has none)"
    return Plan("uldp-group", mechanism, k, assumptions)
