"""The accounting side of an algorithm: the `Plan` it compiles into, and DP-SGD's schedule.

Each ULDP-FL algorithm (ULDP-FL §3) compiles its hyper-parameters into a `Plan`: the mechanism
it releases plus the assumptions the guarantee rests on; any accountant then accounts that
mechanism. The algorithms and their plans live in `uldp.trainers.algorithms` (one module each,
registered by name; `plan_algorithm` there compiles one); this module keeps what is pure
accounting, and imports nothing from the trainers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from .events import Mechanism


@dataclass(frozen=True)
class Plan:
    """An algorithm's run as an accounted mechanism, with what the guarantee assumes."""

    algorithm: str
    mechanism: Mechanism
    group_k: int | None  # ULDP-GROUP-k needs group privacy for k records; None: user level directly
    assumptions: dict[str, str] = field(default_factory=dict)


def dp_sgd_rate(batch_size: int, silo_size: int) -> float:
    """ULDP-GROUP-k's record sampling rate gamma_s = min(1, batch / |D'_s|) (Algorithm 2)."""
    return min(1.0, batch_size / silo_size)


def dp_sgd_fraction(batch_size: int, silo_size: int) -> Fraction:
    """`dp_sgd_rate` as the exact ratio of the two counts, for `dp_sgd_steps`
    (float(dp_sgd_fraction(B, n)) == dp_sgd_rate(B, n): both are B / n correctly rounded)."""
    return min(Fraction(1), Fraction(batch_size, silo_size))


def dp_sgd_steps(local_epochs: int, rate: float | Fraction) -> int:
    """DP-SGD steps per round for Q local epochs at sampling rate gamma: ceil(Q / gamma), exactly.

    Give gamma = B / |D_s| as `dp_sgd_fraction(B, |D_s|)`: a float B / |D_s| is off by a rounding
    error either way, which ceil turns into a step too many (1 / float(1/3) > 3) or, with a
    tolerance, too few (B = 2e9, |D_s| = 2e9 + 1 needs 2 steps). A float rate (a user's
    --record-q) is read as the decimal it prints as, which is what was typed: 0.1 is 1/10."""
    exact = rate if isinstance(rate, Fraction) else Fraction(repr(float(rate)))
    return math.ceil(local_epochs / exact)


def dataset_rate(batch_size: int, dataset_size: int) -> float:
    """A centralised DP-SGD run's Poisson rate q = B / N, TF-Privacy's
    `poisson_subsampling_probability`. Opacus' `sample_rate` is 1 / len(data_loader) =
    1 / ceil(N / B), at most B / N (equal when B divides N): ours is the larger rate, so its
    epsilon is never below Opacus' (the safe side)."""
    return batch_size / dataset_size


def epochs_steps(epochs: float, q: float) -> int:
    """Steps of `epochs` passes at Poisson rate q: int(math.ceil(epochs / q)), TF-Privacy's count
    (compute_dp_sgd_privacy_lib), floating point included. Opacus' `get_noise_multiplier` takes
    int(epochs / q): the same when epochs / q is whole, else one step fewer than this (the extra
    step here only raises epsilon). `uldp report`, `uldp account` and `uldp calibrate` use it."""
    return int(math.ceil(epochs / q))
