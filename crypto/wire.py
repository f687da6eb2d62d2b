"""Protocol 1's messages as bytes, for parties that do not share a process (issue 13, Flower).

On Flower the server and each silo are separate parties: an `Envelope` (`crypto.channel`) travels
as a bytes value inside a Flower record, and a silo keeps its secrets between two messages as bytes
in its node's `context.state` (`crypto.protocol.silo.SiloState`). Both use one format: the
injective encoding the channel tags already cover (`crypto.channel.encode`), a type tag and an
8-byte big-endian length before every value:

    i  a signed big-endian int, (bit_length + 8) // 8 bytes (one for 0)
    b  bytes        s  UTF-8 text        t  a tuple: its items, one after the other
    d  a dataclass: its class name, then each field's name and value, in declaration order

Decoding is strict and never runs code named by the data (no pickle, no import by name): the
expected type steers the decoder, so only the classes reachable from it through field annotations
(and, for an envelope's payload, the messages of `crypto.protocol.messages`) can be rebuilt; the
class name, every field name and the field count must match the dataclass; tuples come back as
tuples, ints as Python ints, and each value must be encoded exactly as `encode` writes it (one
byte string per value, so decoding is the inverse of encoding). Anything else -- a truncated
value, bytes after the end, an unknown tag or class, a missing, extra or renamed field, a length
beyond the data, nesting beyond `MAX_DEPTH`, data beyond `MAX_WIRE_BYTES` -- raises
`ProtocolError` naming what is wrong and where, before any of it is used; malformed input never
escapes as IndexError, ValueError or RecursionError.

Decoding checks the form, not the authenticity: the recipient's `Channels.unwrap` still checks the
envelope's tag, addressee, kind and sequence number before it uses the payload.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any, TypeVar

from uldp.crypto.channel import Envelope, encode
from uldp.crypto.protocol.messages import (
    BlindedHistogramMessage,
    DhKeyMessage,
    DhKeysBroadcast,
    EncryptedWeightsMessage,
    MaskedSumMessage,
    PaillierKeyMessage,
    SamplingAuditMessage,
    SamplingChoiceMessage,
    SamplingDigestMessage,
    SamplingOfferMessage,
    SamplingOpeningMessage,
    SamplingTransferMessage,
    SealedSeedMessage,
)
from uldp.errors import InvalidParameter, ProtocolError

T = TypeVar("T")

MESSAGE_TYPES: tuple[type, ...] = (
    PaillierKeyMessage,
    DhKeyMessage,
    DhKeysBroadcast,
    SealedSeedMessage,
    BlindedHistogramMessage,
    EncryptedWeightsMessage,
    MaskedSumMessage,
    SamplingOfferMessage,
    SamplingChoiceMessage,
    SamplingTransferMessage,
    SamplingAuditMessage,
    SamplingDigestMessage,
    SamplingOpeningMessage,
)
"""What an envelope may carry: the one place where the data picks a class, among these only."""

MAX_WIRE_BYTES = 2**30
"""1 GiB, half of gRPC's 2 GiB message limit that Flower uses. The largest message of Protocol 1 is
a masked sum, d ciphertexts of 2λ bits (about 778 bytes each at λ = 3072): 1 GiB holds d of about 1.38
million, beyond what the silo's Paillier weighting computes in reasonable time."""

MAX_DEPTH = 8
"""Nesting limit of tuples and dataclasses; the deepest value of the protocol (the DH key broadcast
in its envelope: envelope, message, tuple, pair, int) has 5 levels."""

HEADER_BYTES = 9
"""A value's type tag (1 byte) and length (8 bytes)."""

TAG_NAMES = {b"i": "an int", b"b": "bytes", b"s": "text", b"t": "a tuple", b"d": "a dataclass"}


def dumps(envelope: Envelope, *, max_bytes: int = MAX_WIRE_BYTES) -> bytes:
    """`envelope` as bytes (`crypto.channel.encode`), for a Flower record; `loads` inverts it.

    What `loads` would refuse (a payload other than a message, an envelope beyond `max_bytes`) is
    refused here already, where its sender can still act on it, rather than at its recipient.
    """
    if not isinstance(envelope, Envelope):
        raise ProtocolError(f"only an Envelope goes on the wire, got a {type(envelope).__name__}")
    if type(envelope.payload) not in MESSAGE_TYPES:
        raise ProtocolError(f"a {type(envelope.payload).__name__} is not a message of Protocol 1")
    try:
        data = encode(envelope)
    except InvalidParameter as error:
        raise ProtocolError(f"cannot put this envelope on the wire: {error}") from None
    if len(data) > max_bytes:
        raise ProtocolError(
            f"the {envelope.kind} message is {len(data)} bytes, above the limit of {max_bytes}"
        )
    return data


def loads(data: bytes, *, max_bytes: int = MAX_WIRE_BYTES) -> Envelope:
    """The `Envelope` that `dumps` wrote as `data`; ProtocolError if `data` is not exactly one."""
    return decode(data, Envelope, what="protocol message", max_bytes=max_bytes)


