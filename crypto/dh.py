"""Finite-field Diffie-Hellman over the RFC 3526 3072-bit MODP group, and HKDF (RFC 5869).

Protocol 1, setup (a)-(b) of ULDP-FL (§4.1): every silo publishes a DH public key through the
server, and each pair of silos derives a shared key sk_{s,s'} = sk_{s',s}. Here the raw shared
secret g^{x_s x_s'} goes through HKDF-SHA256 with a label per purpose, so the same exchange gives
independent seeds for the pairwise masks (setup (e), round (c)) and for sealing the seed R
(setup (c)).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

import gmpy2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from uldp.errors import InvalidParameter

MODP_3072_PRIME = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74"
    "020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437"
    "4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF05"
    "98DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB"
    "9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF695581718"
    "3995497CEA956AE515D2261898FA051015728E5A8AAAC42DAD33170D04507A33"
    "A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7"
    "ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864"
    "D87602733EC86A64521F2B18177B200CBBE117577A615D6C770988C0BAD946E2"
    "08E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF",
    16,
)
"""RFC 3526 §4 group 15: p = 2^3072 - 2^3008 - 1 + 2^64 ([2^2942 pi] + 1690314), a safe prime."""

MODP_3072_GENERATOR = 2
MODP_3072_ORDER = (MODP_3072_PRIME - 1) // 2
"""q = (p - 1) / 2, the prime order of the subgroup that 2 generates."""

SECRET_BYTES = (MODP_3072_PRIME.bit_length() + 7) // 8
SEED_BYTES = 32


@dataclass(frozen=True)
class DhKeyPair:
    """A silo's (sk_s, pk_s) of Protocol 1 setup (a); only `public` leaves the silo."""

    private: int
    public: int


def generate_dh_keypair() -> DhKeyPair:
    """x uniform in [2, q) from `secrets`, and g^x mod p."""
    x = secrets.randbelow(MODP_3072_ORDER - 2) + 2
    return DhKeyPair(x, int(gmpy2.powmod(MODP_3072_GENERATOR, x, MODP_3072_PRIME)))


def validate_public_key(public: int) -> int:
    """`public` if it lies in the order-q subgroup (1 < y < p - 1 and y^q = 1), else ValueError.

    A key outside it (0, 1, p - 1, an element of small order) would confine the shared secret to
    a handful of values.
    """
    if not isinstance(public, int) or not 1 < public < MODP_3072_PRIME - 1:
        raise InvalidParameter("DH public key is not in (1, p - 1)")
    if gmpy2.powmod(public, MODP_3072_ORDER, MODP_3072_PRIME) != 1:
        raise InvalidParameter("DH public key is not in the prime-order subgroup of the RFC 3526 group")
    return public


def shared_secret(own: DhKeyPair, peer_public: int) -> bytes:
    """g^{x_s x_s'} mod p as a fixed-length big-endian byte string (the HKDF input key material)."""
    value = gmpy2.powmod(validate_public_key(peer_public), own.private, MODP_3072_PRIME)
    return int(value).to_bytes(SECRET_BYTES, "big")


def hkdf_sha256(ikm: bytes, *, salt: bytes, info: bytes, length: int = SEED_BYTES) -> bytes:
    """HKDF-SHA256 (RFC 5869 §2.2-2.3) from `cryptography`: extract with `salt`, expand with `info`.

    The maintained implementation rather than our own (docs/protocol.md, "Why `cryptography`").
    """
    if not 0 < length <= 255 * hashlib.sha256().digest_size:
        raise InvalidParameter(f"HKDF output length must be in [1, 8160], got {length}")
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt or None, info=info).derive(ikm)


def pairwise_keys(
    own: DhKeyPair, own_id: int, peer_public: int, peer_id: int, purposes: tuple[str, ...]
) -> dict[str, bytes]:
    """sk_{s,s'} for each purpose: the same 32 bytes at both ends, independent across purposes.

    One DH computation, then `keys_from_secret`.
    """
    return keys_from_secret(shared_secret(own, peer_public), own_id, peer_id, purposes)


def keys_from_secret(secret: bytes, own_id: int, peer_id: int, purposes: tuple[str, ...]) -> dict[str, bytes]:
    """HKDF of the DH `secret` with an info string holding the purpose and the two silo ids in
    increasing order (so s and s' derive the same key)."""
    low, high = sorted((own_id, peer_id))
    return {
        purpose: hkdf_sha256(
            secret, salt=b"uldp-fl protocol 1", info=f"uldp/protocol1/{purpose}/{low}/{high}".encode()
        )
        for purpose in purposes
    }


def pairwise_key(own: DhKeyPair, own_id: int, peer_public: int, peer_id: int, purpose: str) -> bytes:
    """`pairwise_keys` for a single purpose."""
    return pairwise_keys(own, own_id, peer_public, peer_id, (purpose,))[purpose]
