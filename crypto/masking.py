"""Pairwise additive masks (secure aggregation) and multiplicative blinding on F_n.

ULDP-FL §4.1, Protocol 1: setup (d) blinds each count as B(n_{s,u}) = r_u n_{s,u} mod n; setup (e)
and round (c) hide each silo's contribution under pairwise masks that cancel in the sum over
silos (Appendix D.4, first display; Bonawitz et al. [8]). Silo s adds +r_{s,s'} for every s' > s
and -r_{s,s'} for every s' < s, with r_{s,s'} = r_{s',s} expanded from the pairwise key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import gmpy2

from uldp.crypto.prg import field_elements
from uldp.errors import InvalidParameter


def pairwise_masks(
    own_id: int, pair_seeds: Mapping[int, bytes], label: str, count: int, modulus: int
) -> list[gmpy2.mpz]:
    """sum_{s' > s} r_{s,s'} - sum_{s' < s} r_{s,s'} (mod n), element-wise over `count` entries.

    `pair_seeds` maps every other silo id s' to the seed shared with it. Summed over all silos
    the masks are 0 mod n; any proper subset of them is uniform on F_n^count.
    """
    total = [gmpy2.mpz(0)] * count
    for peer, seed in pair_seeds.items():
        if peer == own_id:
            raise InvalidParameter(f"silo {own_id} cannot share a mask with itself")
        sign = 1 if peer > own_id else -1
        stream = field_elements(seed, label, count, modulus)
        total = [(acc + sign * r) % modulus for acc, r in zip(total, stream)]
    return total


def add_masks(values: Sequence[int], masks: Sequence[int], modulus: int) -> list[gmpy2.mpz]:
    """values + masks (mod n), element-wise."""
    if len(values) != len(masks):
        raise InvalidParameter(f"{len(values)} values but {len(masks)} masks")
    return [(gmpy2.mpz(v) + m) % modulus for v, m in zip(values, masks)]


def blind(values: Sequence[int], blinds: Sequence[int], modulus: int) -> list[gmpy2.mpz]:
    """B(x) = r x (mod n), element-wise: multiplicative blinding (Protocol 1, setup (d))."""
    if len(values) != len(blinds):
        raise InvalidParameter(f"{len(values)} values but {len(blinds)} blinds")
    return [gmpy2.mpz(r) * v % modulus for v, r in zip(values, blinds)]


def inverse_mod(value: int, modulus: int) -> gmpy2.mpz:
    """value^{-1} mod n (Protocol 1, setup (f)); ValueError if value is not a unit of F_n."""
    value = gmpy2.mpz(value) % modulus
    if value == 0 or gmpy2.gcd(value, modulus) != 1:
        raise InvalidParameter("value has no inverse modulo n (zero, or shares a factor with n)")
    return gmpy2.invert(value, modulus)
