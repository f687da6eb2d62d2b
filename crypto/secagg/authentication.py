"""What makes a participant's later messages its own: Ed25519 signatures and a commitment to b_i.

Issue 32, item 8. Two things the masks alone do not give:

- **Masked inputs and unmask responses are signed.** y_i is uniform on Z_{2^64}^d, so the server
  cannot tell an altered y_i from an honest one: adding 2^f to one coordinate in transit moved the
  sum by exactly 1.0, unnoticed. Each participant draws a fresh Ed25519 key pair (RFC 8032, from
  `cryptography`) with its X25519 keys and advertises the public key with them (line 14). It signs
  its masked input (line 27) and its unmask response (line 33); the server verifies both against
  the key advertised in the same round before it adds a y_i or uses a share, and refuses a failure
  with a ProtocolError naming the sender and the round. A signature, not a MAC: the server can
  check it without holding any key of the participant's, so it needs no key of its own delivered
  to the participants (a MAC keyed between participant and server would need one, authenticated).
  What is signed is (label, session, round, sender) and the SHA-256 digest of the content, so a
  signature does not carry over to another message kind, round, session or sender. The public key
  is as authentic as the advertisement that carries it: an adversary that replaces a participant's
  advertisement from the first message on impersonates the participant, which only identities
  known in advance (a PKI, Flower's node authentication) can stop (docs/secagg.md, threat model).

- **Each b_i is committed to.** With exactly k unmask responses the k shares of b_i carry no
  redundancy, so a share that its holder (or the dealer) corrupted rebuilds a wrong b_i, and the
  unmasked sum is off by a pseudo-random mask (4.3e11 where no sum could exceed 24). s_j^SK is
  checked against the s_j^PK it advertised; b_i now has the same check: the advertisement carries
  c(b_i) = SHA-256(label, round, i, b_i), and the server compares the rebuilt seed with it. b_i is
  256 uniform bits, so the commitment hides it (SHA-256's preimage resistance), and it binds the
  dealer to one seed (collision resistance).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from uldp.crypto.secagg.keys import context
from uldp.errors import ProtocolError

SIGNING_KEY_BYTES = 32
"""Ed25519 private (seed) and public keys are 32 bytes (RFC 8032, §5.1.5)."""

SIGNATURE_BYTES = 64
COMMITMENT_BYTES = 32
_LABEL = "uldp/secagg/v1"


@dataclass(frozen=True)
class SigningKeyPair:
    """An Ed25519 private key (never shown in a repr or a traceback) and its public key, raw bytes."""

    private: bytes = field(repr=False)
    public: bytes


def generate_signing_keypair() -> SigningKeyPair:
    private = secrets.token_bytes(SIGNING_KEY_BYTES)  # any 32 bytes are an Ed25519 private key
    return SigningKeyPair(private, signing_public_key_of(private))


def signing_public_key_of(private: bytes) -> bytes:
    return _private_key(private).public_key().public_bytes_raw()


def _private_key(private: bytes) -> Ed25519PrivateKey:
    if len(private) != SIGNING_KEY_BYTES:
        raise ProtocolError(f"an Ed25519 private key has {SIGNING_KEY_BYTES} bytes, got {len(private)}")
    return Ed25519PrivateKey.from_private_bytes(private)


def signed_bytes(kind: str, *, session: bytes, round_number: int, sender: int, content: bytes) -> bytes:
    """What a signature covers: (label, kind, session, round, sender) injectively, then SHA-256(content).

    The digest keeps the signed string short: Ed25519 hashes what it signs twice with SHA-512,
    and a masked input is 8d bytes.
    """
    return context(f"{_LABEL}/{kind}", session, round_number, sender, 0) + hashlib.sha256(content).digest()


def sign(
    private: bytes, kind: str, *, session: bytes, round_number: int, sender: int, content: bytes
) -> bytes:
    """The Ed25519 signature of `sender`'s `kind` message holding `content` (`signed_bytes`)."""
    message = signed_bytes(kind, session=session, round_number=round_number, sender=sender, content=content)
    return _private_key(private).sign(message)


def verify(
    public: bytes,
    signature: bytes,
    kind: str,
    *,
    session: bytes,
    round_number: int,
    sender: int,
    content: bytes,
) -> bool:
    """Whether `signature` is `sender`'s, under the key it advertised, on exactly this message."""
    message = signed_bytes(kind, session=session, round_number=round_number, sender=sender, content=content)
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def seed_commitment(seed: bytes, *, round_number: int, participant: int) -> bytes:
    """c(b_i) = SHA-256(label, round, i, b_i): binds participant i to its mask seed of this round.

    The session id is not known when the commitment is advertised (line 14 precedes the
    broadcast); the round and the participant's id keep commitments of different rounds and
    participants apart, and b_i is fresh in every round anyway.
    """
    prefix = context(f"{_LABEL}/seed-commitment", b"", round_number, participant, 0)
    return hashlib.sha256(prefix + seed).digest()
