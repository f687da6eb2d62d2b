"""Shamir's (k, n) secret sharing (Shamir 1979) of 32-byte secrets over the prime field F_p, p = 2^521 - 1.

Algorithm 3 of Baek et al. (2021), line 20: every participant shares its mask seed b_i and its
key-agreement private key s_i^SK among the round's participants, so that any k of them can rebuild
either secret for the server (line 36) and any k - 1 learn nothing about it.

A secret s < 2^256 is the constant term of f(x) = s + a_1 x + ... + a_{k-1} x^{k-1} over F_p with
a_1..a_{k-1} uniform on F_p (from `secrets`); the share of the participant at point x is f(x). p is
the Mersenne prime 2^521 - 1: any prime above 2^256 would do, this one is well known and leaves no
doubt about its primality. Points are 1..p - 1 (the protocol uses participant id + 1: never 0,
where f(0) is the secret). Reconstruction is Lagrange interpolation at 0 from k shares, after a
check that all the shares received lie on one polynomial of degree < k, and is refused with fewer
than k: k - 1 shares fit every secret equally well, so any value returned from them would be a
guess, not the secret.

Why our own code: `cryptography` has no secret sharing; PyCryptodome's `Crypto.Protocol.SecretSharing`
works on 16-byte blocks over GF(2^128) and is no dependency of `uldp[crypto]`; Flower's
`flwr.common.secure_aggregation.crypto.shamir` wraps it and is Flower-internal. The arithmetic here
is a few lines of gmpy2 with nothing secret-dependent in its control flow beyond gmpy2's own.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Iterable, Mapping

import gmpy2

from uldp.errors import InvalidParameter, ProtocolError

PRIME = 2**521 - 1
"""The Mersenne prime M_521: the field of the shares."""

SECRET_BYTES = 32
SHARE_BYTES = (PRIME.bit_length() + 7) // 8
"""66: a share y in [0, p) as a fixed-length big-endian byte string."""

_P = gmpy2.mpz(PRIME)


def _check_points(points: Iterable[int]) -> tuple[int, ...]:
    xs = tuple(points)
    if len(set(xs)) != len(xs):
        raise InvalidParameter("Shamir evaluation points must be distinct")
    for x in xs:
        if not 0 < x < PRIME:
            raise InvalidParameter(f"Shamir evaluation point {x} is not in [1, p - 1] (0 is the secret)")
    return xs


def share_secret(secret: bytes, threshold: int, points: Iterable[int]) -> dict[int, int]:
    """{x: f(x)} for each point: a fresh (threshold, len(points)) sharing of the 32-byte `secret`."""
    if len(secret) != SECRET_BYTES:
        raise InvalidParameter(f"a shared secret has {SECRET_BYTES} bytes, got {len(secret)}")
    xs = _check_points(points)
    if not 1 <= threshold <= len(xs):
        raise InvalidParameter(f"threshold must be in [1, {len(xs)}] (the number of points), got {threshold}")
    # Highest degree first, for Horner's rule; the constant term is the secret.
    coefficients = [gmpy2.mpz(secrets.randbelow(PRIME)) for _ in range(threshold - 1)]
    coefficients.append(gmpy2.mpz(int.from_bytes(secret, "big")))
    shares = {}
    for x in xs:
        y = gmpy2.mpz(0)
        for a in coefficients:
            y = (y * x + a) % _P
        shares[x] = int(y)
    return shares


@functools.lru_cache(maxsize=64)
def _lagrange_at_zero(xs: tuple[int, ...]) -> tuple[gmpy2.mpz, ...]:
    """lambda_m = prod_{l != m} x_l / (x_l - x_m) mod p: f(0) = sum_m lambda_m f(x_m).

    The server rebuilds every secret of a round from the same k points: cached, once per round.
    """
    coefficients = []
    for m, xm in enumerate(xs):
        numerator, denominator = gmpy2.mpz(1), gmpy2.mpz(1)
        for l, xl in enumerate(xs):  # noqa: E741 (the textbook's index)
            if l != m:
                numerator = numerator * xl % _P
                denominator = denominator * (xl - xm) % _P
        coefficients.append(numerator * gmpy2.invert(denominator, _P) % _P)
    return tuple(coefficients)


@functools.lru_cache(maxsize=64)
def _parity_weights(xs: tuple[int, ...], threshold: int) -> tuple[gmpy2.mpz, ...]:
    """c_m = h(x_m) / prod_{l != m} (x_m - x_l), h a secret random polynomial of degree len(xs) - k - 1.

    For every f of degree < k, sum_m c_m f(x_m) is the leading coefficient of the interpolation of
    f h (degree <= len(xs) - 2) through len(xs) points, hence 0: the c_m span the dual of the
    Reed-Solomon code that consistent shares form. For values that lie on no such f, the sum is a
    non-zero linear form in h's random coefficients, 0 with probability 1/p.
    """
    h = [gmpy2.mpz(secrets.randbelow(PRIME)) for _ in range(len(xs) - threshold)]
    weights = []
    for m, xm in enumerate(xs):
        denominator, value = gmpy2.mpz(1), gmpy2.mpz(0)
        for l, xl in enumerate(xs):  # noqa: E741 (the textbook's index)
            if l != m:
                denominator = denominator * (xm - xl) % _P
        for a in h:
            value = (value * xm + a) % _P
        weights.append(value * gmpy2.invert(denominator, _P) % _P)
    return tuple(weights)


def reconstruct_secret(shares: Mapping[int, int], threshold: int) -> bytes:
    """The 32-byte secret behind `shares` ({x: y}) of a sharing with this `threshold`.

    With more than k = `threshold` shares, first checks that all of them lie on one polynomial of
    degree < k (a random parity check, `_parity_weights`: an inconsistent set passes with
    probability 1/p), so a corrupted share is caught rather than turned into a wrong secret; then
    interpolates the k of smallest x. ProtocolError with fewer than k shares (nothing is
    computed), with a share outside [0, p), or with shares that are not one sharing of a 32-byte
    secret.
    """
    if len(shares) < threshold:
        raise ProtocolError(
            f"{len(shares)} shares of a secret shared with threshold k = {threshold}: "
            f"at least k are needed, nothing is reconstructed"
        )
    points = _check_points(sorted(shares))
    for x in points:
        if not 0 <= shares[x] < PRIME:
            raise ProtocolError(f"the share at point {x} is not an element of F_p")
    if len(points) > threshold:
        parity = sum(c * shares[x] for x, c in zip(points, _parity_weights(points, threshold))) % _P
        if parity:
            raise ProtocolError(
                "the shares do not lie on one polynomial of degree k - 1: they are inconsistent"
            )
    secret = gmpy2.mpz(0)
    xs = points[:threshold]
    for x, coefficient in zip(xs, _lagrange_at_zero(xs)):
        secret += coefficient * shares[x]
    secret %= _P
    if secret.bit_length() > 8 * SECRET_BYTES:
        raise ProtocolError("the shares do not interpolate to a 32-byte secret: they are inconsistent")
    return int(secret).to_bytes(SECRET_BYTES, "big")


def share_to_bytes(y: int) -> bytes:
    return y.to_bytes(SHARE_BYTES, "big")


def share_from_bytes(data: bytes) -> int:
    """The share y of `data`; ProtocolError if it is not SHARE_BYTES long or y >= p."""
    if len(data) != SHARE_BYTES:
        raise ProtocolError(f"a share has {SHARE_BYTES} bytes, got {len(data)}")
    y = int.from_bytes(data, "big")
    if y >= PRIME:
        raise ProtocolError("a share is not an element of F_p")
    return y
