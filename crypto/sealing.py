"""Authenticated symmetric encryption of a short secret under a pairwise DH key.

Protocol 1 setup (c) of ULDP-FL (§4.1): silo 0 sends the shared seed R to every other silo
"via the server", encrypted under sk_{0,s'}. The server relays the box, so it must learn nothing
from it and be unable to alter it unnoticed: ChaCha20-Poly1305 (RFC 8439, the AEAD of
`cryptography`), with a 96-bit random nonce and a key split from the pairwise key by HKDF. A
random nonce is safe here: each key seals one seed per setup, far below the 2^32 messages at
which random 96-bit nonces start to risk a collision.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from uldp.crypto.dh import hkdf_sha256
from uldp.errors import ProtocolError

NONCE_BYTES = 12
TAG_BYTES = 16


@dataclass(frozen=True)
class SealedBox:
    """Nonce, ciphertext and tag: what the relaying server sees."""

    nonce: bytes
    ciphertext: bytes
    tag: bytes


def _aead(key: bytes) -> ChaCha20Poly1305:
    return ChaCha20Poly1305(hkdf_sha256(key, salt=b"uldp sealing", info=b"chacha20-poly1305"))


def seal(key: bytes, plaintext: bytes, associated: bytes = b"") -> SealedBox:
    """Encrypt `plaintext` under `key` with a fresh random nonce, and authenticate it with `associated`."""
    nonce = secrets.token_bytes(NONCE_BYTES)
    sealed = _aead(key).encrypt(nonce, plaintext, associated)
    return SealedBox(nonce, sealed[:-TAG_BYTES], sealed[-TAG_BYTES:])


def open_sealed(key: bytes, box: SealedBox, associated: bytes = b"") -> bytes:
    """The plaintext of `box`, or ProtocolError if it was not sealed under `key` or was altered."""
    if len(box.nonce) != NONCE_BYTES or len(box.tag) != TAG_BYTES:
        raise ProtocolError("sealed box failed authentication (malformed nonce or tag)")
    try:
        return _aead(key).decrypt(box.nonce, box.ciphertext + box.tag, associated)
    except InvalidTag:
        raise ProtocolError("sealed box failed authentication (wrong key or tampered in transit)") from None
