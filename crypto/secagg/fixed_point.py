"""Fixed-point encoding of float64 vectors into the ring Z_{2^64}, where the masks live.

Secure aggregation (Bonawitz et al. 2017, §3; Algorithm 3 of Baek et al. 2021, line 27) adds
masks that are uniform on a finite group and cancel in the sum; floats have no such group. Each
coordinate x is sent as the integer q = rint(x 2^f), in two's complement modulo 2^64 (numpy's
uint64 arithmetic wraps modulo 2^64 for free), f = `frac_bits`, resolution 2^-f.

The sum must not wrap: with |x| <= `bound` on every coordinate, |q| <= M = ceil(bound 2^f), and
the exact integer sum S of n codes satisfies |S| <= n M. `check_capacity(n)` refuses n M > 2^63 - 1;
below it the two's-complement reading of S mod 2^64 is S itself, so decoding is exact in Z.

Error bound of `decode` (stated once, tested in tests/crypto/test_secagg_primitives.py): each code
rounds by at most 2^-(f+1), and decode returns fl(S) 2^-f (fl: rounding of an int64 to float64,
exact when |S| <= 2^53; the scaling by 2^-f is exact), so for n inputs

    |decode(S) - sum_i x_i|  <=  n 2^-(f+1)  +  2^-53 |decode(S)|,

the second term being 0 whenever |S| <= 2^53 (e.g. |sum| <= 2^29 at the default f = 24).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from uldp.errors import InvalidParameter

DEFAULT_FRAC_BITS = 24
"""Resolution 2^-24 (about 6e-8): below the float32 precision of a model update near 1."""

MAX_FRAC_BITS = 62
LARGEST_SUM = 2**63 - 1
"""The largest |sum| whose two's-complement reading modulo 2^64 is still itself."""


@dataclass(frozen=True)
class FixedPoint:
    """Codes q = rint(x 2^frac_bits) in Z_{2^64} for |x| <= bound (module docstring)."""

    bound: float
    frac_bits: int = DEFAULT_FRAC_BITS

    def __post_init__(self) -> None:
        if isinstance(self.frac_bits, bool) or not isinstance(self.frac_bits, int):
            raise InvalidParameter(f"frac_bits must be an int, got {self.frac_bits!r}")
        if not 0 <= self.frac_bits <= MAX_FRAC_BITS:
            raise InvalidParameter(f"frac_bits must be in [0, {MAX_FRAC_BITS}], got {self.frac_bits}")
        if isinstance(self.bound, bool) or not isinstance(self.bound, numbers.Real):
            raise InvalidParameter(f"bound must be a finite number > 0, got {self.bound!r}")
        object.__setattr__(self, "bound", float(self.bound))  # numpy scalars too
        if not math.isfinite(self.bound) or self.bound <= 0:
            raise InvalidParameter(f"bound must be a finite number > 0, got {self.bound!r}")
        if self.largest_code > LARGEST_SUM // 2:
            raise InvalidParameter(
                f"bound={self.bound} with frac_bits={self.frac_bits}: a single code would exceed "
                f"2^62, so not even two inputs could be summed without wrapping modulo 2^64"
            )

    @property
    def resolution(self) -> float:
        return math.ldexp(1.0, -self.frac_bits)

    @property
    def largest_code(self) -> int:
        """M = ceil(bound 2^f): the largest |q| of an input within the bound (exact: a power-of-two scale)."""
        return math.ceil(math.ldexp(float(self.bound), self.frac_bits))

    def max_participants(self) -> int:
        """The most inputs whose sum cannot wrap: floor((2^63 - 1) / M)."""
        return LARGEST_SUM // self.largest_code

    def check_capacity(self, participants: int) -> None:
        """InvalidParameter (naming the bound) if `participants` inputs could sum past 2^63 - 1."""
        if participants > self.max_participants():
            largest_bound = math.ldexp(float(LARGEST_SUM // participants), -self.frac_bits)
            raise InvalidParameter(
                f"bound={self.bound} with frac_bits={self.frac_bits}: the sum of {participants} inputs "
                f"could reach {participants * self.largest_code} > 2^63 - 1 and wrap modulo 2^64; "
                f"use bound <= {largest_bound:.6g} or fewer fractional bits"
            )

    def encode(self, vector: np.ndarray) -> np.ndarray:
        """The uint64 codes of a float vector; InvalidParameter if a coordinate is beyond the bound."""
        x = np.asarray(vector, dtype=np.float64)
        within = np.abs(x) <= self.bound  # False for NaN too
        if not within.all():
            index = int(np.argmin(within))
            raise InvalidParameter(
                f"input coordinate {index} is {float(x.flat[index])!r}, outside the bound "
                f"|x| <= {self.bound} that fixes the fixed-point capacity; clip the input or raise bound"
            )
        # x 2^f and rint are exact; |x 2^f| <= 2^62 fits int64; the uint64 view is two's complement.
        return np.rint(np.ldexp(x, self.frac_bits)).astype(np.int64).view(np.uint64)

    def decode(self, total: np.ndarray) -> np.ndarray:
        """The float64 value of a sum of codes (exact integer sum, see the module docstring's bound)."""
        codes = np.asarray(total)
        if codes.dtype != np.uint64:
            raise InvalidParameter(f"decode expects uint64 codes, got {codes.dtype}")
        return np.ldexp(codes.view(np.int64).astype(np.float64), -self.frac_bits)

    def rounding_error_bound(self, participants: int) -> float:
        """n 2^-(f+1): the bound on |decode(S) - sum x_i| while |S| <= 2^53 (module docstring)."""
        return participants * math.ldexp(1.0, -(self.frac_bits + 1))