def decode(data: bytes, root: type[T], *, what: str, max_bytes: int = MAX_WIRE_BYTES) -> T:
    """The `root` dataclass that `encode` wrote as `data`, strictly (module docstring).

    `what` names the data in errors ("malformed <what>: ..."). `root` and the dataclasses its
    fields name are the only classes that can come back (plus the messages, where a field is
    annotated `Any`, as an envelope's payload is).
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ProtocolError(f"malformed {what}: expected bytes, got a {type(data).__name__}")
    if len(data) > max_bytes:
        raise ProtocolError(f"malformed {what}: {len(data)} bytes, above the limit of {max_bytes}")
    return _Decoder(memoryview(data).cast("B"), what).whole(root)


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    """(name, resolved annotation) of each init field of dataclass `cls`, in declaration order."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls) if f.init)


class _Decoder:
    """Reads one value of an expected type from `data[start:stop]`; positions index `data`."""

    def __init__(self, data: memoryview, what: str) -> None:
        self.data = data
        self.what = what

    def fail(self, problem: str, at: int) -> ProtocolError:
        return ProtocolError(f"malformed {self.what}: {problem} (at byte {at} of {len(self.data)})")

    def whole(self, root: type[T]) -> T:
        value, end = self.value(root, 0, len(self.data), 0)
        if end != len(self.data):
            extra = len(self.data) - end
            raise self.fail(
                f"{extra} trailing byte{'' if extra == 1 else 's'} after the {root.__name__}", end
            )
        return typing.cast(T, value)

    def header(self, start: int, stop: int) -> tuple[bytes, int, int]:
        """The tag of the value at `start` and the span [begin, end) of its contents."""
        if stop - start < HEADER_BYTES:
            raise self.fail("truncated: a value's tag and length are cut off", start)
        tag = bytes(self.data[start : start + 1])
        if tag not in TAG_NAMES:
            raise self.fail(f"unknown type tag {tag!r}", start)
        length = int.from_bytes(self.data[start + 1 : start + HEADER_BYTES], "big")
        begin = start + HEADER_BYTES
        if length > stop - begin:
            raise self.fail(f"a length of {length} bytes runs beyond the data ({stop - begin} left)", start)
        return tag, begin, begin + length

    def value(self, hint: Any, start: int, stop: int, depth: int) -> tuple[Any, int]:
        """The value of type `hint` at `start` and the position after it."""
        tag, begin, end = self.header(start, stop)
        expected = _tag_of(hint)
        if tag != expected:
            raise self.fail(f"expected {TAG_NAMES[expected]}, found {TAG_NAMES[tag]}", start)
        if tag == b"i":
            return self.integer(begin, end), end
        if tag == b"b":
            return bytes(self.data[begin:end]), end
        if tag == b"s":
            return self.text(begin, end), end
        if depth + 1 > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels", start)
        if tag == b"t":
            return self.items(typing.get_args(hint), begin, end, depth + 1), end
        return self.dataclass(hint, begin, end, depth + 1), end

    def integer(self, begin: int, end: int) -> int:
        number = int.from_bytes(self.data[begin:end], "big", signed=True)
        if end - begin != ((number.bit_length() + 8) // 8 or 1):
            raise self.fail(f"an int of {end - begin} bytes that is not in its one encoding", begin)
        return number

    def text(self, begin: int, end: int) -> str:
        try:
            return str(self.data[begin:end], "utf-8")
        except UnicodeDecodeError:
            raise self.fail("text that is not UTF-8", begin) from None

    def items(self, args: tuple[Any, ...], begin: int, end: int, depth: int) -> tuple[Any, ...]:
        """A tuple[X, ...] (any length) or tuple[X, Y, ...] (exactly these)."""
        repeated = len(args) == 2 and args[1] is Ellipsis
        result: list[Any] = []
        position = begin
        while position < end:
            if not repeated and len(result) == len(args):
                raise self.fail(f"a tuple of more than {len(args)} items", position)
            item, position = self.value(args[0] if repeated else args[len(result)], position, end, depth)
            result.append(item)
        if not repeated and len(result) != len(args):
            raise self.fail(f"a tuple of {len(result)} items where {len(args)} are expected", begin)
        return tuple(result)

    def dataclass(self, hint: Any, begin: int, end: int, depth: int) -> Any:
        name, position = self.value(str, begin, end, depth)
        allowed = MESSAGE_TYPES if hint is Any else (hint,)
        cls = next((c for c in allowed if c.__name__ == name), None)
        if cls is None:
            expected = " or ".join(c.__name__ for c in allowed)
            raise self.fail(f"class {name!r} where {expected} is expected", begin)
        values = {}
        for field_name, field_hint in _fields(cls):
            if position == end:
                raise self.fail(f"{name} lacks its field {field_name!r}", position)
            found, position = self.value(str, position, end, depth)
            if found != field_name:
                raise self.fail(f"{name} has a field {found!r} where {field_name!r} is expected", position)
            values[field_name], position = self.value(field_hint, position, end, depth)
        if position != end:
            raise self.fail(f"{name} has more than its {len(values)} fields", position)
        return cls(**values)


def _tag_of(hint: Any) -> bytes:
    """The type tag a value annotated `hint` must carry."""
    if hint is int:
        return b"i"
    if hint is bytes:
        return b"b"
    if hint is str:
        return b"s"
    if typing.get_origin(hint) is tuple:
        return b"t"
    if hint is Any or (isinstance(hint, type) and dataclasses.is_dataclass(hint)):
        return b"d"
    # A programming error in a whitelisted class, not in the data: its annotation has no encoding.
    raise TypeError(f"no wire encoding for the annotation {hint!r}")


__all__ = ["MAX_DEPTH", "MAX_WIRE_BYTES", "MESSAGE_TYPES", "decode", "dumps", "loads"]
