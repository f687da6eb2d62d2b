"""A cryptographic PRG from a 32-byte seed to uniform elements of F_n (or of Z*_n).

Protocol 1 of ULDP-FL (§4.1) expands shared seeds into masks: the multiplicative masks r_u from
the common seed R (setup (d)) and the pairwise additive masks r^u_{s,s'} from sk_{s,s'} (setup (e),
round (c)). Each element is SHAKE-256(seed, label, index, attempt) cut to the bit length of n
and rejection-sampled below n, so it is uniform on [0, n) (never `x mod n`, which is biased), and
element i can be computed without the ones before it.
"""

from __future__ import annotations

import hashlib

import gmpy2

from uldp.errors import InvalidParameter

MIN_SEED_BYTES = 16


def _block(seed: bytes, label: bytes, index: int, attempt: int, nbytes: int) -> int:
    # Length-prefixed fields: no two (label, index, attempt) give the same input.
    data = b"uldp-prg" + len(label).to_bytes(4, "big") + label
    data += index.to_bytes(8, "big") + attempt.to_bytes(4, "big")
    return int.from_bytes(hashlib.shake_256(seed + data).digest(nbytes), "big")


def field_element(seed: bytes, label: str, index: int, modulus: int) -> gmpy2.mpz:
    """Element `index` of the stream (seed, label): uniform on [0, modulus)."""
    if len(seed) < MIN_SEED_BYTES:
        raise InvalidParameter(f"PRG seed must have >= {MIN_SEED_BYTES} bytes, got {len(seed)}")
    if modulus < 2:
        raise InvalidParameter(f"modulus must be >= 2, got {modulus}")
    bits = int(modulus - 1).bit_length()
    nbytes = (bits + 7) // 8
    excess = 8 * nbytes - bits
    tag = label.encode()
    attempt = 0
    while True:
        candidate = _block(seed, tag, index, attempt, nbytes) >> excess
        if candidate < modulus:
            return gmpy2.mpz(candidate)
        attempt += 1


def field_elements(seed: bytes, label: str, count: int, modulus: int) -> list[gmpy2.mpz]:
    """Elements 0..count-1 of the stream (seed, label)."""
    return [field_element(seed, label, index, modulus) for index in range(count)]


def unit_elements(seed: bytes, label: str, count: int, modulus: int) -> list[gmpy2.mpz]:
    """`count` uniform elements of Z*_modulus (non-zero and coprime to it), by rejection.

    For a Paillier n a draw that is not a unit would reveal a factor of n; it happens with
    probability about 2^-(bits/2) (ULDP-FL Appendix D.4, Eq. (4)), so rejecting changes nothing.
    """
    units: list[gmpy2.mpz] = []
    index = 0
    while len(units) < count:
        candidate = field_element(seed, label, index, modulus)
        index += 1
        if candidate != 0 and gmpy2.gcd(candidate, modulus) == 1:
            units.append(candidate)
    return units
