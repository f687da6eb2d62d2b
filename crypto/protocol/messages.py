"""The messages of Protocol 1 (ULDP-FL §4.1), one dataclass per arrow.

Each party keeps what it received (`inbox`), so a test can inspect exactly what every party saw.
Ciphertexts and field elements are Python ints; nothing else crosses between parties. Every
message travels inside an authenticated `crypto.channel.Envelope`; `KIND` is the name its
envelope carries (and that an error about it shows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from uldp.crypto.sealing import SealedBox


class Message:
    """Base of the messages: `KIND` names the message on the wire (in its envelope and errors)."""

    KIND: ClassVar[str] = ""


@dataclass(frozen=True)
class PaillierKeyMessage(Message):
    """Setup (a), server -> every silo: the Paillier public key n."""

    KIND: ClassVar[str] = "paillier-key"
    n: int


@dataclass(frozen=True)
class DhKeyMessage(Message):
    """Setup (a), silo -> server: the silo's DH public key pk_s."""

    KIND: ClassVar[str] = "dh-key"
    silo: int
    public: int


@dataclass(frozen=True)
class DhKeysBroadcast(Message):
    """Setup (b), server -> every silo: all DH public keys, by silo id."""

    KIND: ClassVar[str] = "dh-keys"
    publics: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class SealedSeedMessage(Message):
    """Setup (c), silo 0 -> silo s' via the server: the seed R sealed under sk_{0,s'}."""

    KIND: ClassVar[str] = "sealed-seed"
    sender: int
    recipient: int
    box: SealedBox


@dataclass(frozen=True)
class BlindedHistogramMessage(Message):
    """Setup (e), silo -> server: B'(n_{s,u}) = r_u n_{s,u} + pairwise masks (mod n), per user."""

    KIND: ClassVar[str] = "blinded-histogram"
    silo: int
    values: tuple[int, ...]


@dataclass(frozen=True)
class EncryptedWeightsMessage(Message):
    """Round (a), server -> every silo: Enc(B_inv(N_u)) per user (Enc(0) if not sampled)."""

    KIND: ClassVar[str] = "encrypted-weights"
    round: int
    ciphertexts: tuple[int, ...]


@dataclass(frozen=True)
class MaskedSumMessage(Message):
    """Round (b)-(c), silo -> server: Enc(Delta_s + pairwise masks), per coordinate."""

    KIND: ClassVar[str] = "masked-sum"
    silo: int
    round: int
    ciphertexts: tuple[int, ...]
