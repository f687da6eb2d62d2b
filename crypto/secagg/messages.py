"""The messages of one secure-aggregation round, one frozen dataclass per arrow of Algorithm 3.

Baek et al. (2021), Algorithm 3, lines 13-38 (Bonawitz et al. 2017's rounds 0-4):

    AdvertiseKeys    participant -> server    line 14: (c_i^PK, s_i^PK), d_i^PK (signatures), c(b_i)
    KeyBroadcast     server -> participants   line 17: every advertised pair, the session id
    ShareKeys        participant -> server    line 21: e_{i,j} for every j, encrypted under c_{i,j}
    ShareInbox       server -> participant j  line 23: the e_{i,j} addressed to j
    MaskedInput      participant -> server    line 27: y_i in Z_{2^64}^d, signed
    UnmaskRequest    server -> survivors      line 29: U_A (survivors) and U \\ U_A (dropped)
    UnmaskResponse   survivor -> server       line 33: shares of b_j (j in U_A), of s_j^SK (j dropped), signed

Every message names its round and, from the broadcast on, the session id the server drew, and each
receiver checks both. Nothing secret travels in the clear: keys are public, shares are AEAD
ciphertexts until the unmasking step, and a masked input is uniform on Z_{2^64}^d. The two
messages the server acts on without being able to tell a forgery (a masked input, an unmask
response) carry the sender's Ed25519 signature under the key it advertised (`authentication`).

`to_bytes` / `from_bytes` use the strict injective encoding of Protocol 1's wire (`crypto.channel.
encode`, `crypto.wire.decode`): only the expected class and the classes its fields name can come
back; malformed bytes raise ProtocolError, and so does a well-formed message with impossible
values (a key that is not 32 bytes, a masked vector of a partial word).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypeVar

import numpy as np

from uldp.crypto.channel import encode
from uldp.crypto.sealing import NONCE_BYTES, TAG_BYTES
from uldp.crypto.secagg.authentication import COMMITMENT_BYTES, SIGNATURE_BYTES, SIGNING_KEY_BYTES
from uldp.crypto.secagg.keys import KEY_BYTES
from uldp.crypto.secagg.params import MAX_ID
from uldp.crypto.secagg.shamir import SHARE_BYTES
from uldp.errors import ProtocolError

SESSION_BYTES = 16
WORD_BYTES = 8
SEALED_SHARES_BYTES = 2 * SHARE_BYTES + TAG_BYTES
"""Two 66-byte shares and the Poly1305 tag."""

M = TypeVar("M", bound="SecAggMessage")


class SecAggMessage:
    """Base of the messages: `KIND` names one in errors; bytes round-trip through `to_bytes`/`from_bytes`."""

    KIND: ClassVar[str] = ""

    def to_bytes(self) -> bytes:
        return encode(self)

    @classmethod
    def from_bytes(cls: type[M], data: bytes) -> M:
        """The message `to_bytes` wrote as `data`; ProtocolError if `data` is anything else."""
        # Imported here: crypto.wire loads Protocol 1's parties (and phe), which a participant
        # that only runs secure aggregation never needs otherwise.
        from uldp.crypto.wire import decode

        return decode(data, cls, what=f"{cls.KIND} message")


def _check_id(value: int, what: str) -> None:
    if not 0 <= value <= MAX_ID:
        raise ProtocolError(f"{what} must be a participant id in [0, 2^63 - 1], got {value}")


def _check_round(message: SecAggMessage, round_number: int) -> None:
    if not 0 <= round_number <= MAX_ID:
        raise ProtocolError(f"{message.KIND} message: round must be in [0, 2^63 - 1], got {round_number}")


def _check_session(message: SecAggMessage, session: bytes) -> None:
    if len(session) != SESSION_BYTES:
        raise ProtocolError(
            f"{message.KIND} message: a session id has {SESSION_BYTES} bytes, got {len(session)}"
        )


def _check_signature(message: MaskedInput | UnmaskResponse) -> None:
    if len(message.signature) != SIGNATURE_BYTES:
        raise ProtocolError(
            f"{message.KIND} message of participant {message.participant}: a signature has "
            f"{SIGNATURE_BYTES} bytes, got {len(message.signature)}"
        )


@dataclass(frozen=True)
class AdvertiseKeys(SecAggMessage):
    """Line 14, participant -> server: its two X25519 public keys for this round, the Ed25519 key
    its later messages are signed with, and its commitment to b_i (`authentication`)."""

    KIND: ClassVar[str] = "advertise-keys"
    participant: int
    round: int
    c_public: bytes
    s_public: bytes
    sign_public: bytes
    seed_commitment: bytes

    def __post_init__(self) -> None:
        _check_id(self.participant, "the advertising participant")
        _check_round(self, self.round)
        if (
            len(self.c_public) != KEY_BYTES
            or len(self.s_public) != KEY_BYTES
            or len(self.sign_public) != SIGNING_KEY_BYTES
        ):
            raise ProtocolError(
                f"participant {self.participant} advertised a public key that is not {KEY_BYTES} bytes"
            )
        if len(self.seed_commitment) != COMMITMENT_BYTES:
            raise ProtocolError(
                f"participant {self.participant} advertised a seed commitment that is not "
                f"{COMMITMENT_BYTES} bytes"
            )


@dataclass(frozen=True)
class KeyBroadcast(SecAggMessage):
    """Line 17, server -> every participant: the advertised keys (U_1, by id) and the session id."""

    KIND: ClassVar[str] = "key-broadcast"
    round: int
    session: bytes
    keys: tuple[AdvertiseKeys, ...]

    def __post_init__(self) -> None:
        _check_round(self, self.round)
        _check_session(self, self.session)
        ids = [k.participant for k in self.keys]
        if len(set(ids)) != len(ids):
            raise ProtocolError("key-broadcast message lists a participant twice")
        if any(k.round != self.round for k in self.keys):
            raise ProtocolError(f"key-broadcast message of round {self.round} holds keys of another round")

    def by_participant(self) -> dict[int, AdvertiseKeys]:
        return {k.participant: k for k in self.keys}


@dataclass(frozen=True)
class EncryptedShare(SecAggMessage):
    """Line 21: e_{i,j}, the shares of b_i and s_i^SK for j, sealed under c_{i -> j}.

    `ciphertext` is the ChaCha20-Poly1305 output (with its 16-byte tag). The round and session are
    not repeated here: the message that carries the share names them, and the AEAD's associated
    data binds (session, round, sender, receiver), so a share moved to another round, session or
    receiver fails authentication (`sealed_shares`).
    """

    KIND: ClassVar[str] = "encrypted-share"
    sender: int
    receiver: int
    nonce: bytes
    ciphertext: bytes

    def __post_init__(self) -> None:
        _check_id(self.sender, "the sender of a share")
        _check_id(self.receiver, "the receiver of a share")
        if len(self.nonce) != NONCE_BYTES or len(self.ciphertext) != SEALED_SHARES_BYTES:
            raise ProtocolError(
                f"share from participant {self.sender} to participant {self.receiver}: "
                f"malformed nonce or ciphertext length"
            )


@dataclass(frozen=True)
class ShareKeys(SecAggMessage):
    """Line 21, participant -> server: one `EncryptedShare` per other participant of the broadcast."""

    KIND: ClassVar[str] = "share-keys"
    sender: int
    round: int
    session: bytes
    shares: tuple[EncryptedShare, ...]

    def __post_init__(self) -> None:
        _check_id(self.sender, "the sender of shares")
        _check_round(self, self.round)
        _check_session(self, self.session)

    def by_receiver(self) -> dict[int, EncryptedShare]:
        return {share.receiver: share for share in self.shares}


@dataclass(frozen=True)
class ShareInbox(SecAggMessage):
    """Line 23, server -> participant `receiver`: the shares the others addressed to it."""

    KIND: ClassVar[str] = "share-inbox"
    receiver: int
    round: int
    session: bytes
    shares: tuple[EncryptedShare, ...]

    def __post_init__(self) -> None:
        _check_id(self.receiver, "the receiver of an inbox")
        _check_round(self, self.round)
        _check_session(self, self.session)


@dataclass(frozen=True)
class MaskedInput(SecAggMessage):
    """Line 27, participant -> server: y_i = enc(x_i) + H(b_i) +- H(s_{i,j}), d little-endian uint64
    words, and the sender's Ed25519 signature of them (`authentication`)."""

    KIND: ClassVar[str] = "masked-input"
    participant: int
    round: int
    session: bytes
    masked: bytes
    signature: bytes

    def __post_init__(self) -> None:
        _check_id(self.participant, "the sender of a masked input")
        _check_round(self, self.round)
        _check_session(self, self.session)
        if len(self.masked) % WORD_BYTES:
            raise ProtocolError(
                f"masked input of participant {self.participant} is {len(self.masked)} bytes, "
                f"not a whole number of {WORD_BYTES}-byte words"
            )
        _check_signature(self)

    @property
    def signed_content(self) -> bytes:
        """What the signature covers besides (kind, session, round, sender): y_i's bytes."""
        return self.masked

    @property
    def vector(self) -> np.ndarray:
        """y_i as a read-only uint64 array (no copy)."""
        return np.frombuffer(self.masked, dtype="<u8")


