"""The parameters every party of one secure-aggregation round agrees on.

Algorithm 3 of Baek et al. (2021) fixes the Shamir threshold k (line 6) and leaves the vector's
length and its encoding to the caller; here they are one frozen value, checked once.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

from uldp.crypto.secagg.fixed_point import DEFAULT_FRAC_BITS, FixedPoint
from uldp.errors import InvalidParameter


def as_int(value: object, name: str) -> int:
    """`value` as a Python int (numpy integers too); InvalidParameter naming `name` otherwise."""
    if isinstance(value, bool):
        raise InvalidParameter(f"{name} must be an int, got {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidParameter(f"{name} must be an int, got {value!r}") from None


MAX_ID = 2**63 - 1
"""Participant ids and round numbers are ints in [0, 2^63): 8 bytes in every key-derivation context."""


def check_id(value: object, name: str) -> int:
    """`value` as an int in [0, MAX_ID]; InvalidParameter naming `name` otherwise."""
    number = as_int(value, name)
    if not 0 <= number <= MAX_ID:
        raise InvalidParameter(f"{name} must be in [0, 2^63 - 1], got {number}")
    return number


@dataclass(frozen=True)
class SecAggParams:
    """Shamir threshold k >= 2, vector length d, per-coordinate bound |x| <= bound, 2^-frac_bits resolution.

    k shares reconstruct a secret and k - 1 reveal nothing: the protocol completes with at least k
    participants alive at each step (it survives n - k dropouts), and any k - 1 participants,
    colluding with the server, learn nothing beyond the sum (docs/secagg.md, threat model).
    """

    threshold: int
    dimension: int
    bound: float
    frac_bits: int = DEFAULT_FRAC_BITS

    def __post_init__(self) -> None:
        object.__setattr__(self, "threshold", as_int(self.threshold, "threshold"))
        object.__setattr__(self, "dimension", as_int(self.dimension, "dimension"))
        object.__setattr__(self, "frac_bits", as_int(self.frac_bits, "frac_bits"))
        object.__setattr__(self, "bound", self.fixed_point.bound)  # validated, as a float
        if self.threshold < 2:
            # k = 1 would let any single share, hence any one participant, reconstruct b_i and s_i^SK.
            raise InvalidParameter(f"threshold k must be >= 2, got {self.threshold}")
        if self.dimension < 1:
            raise InvalidParameter(f"dimension must be >= 1, got {self.dimension}")
        self.fixed_point.check_capacity(self.threshold)

    @property
    def fixed_point(self) -> FixedPoint:
        return FixedPoint(self.bound, self.frac_bits)

    def check_participants(self, participants: int) -> None:
        """InvalidParameter if `participants` is below k or their sum could wrap modulo 2^64."""
        if participants < self.threshold:
            raise InvalidParameter(
                f"threshold k = {self.threshold} exceeds the {participants} participants: "
                f"k must be <= the number of participants"
            )
        self.fixed_point.check_capacity(participants)
