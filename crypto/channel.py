"""Authenticated channels between the parties of Protocol 1 (issue 12, point 7).

ULDP-FL §4.1 assumes semi-honest parties over secure channels and leaves the channels out. Without
them a man in the middle can multiply a silo's masked sum by Enc(k) and shift the aggregate by
exactly k (Paillier is malleable: Enc(a) Enc(k) = Enc(a + k)), unnoticed. Here every message
travels in an `Envelope` whose HMAC-SHA256 tag (RFC 2104, from `cryptography`) covers

    sender, receiver, kind, round, sequence number, and the message itself,

under a key that only the two ends hold: HKDF-SHA256 (RFC 5869, from `cryptography`) of their DH
shared secret, one key per direction (sender -> receiver), with a salt and labels of their own so
these keys are independent of the mask seeds and sealing keys drawn from the same secret
(`crypto.dh.pairwise_keys`). The receiver checks, in this order: the message is addressed to it,
the tag verifies (nothing altered, and it comes from the named sender: the key is per direction,
so a message reflected back to its sender fails too), the kind is the one expected at this step,
and the sequence number is the next one on that channel (a replayed or reordered message, even an
authentic one from an earlier round, is refused). Every failure is a `TamperedMessage` naming
sender, receiver, round and kind, raised before anything in the message is used, in particular
before any decryption or decoding.

Why `cryptography` and not our own code: HMAC and HKDF are short, but a constant-time tag
comparison, correct key handling and test-vector conformance are what a maintained, audited
library gets right (OpenSSL underneath); `crypto.sealing` uses its AEAD for the same reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import numbers
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import hmac as crypto_hmac

from uldp.crypto.dh import SEED_BYTES, DhKeyPair, hkdf_sha256, shared_secret
from uldp.errors import InvalidParameter, ProtocolError

SERVER = "server"
"""The aggregation server A's name on the wire."""

SETUP_ROUND = -1
"""The round field of setup messages (rounds are numbered from 0)."""

AUTH_SALT = b"uldp-fl protocol 1 channel authentication"
TAG_BYTES = 32
KEY_BYTES = SEED_BYTES
"""A direction key's length: `hkdf_sha256`'s output."""


def silo_name(silo: int) -> str:
    """The wire name of silo `silo`."""
    return f"silo {silo}"


def describe_round(round_index: int) -> str:
    return "setup" if round_index == SETUP_ROUND else f"round {round_index}"


class TamperedMessage(ProtocolError):
    """A protocol message that was altered, forged, replayed, reordered or misdelivered in transit."""

    def __init__(self, envelope: Envelope, what: str) -> None:
        self.sender, self.receiver = envelope.sender, envelope.receiver
        self.round, self.kind = envelope.round, envelope.kind
        super().__init__(
            f"tampered message: {envelope.kind} from {envelope.sender} to {envelope.receiver} "
            f"({describe_round(envelope.round)}, message {envelope.seq}) {what}; "
            f"the protocol stops, nothing of it was used"
        )


@dataclass(frozen=True)
class Envelope:
    """One message in transit: the header, the message (a dataclass of `messages`) and its tag."""

    sender: str
    receiver: str
    kind: str
    round: int
    seq: int
    payload: Any
    tag: bytes


def _field(data: bytes, tag: bytes) -> bytes:
    # Type tag and length prefix: distinct values always encode to distinct byte strings.
    return tag + len(data).to_bytes(8, "big") + data


