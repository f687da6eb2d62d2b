"""Sealing the seed R: only the right key opens it, tampering is detected."""

from __future__ import annotations

import dataclasses
import secrets

import pytest

from uldp.crypto.sealing import open_sealed, seal


def test_round_trip_and_fresh_nonce():
    key, message = secrets.token_bytes(32), secrets.token_bytes(32)
    box = seal(key, message, b"ctx")
    assert open_sealed(key, box, b"ctx") == message
    assert box.ciphertext != message
    assert seal(key, message, b"ctx").ciphertext != box.ciphertext


@pytest.mark.parametrize("field", ["nonce", "ciphertext", "tag"])
def test_tampering_is_detected(field):
    key = secrets.token_bytes(32)
    box = seal(key, b"seed" * 8)
    value = bytearray(getattr(box, field))
    value[0] ^= 1
    with pytest.raises(ValueError, match="authentication"):
        open_sealed(key, dataclasses.replace(box, **{field: bytes(value)}))


def test_wrong_key_or_context_is_refused():
    key = secrets.token_bytes(32)
    box = seal(key, b"x" * 32, b"to silo 1")
    with pytest.raises(ValueError):
        open_sealed(secrets.token_bytes(32), box, b"to silo 1")
    with pytest.raises(ValueError):
        open_sealed(key, box, b"to silo 2")
