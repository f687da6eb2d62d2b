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


# Private user-level sub-sampling (ULDP-FL §4.1; `crypto.protocol.sampling`), one round's arrows.
@dataclass(frozen=True)
class SamplingOfferMessage(Message):
    """Sampling (1), server -> every silo: per user the OT offer A_u = g^(a_u) and the commitment
    to the user's real slots S_u, the same for every silo."""

    KIND: ClassVar[str] = "sampling-offer"
    round: int
    offers: tuple[int, ...]
    commitments: tuple[bytes, ...]


@dataclass(frozen=True)
class SamplingChoiceMessage(Message):
    """Sampling (2), silo -> server: per user the OT choice B_u = g^(b_u) A_u^(c_u), which hides c_u."""

    KIND: ClassVar[str] = "sampling-choice"
    silo: int
    round: int
    choices: tuple[int, ...]


@dataclass(frozen=True)
class SlotBoxes:
    """One user's two sealed Paillier ciphertexts, Enc(B_inv(N_u)) and Enc(0), in random order
    (a part of `SamplingTransferMessage`, not a message of its own)."""

    first: SealedBox
    second: SealedBox


@dataclass(frozen=True)
class SamplingTransferMessage(Message):
    """Sampling (3), server -> one silo: per user the two boxes (the same for every silo) and the P
    slot keys, each padded under that silo's OT key k_i (32 bytes per slot, concatenated)."""

    KIND: ClassVar[str] = "sampling-transfer"
    round: int
    boxes: tuple[SlotBoxes, ...]
    slots: tuple[bytes, ...]


@dataclass(frozen=True)
class SamplingAuditMessage(Message):
    """Sampling (4), silo -> server: the users whose slots the silos audit this round (drawn from
    the silos' seed R after the transfer, so the server could not foresee them)."""

    KIND: ClassVar[str] = "sampling-audit"
    silo: int
    round: int
    audited: tuple[int, ...]


@dataclass(frozen=True)
class SamplingDigestMessage(Message):
    """Sampling (4), silo -> silo via the server: the digest of the offer and the boxes this silo
    received, so that the silos find out if the server sent them different ones."""

    KIND: ClassVar[str] = "sampling-digest"
    sender: int
    recipient: int
    round: int
    digest: bytes


@dataclass(frozen=True)
class SlotOpening:
    """The server's secrets for one audited user: a_u, its real slots S_u with the commitment's
    nonce, and the randomness r of Enc(0; r) = r^n mod n^2 (a part of `SamplingOpeningMessage`)."""

    user: int
    secret: int
    subset: tuple[int, ...]
    nonce: bytes
    zero_randomness: int


@dataclass(frozen=True)
class SamplingOpeningMessage(Message):
    """Sampling (5), server -> every silo: the openings of the audited users; it stands for round
    (a)'s encrypted weights, which the silos got by the transfer."""

    KIND: ClassVar[str] = "sampling-opening"
    round: int
    openings: tuple[SlotOpening, ...]