def encode(value: Any) -> bytes:
    """An injective byte encoding of a message: ints, bytes, str, tuples and dataclasses of them."""
    if isinstance(value, bool):
        raise InvalidParameter("protocol messages carry no booleans")
    if isinstance(value, numbers.Integral):  # int, gmpy2.mpz, numpy integers: the same value, the same bytes
        number = int(value)
        return _field(number.to_bytes((number.bit_length() + 8) // 8 or 1, "big", signed=True), b"i")
    if isinstance(value, bytes):
        return _field(value, b"b")
    if isinstance(value, str):
        return _field(value.encode(), b"s")
    if isinstance(value, tuple | list):
        return _field(b"".join(encode(item) for item in value), b"t")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = [encode(type(value).__name__)]
        for f in dataclasses.fields(value):
            parts += [encode(f.name), encode(getattr(value, f.name))]
        return _field(b"".join(parts), b"d")
    raise InvalidParameter(f"cannot encode a {type(value).__name__} in a protocol message")


def _header(sender: str, receiver: str, kind: str, round_index: int, seq: int) -> bytes:
    return encode(("uldp/protocol1/v1", sender, receiver, kind, round_index, seq))


def direction_key(secret: bytes, sender: str, receiver: str) -> bytes:
    """The MAC key of the channel sender -> receiver, from the DH shared secret of the two."""
    return hkdf_sha256(secret, salt=AUTH_SALT, info=f"uldp/protocol1/auth/{sender}->{receiver}".encode())


@dataclass(frozen=True)
class PeerChannel:
    """One channel of a party, as bytes can hold it: its two direction keys and two counters."""

    peer: str
    send_key: bytes
    receive_key: bytes
    sent: int
    received: int


@dataclass(frozen=True)
class ChannelsState:
    """What `Channels` must keep between two messages (`Channels.export_state`).

    The sequence numbers matter as much as the keys: a party restored with older counters would
    accept a replayed message. The time counters are in integer nanoseconds (the wire format has
    no floats).
    """

    name: str
    peers: tuple[PeerChannel, ...]
    seconds_ns: int
    cpu_seconds_ns: int


class Channels:
    """One party's ends of its authenticated channels: keys, sequence numbers, and the time spent.

    `connect(peer, secret)` derives both direction keys with `peer`; `wrap` and `unwrap` send and
    receive. `seconds` (wall clock) and `cpu_seconds` (this thread's CPU time, which a loaded
    machine does not inflate) add up the time spent keying, encoding, tagging and verifying: the
    overhead of authentication that benchmarks/bench_protocol.py reports.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._send_keys: dict[str, bytes] = {}
        self._receive_keys: dict[str, bytes] = {}
        self._sent: dict[str, int] = {}
        self._received: dict[str, int] = {}
        self.seconds = 0.0
        self.cpu_seconds = 0.0

    @contextlib.contextmanager
    def _timing(self) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - wall
            self.cpu_seconds += time.thread_time() - cpu

    def connect(self, peer: str, secret: bytes) -> None:
        if peer == self.name:
            raise InvalidParameter(f"{self.name} cannot open a channel to itself")
        with self._timing():
            self._send_keys[peer] = direction_key(secret, self.name, peer)
            self._receive_keys[peer] = direction_key(secret, peer, self.name)
            self._sent.setdefault(peer, 0)
            self._received.setdefault(peer, 0)

    def connect_dh(self, own: DhKeyPair, peer: str, peer_public: int) -> None:
        """`connect` with the DH secret of `own` and the peer's public key.

        Only the server-silo channels need a DH computation of their own (one per silo at each
        end); silo-silo channels reuse the secret of the mask seeds. Both count in `seconds`.
        """
        with self._timing():
            secret = shared_secret(own, peer_public)
        self.connect(peer, secret)

    def export_state(self) -> ChannelsState:
        """Keys, sequence numbers and time spent, for a party whose code runs once per message.

        A Flower ClientApp is a fresh call per message (`crypto.wire`), so a silo's channels live
        between two messages in its node's own state, never on the wire.
        """
        peers = tuple(
            PeerChannel(
                peer, self._send_keys[peer], self._receive_keys[peer], self._sent[peer], self._received[peer]
            )
            for peer in sorted(self._send_keys)
        )
        return ChannelsState(self.name, peers, round(self.seconds * 1e9), round(self.cpu_seconds * 1e9))

    @classmethod
    def restore(cls, state: ChannelsState) -> Channels:
        """The `Channels` that `export_state` gave `state`; ProtocolError if `state` is inconsistent."""
        channels = cls(state.name)
        for end in state.peers:
            if end.peer == state.name or channels.connected(end.peer):
                raise ProtocolError(f"channel state of {state.name}: a second or self channel {end.peer!r}")
            if len(end.send_key) != KEY_BYTES or len(end.receive_key) != KEY_BYTES:
                raise ProtocolError(
                    f"channel state of {state.name}: a key with {end.peer} is not {KEY_BYTES} bytes"
                )
            if end.sent < 0 or end.received < 0:
                raise ProtocolError(
                    f"channel state of {state.name}: a negative sequence number with {end.peer}"
                )
            channels._send_keys[end.peer], channels._receive_keys[end.peer] = end.send_key, end.receive_key
            channels._sent[end.peer], channels._received[end.peer] = end.sent, end.received
        channels.seconds, channels.cpu_seconds = state.seconds_ns / 1e9, state.cpu_seconds_ns / 1e9
        return channels

    def connected(self, peer: str) -> bool:
        return peer in self._send_keys

    def wrap(self, receiver: str, kind: str, round_index: int, payload: Any) -> Envelope:
        """`payload` addressed to `receiver`, tagged under the key of this direction."""
        if receiver not in self._send_keys:
            raise ProtocolError(f"{self.name} has no authenticated channel to {receiver} yet")
        with self._timing():
            seq = self._sent[receiver]
            self._sent[receiver] = seq + 1
            header = _header(self.name, receiver, kind, round_index, seq)
            tag = _tag(self._send_keys[receiver], header, payload)
        return Envelope(self.name, receiver, kind, round_index, seq, payload, tag)

    def unwrap(self, envelope: Envelope, kind: str) -> Any:
        """The payload of `envelope` if it is authentic, addressed here, of `kind`, and the next one.

        Raises `TamperedMessage` otherwise, before the payload is used in any way.
        """
        if not isinstance(envelope, Envelope):
            raise ProtocolError(f"{self.name} expected an authenticated {kind} message, got {envelope!r:.80}")
        with self._timing():
            self._check(envelope, kind)
        return envelope.payload

    def _check(self, envelope: Envelope, kind: str) -> None:
        if envelope.receiver != self.name:
            raise TamperedMessage(envelope, f"was delivered to {self.name}: misdelivered or re-addressed")
        key = self._receive_keys.get(envelope.sender)
        if key is None:
            raise TamperedMessage(envelope, f"comes from a party {self.name} has no channel with")
        header = _header(envelope.sender, envelope.receiver, envelope.kind, envelope.round, envelope.seq)
        if not _verify(key, header, envelope.payload, envelope.tag):
            raise TamperedMessage(
                envelope, f"failed authentication: altered in transit or not sent by {envelope.sender}"
            )
        if envelope.kind != kind:
            raise TamperedMessage(envelope, f"arrived where {kind} was expected: reordered or injected")
        expected = self._received[envelope.sender]
        if envelope.seq != expected:
            what = "replayed" if envelope.seq < expected else "out of order (messages before it are missing)"
            raise TamperedMessage(envelope, f"is {what}: message {expected} was expected")
        self._received[envelope.sender] = expected + 1


def _mac(key: bytes, header: bytes, payload: Any) -> crypto_hmac.HMAC:
    mac = crypto_hmac.HMAC(key, hashes.SHA256())
    mac.update(header)
    mac.update(encode(payload))
    return mac


def _tag(key: bytes, header: bytes, payload: Any) -> bytes:
    return _mac(key, header, payload).finalize()


def _verify(key: bytes, header: bytes, payload: Any, tag: bytes) -> bool:
    if not isinstance(tag, bytes) or len(tag) != TAG_BYTES:
        return False
    try:
        encoded = _mac(key, header, payload)
    except (InvalidParameter, ValueError, OverflowError):
        return False  # a payload that is not a well-formed message cannot carry a valid tag
    try:
        encoded.verify(tag)  # constant-time comparison
    except InvalidSignature:
        return False
    return True


__all__ = [
    "SERVER",
    "SETUP_ROUND",
    "Channels",
    "ChannelsState",
    "Envelope",
    "PeerChannel",
    "TamperedMessage",
    "describe_round",
    "direction_key",
    "encode",
    "silo_name",
]
