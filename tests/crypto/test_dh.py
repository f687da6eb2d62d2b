"""RFC 3526 Diffie-Hellman and HKDF: the group is the standard one, both ends agree."""

from __future__ import annotations

import gmpy2
import mpmath
import pytest

from uldp.crypto.dh import (
    MODP_3072_GENERATOR,
    MODP_3072_ORDER,
    MODP_3072_PRIME,
    generate_dh_keypair,
    hkdf_sha256,
    pairwise_key,
    shared_secret,
    validate_public_key,
)


def test_group_is_rfc3526_group_15():
    # RFC 3526 §4: p = 2^3072 - 2^3008 - 1 + 2^64 * ([2^2942 pi] + 1690314).
    mpmath.mp.prec = 3200
    expected = (
        2**3072 - 2**3008 - 1 + 2**64 * (int(mpmath.floor(mpmath.mpf(2) ** 2942 * mpmath.pi)) + 1690314)
    )
    assert MODP_3072_PRIME == expected
    assert MODP_3072_PRIME.bit_length() == 3072
    assert gmpy2.is_prime(MODP_3072_PRIME) and gmpy2.is_prime(MODP_3072_ORDER)
    assert pow(MODP_3072_GENERATOR, MODP_3072_ORDER, MODP_3072_PRIME) == 1


def test_both_ends_derive_the_same_keys_and_purposes_differ():
    a, b, c = generate_dh_keypair(), generate_dh_keypair(), generate_dh_keypair()
    assert shared_secret(a, b.public) == shared_secret(b, a.public)
    ab = pairwise_key(a, 0, b.public, 1, "masks")
    assert ab == pairwise_key(b, 1, a.public, 0, "masks")
    assert len(ab) == 32
    assert ab != pairwise_key(a, 0, b.public, 1, "seed")
    assert ab != pairwise_key(a, 0, c.public, 2, "masks")


@pytest.mark.parametrize("bad", [0, 1, MODP_3072_PRIME - 1, MODP_3072_PRIME, MODP_3072_PRIME + 5])
def test_degenerate_public_keys_are_refused(bad):
    with pytest.raises(ValueError):
        validate_public_key(bad)


def test_element_outside_the_subgroup_is_refused():
    # A quadratic non-residue has order 2q (or p - 1), so it lies outside <2>.
    non_residue = next(g for g in range(3, 100) if pow(g, MODP_3072_ORDER, MODP_3072_PRIME) != 1)
    with pytest.raises(ValueError, match="subgroup"):
        validate_public_key(non_residue)


def test_hkdf_matches_rfc5869_test_case_1():
    ikm = bytes.fromhex("0b" * 22)
    salt = bytes.fromhex("000102030405060708090a0b0c")
    info = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9")
    okm = hkdf_sha256(ikm, salt=salt, info=info, length=42)
    assert okm.hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    )


def test_hkdf_matches_rfc5869_test_case_3_empty_salt():
    okm = hkdf_sha256(bytes.fromhex("0b" * 22), salt=b"", info=b"", length=42)
    assert okm.hex() == (
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
    )
