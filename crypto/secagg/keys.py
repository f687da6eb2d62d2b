"""X25519 key pairs and the keys derived from them: one for encrypting shares, one for masks.

Algorithm 3 of Baek et al. (2021), lines 13 and 19: each participant i draws two Diffie-Hellman
key pairs per round, (c_i^SK, c_i^PK) to encrypt the shares it sends to j under c_{i,j}, and
(s_i^SK, s_i^PK) for the pairwise mask seed s_{i,j} = s_{j,i}. Here the group is X25519 (RFC 7748,
from `cryptography`), and the raw shared secret never serves as a key: HKDF-SHA256 (RFC 5869)
expands it with an info string that names the purpose, the round's session id and number, and
the two participants, so that

- a share key is per direction (sender -> receiver): a ciphertext re-addressed, reflected back to
  its sender, or replayed from another round or session is under the wrong key;
- a mask seed is the same at both ends (the pair in increasing order) and independent of the share
  keys, although the same X25519 function computes both;
- nothing derived in one round is reused in another (the key pairs are fresh every round anyway).

Private keys are 32 bytes from `secrets` (X25519 clamps any 32 bytes into a valid scalar), so
they can be stored as bytes between two Flower messages and never come from another generator.
"""

from __future__ import annotations

import secrets
import struct
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from uldp.crypto.dh import hkdf_sha256
from uldp.errors import ProtocolError

KEY_BYTES = 32
"""X25519 private and public keys, and every derived key, are 32 bytes."""

HKDF_SALT = b"uldp secure aggregation (Bonawitz et al. 2017) v1"
SHARE_ENCRYPTION = "share-encryption"
PAIRWISE_MASK = "pairwise-mask"


@dataclass(frozen=True)
class X25519KeyPair:
    """A private key (never shown in a repr or a traceback) and its public key, raw bytes."""

    private: bytes = field(repr=False)
    public: bytes


def generate_keypair() -> X25519KeyPair:
    private = secrets.token_bytes(KEY_BYTES)
    return X25519KeyPair(private, public_key_of(private))


def public_key_of(private: bytes) -> bytes:
    return load_private_key(private).public_key().public_bytes_raw()


def load_private_key(private: bytes) -> X25519PrivateKey:
    if len(private) != KEY_BYTES:
        raise ProtocolError(f"an X25519 private key has {KEY_BYTES} bytes, got {len(private)}")
    return X25519PrivateKey.from_private_bytes(private)


def agree(own: X25519PrivateKey, peer_public: bytes, *, peer: int) -> bytes:
    """The raw X25519 shared secret with participant `peer`'s public key.

    ProtocolError naming the peer if its key is not 32 bytes or is of small order (the shared
    secret would be all zeros, RFC 7748 §6.1: a value anyone can compute).
    """
    try:
        return own.exchange(X25519PublicKey.from_public_bytes(peer_public))
    except ValueError:
        raise ProtocolError(
            f"participant {peer}'s X25519 public key is invalid or of small order; no key is derived from it"
        ) from None


def context(label: str, session: bytes, round_number: int, first: int, second: int) -> bytes:
    """(label, session, round, first, second) as bytes, injectively: the label and the session each
    after a one-byte length, then three 8-byte big-endian unsigned ints (ids and rounds are < 2^63).
    """
    tag = label.encode()
    return (
        bytes([len(tag)])
        + tag
        + bytes([len(session)])
        + session
        + struct.pack(">QQQ", round_number, first, second)
    )


def _derive(secret: bytes, purpose: str, session: bytes, round_number: int, first: int, second: int) -> bytes:
    return hkdf_sha256(
        secret,
        salt=HKDF_SALT,
        info=context(f"uldp/secagg/v1/{purpose}", session, round_number, first, second),
    )


def share_key(secret: bytes, *, session: bytes, round_number: int, sender: int, receiver: int) -> bytes:
    """c_{sender -> receiver}: the key of the shares `sender` sends `receiver` (one direction only)."""
    return _derive(secret, SHARE_ENCRYPTION, session, round_number, sender, receiver)


def mask_seed(secret: bytes, *, session: bytes, round_number: int, i: int, j: int) -> bytes:
    """s_{i,j} = s_{j,i}: the seed of the pairwise mask of i and j."""
    low, high = sorted((i, j))
    return _derive(secret, PAIRWISE_MASK, session, round_number, low, high)