@dataclass(frozen=True)
class UnmaskRequest(SecAggMessage):
    """Lines 29-30, server -> every survivor: who sent a masked input (U_A) and who did not."""

    KIND: ClassVar[str] = "unmask-request"
    round: int
    session: bytes
    survivors: tuple[int, ...]
    dropped: tuple[int, ...]

    def __post_init__(self) -> None:
        _check_round(self, self.round)
        _check_session(self, self.session)


@dataclass(frozen=True)
class UnmaskResponse(SecAggMessage):
    """Line 33, survivor -> server: (owner, share) of b_owner for survivors, of s_owner^SK for the dropped."""

    KIND: ClassVar[str] = "unmask-response"
    participant: int
    round: int
    session: bytes
    seed_shares: tuple[tuple[int, int], ...]
    key_shares: tuple[tuple[int, int], ...]
    signature: bytes

    def __post_init__(self) -> None:
        _check_id(self.participant, "the sender of an unmask response")
        _check_round(self, self.round)
        _check_session(self, self.session)
        _check_signature(self)

    @property
    def signed_content(self) -> bytes:
        """What the signature covers besides (kind, session, round, sender): both lists of shares."""
        return encode((self.seed_shares, self.key_shares))


MESSAGES: tuple[type[SecAggMessage], ...] = (
    AdvertiseKeys,
    KeyBroadcast,
    EncryptedShare,
    ShareKeys,
    ShareInbox,
    MaskedInput,
    UnmaskRequest,
    UnmaskResponse,
)
