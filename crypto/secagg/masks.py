"""The PRG H of Algorithm 3 (Baek et al. 2021, line 27): a 32-byte seed to a mask in Z_{2^64}^d.

H(seed) is the AES-256-CTR keystream (NIST SP 800-38A, from `cryptography`, i.e. OpenSSL) under
key = seed from the all-zero counter block, read as d little-endian uint64 words: uniform on
Z_{2^64}^d up to AES's pseudo-randomness (8d bytes are far below the 2^68 bytes a 128-bit counter
could produce without repeating). A fixed counter block is safe because every key expands one
stream only: b_i is fresh per round, and s_{i,j} is derived per session, round and pair
(`keys.mask_seed`); the two ends of a pair expand the same stream on purpose, to cancel it.

This is the participant's dominant cost (one stream per peer, plus its own), so it runs at the
cipher's speed: the keystream is written into one reusable buffer (`update_into`), viewed as
uint64 with `np.frombuffer` and added in place; no Python loop touches an element. AES rather than
ChaCha20: with AES-NI OpenSSL's AES-256-CTR ran at 4.9 GB/s against ChaCha20's 2.7 GB/s on the
benchmark machine (docs/performance.md); both are fine ciphers.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from uldp.errors import InvalidParameter

SEED_BYTES = 32
WORD_BYTES = 8
_COUNTER_START = bytes(16)
_SLACK = 15
"""`update_into` asks for block_size - 1 bytes beyond the input."""


class MaskGenerator:
    """Expands seeds into masks of `dimension` uint64 words, reusing its buffers across seeds."""

    def __init__(self, dimension: int) -> None:
        if dimension < 1:
            raise InvalidParameter(f"dimension must be >= 1, got {dimension}")
        self.dimension = dimension
        self._zeros = bytes(WORD_BYTES * dimension)
        self._buffer = bytearray(WORD_BYTES * dimension + _SLACK)
        self._words = np.frombuffer(self._buffer, dtype="<u8", count=dimension)

    def mask(self, seed: bytes) -> np.ndarray:
        """H(seed), as a view of the internal buffer: valid until the next call (copy to keep it)."""
        if len(seed) != SEED_BYTES:
            raise InvalidParameter(f"a mask seed has {SEED_BYTES} bytes, got {len(seed)}")
        encryptor = Cipher(algorithms.AES(seed), modes.CTR(_COUNTER_START)).encryptor()
        encryptor.update_into(self._zeros, self._buffer)  # keystream XOR 0 = keystream
        return self._words

    def apply(self, total: np.ndarray, add: Iterable[bytes] = (), subtract: Iterable[bytes] = ()) -> None:
        """total += sum H(a) - sum H(s) modulo 2^64, in place."""
        if total.dtype != np.uint64 or total.shape != (self.dimension,):
            raise InvalidParameter(f"masks apply to a uint64 vector of {self.dimension} words")
        for seed in add:
            np.add(total, self.mask(seed), out=total)
        for seed in subtract:
            np.subtract(total, self.mask(seed), out=total)


def mask(seed: bytes, dimension: int) -> np.ndarray:
    """H(seed) as a fresh uint64 array of `dimension` words."""
    return MaskGenerator(dimension).mask(seed).copy()
