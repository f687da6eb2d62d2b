"""Authenticated symmetric encryption of a short secret under a pairwise DH key.

Protocol 1 setup (c) of ULDP-FL (§4.1): silo 0 sends the shared seed R to every other silo
"via the server", encrypted under sk_{0,s'}. The server relays the box, so it must learn nothing
from it and be unable to alter it unnoticed: encrypt-then-MAC with a SHAKE-256 keystream and
HMAC-SHA256 (both from hashlib/hmac), keys split from the pairwise key by HKDF.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from uldp.crypto.dh import hkdf_sha256
from uldp.errors import ProtocolError

NONCE_BYTES = 16
TAG_BYTES = 32


@dataclass(frozen=True)
class SealedBox:
    """Nonce, ciphertext and tag: what the relaying server sees."""

    nonce: bytes
    ciphertext: bytes
    tag: bytes


def _keys(key: bytes) -> tuple[bytes, bytes]:
    both = hkdf_sha256(key, salt=b"uldp sealing", info=b"enc|mac", length=64)
    return both[:32], both[32:]


def _keystream(enc_key: bytes, nonce: bytes, length: int) -> bytes:
    return hashlib.shake_256(b"uldp-stream" + enc_key + nonce).digest(length)


def seal(key: bytes, plaintext: bytes, associated: bytes = b"") -> SealedBox:
    """Encrypt `plaintext` under `key` with a fresh random nonce, and authenticate it."""
    enc_key, mac_key = _keys(key)
    nonce = secrets.token_bytes(NONCE_BYTES)
    stream = _keystream(enc_key, nonce, len(plaintext))
    ciphertext = bytes(a ^ b for a, b in zip(plaintext, stream))
    tag = hmac.new(mac_key, associated + nonce + ciphertext, hashlib.sha256).digest()
    return SealedBox(nonce, ciphertext, tag)


def open_sealed(key: bytes, box: SealedBox, associated: bytes = b"") -> bytes:
    """The plaintext of `box`, or ValueError if it was not sealed under `key` or was altered."""
    enc_key, mac_key = _keys(key)
    expected = hmac.new(mac_key, associated + box.nonce + box.ciphertext, hashlib.sha256).digest()
    if not hmac.compare_digest(expected, box.tag):
        raise ProtocolError("sealed box failed authentication (wrong key or tampered in transit)")
    stream = _keystream(enc_key, box.nonce, len(box.ciphertext))
    return bytes(a ^ b for a, b in zip(box.ciphertext, stream))
