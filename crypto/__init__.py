"""Cryptography for ULDP-FL's private weighting protocol (Protocol 1, §4.1).

Building blocks, one module each: `paillier` (phe + gmpy2), `dh` (RFC 3526 DH, and HKDF from
`cryptography`), `sealing` (ChaCha20-Poly1305), `channel` (authenticated messages between the
parties), `prg`, `masking`, `encoding` (Algorithm 5), `weighting` (the silo's encrypted weighted
sum, fast and straightforward); the parties and their messages in `crypto.protocol`.

`from uldp.crypto import secure_weighted_sum` is the one-call entry point for training code, and
`WeightingSession` keeps one setup across rounds; both are loaded on first use so that importing
a building block does not load the protocol.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WeightingSession", "secure_weighted_sum"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from uldp.crypto.protocol import run

        return getattr(run, name)
    raise AttributeError(f"module 'uldp.crypto' has no attribute {name!r}")
