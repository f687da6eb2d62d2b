"""Algorithm 5 of ULDP-FL (Encode / Decode): real numbers as elements of F_n, and back.

Encode(x, P, n) = round(x / P) mod n; Decode(y, P, C_LCM, n) takes y > n // 2 as the negative
y - n, then returns y / C_LCM * P. C_LCM = lcm(1, ..., N_max) makes every weight C_LCM / N_u an
integer for N_u <= N_max (Appendix D.4, condition (1)); condition (2) asks the signed aggregate
to stay below n / 2 in absolute value, or it wraps around F_n and decodes to garbage. This module
refuses, with a ValueError, every input for which either condition could fail instead of
wrapping silently.

Reading taken: Algorithm 5 line 4 says "x as integer"; we round to the nearest integer, which
halves the error to P / 2 per encoded value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import gmpy2
import numpy as np

from uldp.errors import InvalidParameter

DEFAULT_PRECISION = 1e-10
"""P of Protocol 1 (the paper's example, §4.1)."""

DEFAULT_N_MAX = 2000
"""N_max of Protocol 1 (the paper's example, §4.1): C_LCM < 10^867."""

DEFAULT_VALUE_BOUND = 1e10
"""Largest |value| of one coordinate of a clipped delta or a noise share (Appendix D.4 example)."""


@lru_cache(maxsize=32)
def lcm_up_to(n_max: int) -> int:
    """C_LCM = lcm(1, 2, ..., N_max) (Protocol 1, setup (a))."""
    if isinstance(n_max, bool) or not isinstance(n_max, int) or n_max < 1:
        raise InvalidParameter(f"N_max must be a positive integer, got {n_max!r}")
    return math.lcm(*range(1, n_max + 1))


@dataclass(frozen=True)
class Encoding:
    """The public fixed-point parameters every party agrees on: P, N_max and a value bound.

    `value_bound` caps |x| for every coordinate of a clipped per-user delta and of a silo's
    noise share; with it the largest possible aggregate is known before any data is seen
    (`aggregate_bound`), so overflow is ruled out up front (`check_capacity`).
    """

    precision: float = DEFAULT_PRECISION
    n_max: int = DEFAULT_N_MAX
    value_bound: float = DEFAULT_VALUE_BOUND
    c_lcm: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (
            isinstance(self.precision, (int, float)) and math.isfinite(self.precision) and self.precision > 0
        ):
            raise InvalidParameter(f"precision P must be a finite number > 0, got {self.precision!r}")
        if not (
            isinstance(self.value_bound, (int, float))
            and math.isfinite(self.value_bound)
            and self.value_bound > 0
        ):
            raise InvalidParameter(f"value bound must be a finite number > 0, got {self.value_bound!r}")
        object.__setattr__(self, "c_lcm", lcm_up_to(self.n_max))

    @property
    def max_fixed(self) -> int:
        """The largest |round(x / P)| for |x| <= value_bound."""
        return int(round(self.value_bound / self.precision))

    def aggregate_bound(self, users: int, silos: int) -> int:
        """An upper bound on |sum_s (sum_u E_su n_su C_LCM / N_u + Z_s C_LCM)| (Appendix D.4 (2)).

        sum_s n_su / N_u = 1 for each user, so the users contribute at most |U| max|E| C_LCM and
        the noise shares at most |S| max|Z| C_LCM.
        """
        return self.c_lcm * self.max_fixed * (users + silos)

    def check_capacity(self, modulus: int, users: int, silos: int) -> None:
        """ValueError unless every possible aggregate decodes exactly (|aggregate| < n / 2)."""
        bound = self.aggregate_bound(users, silos)
        if bound >= modulus // 2:
            raise InvalidParameter(
                f"the plaintext space is too small: a {int(modulus).bit_length()}-bit modulus holds "
                f"aggregates up to 2^{int(modulus).bit_length() - 1}, but |U| + |S| = "
                f"{users + silos} values of up to {self.value_bound:g} at precision "
                f"{self.precision:g} times C_LCM = lcm(1..{self.n_max}) (~2^{self.c_lcm.bit_length()}) "
                f"need ~2^{bound.bit_length()}; use a larger key, a smaller N_max, a coarser "
                f"precision or a smaller value bound"
            )

    def check_count(self, count: int, what: str = "count") -> None:
        """ValueError if a record count is negative or above N_max (condition (1) of D.4)."""
        if count < 0:
            raise InvalidParameter(f"{what} must be >= 0, got {count}")
        if count > self.n_max:
            raise InvalidParameter(
                f"{what} {count} exceeds N_max = {self.n_max}: C_LCM / N_u would not be an "
                f"integer and the result would not decode; raise N_max or cap records per user"
            )

    def fixed_point(self, values: np.ndarray | Sequence[float]) -> list[int]:
        """Algorithm 5 lines 2-4: round(x / P) as Python ints, for |x| <= value_bound only."""
        array = np.asarray(values, dtype=float).ravel()
        if not np.all(np.isfinite(array)):
            raise InvalidParameter("cannot encode a non-finite value (nan or inf)")
        largest = float(np.max(np.abs(array))) if array.size else 0.0
        if largest > self.value_bound:
            raise InvalidParameter(
                f"value {largest:g} exceeds the encoding's value bound {self.value_bound:g}; "
                f"it could overflow the plaintext space and decode wrongly"
            )
        scaled = np.rint(array / self.precision)
        # float -> int exactly, without int64 overflow for bounds up to 2^1023.
        return [int(v) for v in scaled.tolist()]

    def encode(self, values: np.ndarray | Sequence[float], modulus: int) -> list[gmpy2.mpz]:
        """Algorithm 5 Encode: round(x / P) mod n for each value."""
        n = gmpy2.mpz(modulus)
        if self.max_fixed >= n // 2:
            raise InvalidParameter("the value bound over the precision does not fit in F_n")
        return [gmpy2.mpz(v) % n for v in self.fixed_point(values)]

    def decode(self, value: int, modulus: int, *, bound: int, scaled: bool = True) -> float:
        """Algorithm 5 Decode: the signed representative of `value` over C_LCM (if `scaled`) times P.

        `bound` is required (e.g. `aggregate_bound(users, silos)`, or `max_fixed` for one
        unscaled value): a signed representative larger than it in absolute value raises a
        ValueError. It can only come from a wrapped sum or an N_u above N_max, whose results are
        spread over all of F_n and land inside the bound with negligible probability; without a
        bound such a value would decode silently to garbage.
        """
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
            raise InvalidParameter(
                f"decode needs an integer bound >= 0 on the signed representative, got {bound!r}"
            )
        n = int(modulus)
        signed = int(value) % n
        if signed > n // 2:
            signed -= n
        if abs(signed) > bound:
            raise InvalidParameter(
                "decrypted aggregate is outside the decodable range: some N_u exceeds N_max "
                f"= {self.n_max}, or a value exceeded the bound {self.value_bound:g}"
            )
        divisor = self.c_lcm if scaled else 1
        return signed / divisor * self.precision

    def decode_all(
        self, values: Iterable[int], modulus: int, *, bound: int, scaled: bool = True
    ) -> np.ndarray:
        """`decode` element-wise, as a float array; `bound` as in `decode` (required)."""
        return np.array([self.decode(v, modulus, bound=bound, scaled=scaled) for v in values], dtype=float)


def largest_n_max(
    modulus: int,
    users: int,
    silos: int,
    *,
    precision: float = DEFAULT_PRECISION,
    value_bound: float = DEFAULT_VALUE_BOUND,
    ceiling: int = DEFAULT_N_MAX,
) -> int:
    """The largest N_max <= `ceiling` whose C_LCM still passes `check_capacity` (0 if none).

    A function of public parameters only: it lets small (test) keys pick the N_max they can hold.
    """
    room = (int(modulus) // 2 - 1) // (int(round(value_bound / precision)) * (users + silos))
    lcm, best = 1, 0
    for k in range(1, ceiling + 1):
        lcm = math.lcm(lcm, k)
        if lcm > room:
            break
        best = k
    return best
