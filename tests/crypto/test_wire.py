"""Protocol 1 between separate parties (issue 13): envelopes as bytes, and a silo kept as bytes.

On Flower a message crosses the wire as bytes, and a silo's ClientApp starts afresh for every
message: these tests run the protocol with nothing but bytes between the parties and between two
messages of a silo, and feed the decoder every kind of malformed input.
"""

from __future__ import annotations

import dataclasses
import functools
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.crypto.channel import Envelope, TamperedMessage, encode
from uldp.crypto.dh import generate_dh_keypair
from uldp.crypto.encoding import Encoding
from uldp.crypto.protocol import (
    AggregationServer,
    BlindedHistogramMessage,
    DhKeyMessage,
    DhKeysBroadcast,
    EncryptedWeightsMessage,
    MaskedSumMessage,
    PaillierKeyMessage,
    ProtocolParams,
    SealedSeedMessage,
    Silo,
    SiloState,
    setup,
    weighting_round,
)
from uldp.crypto.protocol.messages import Message
from uldp.crypto.protocol.silo import SEED_OWNER
from uldp.crypto.sealing import SealedBox
from uldp.crypto.wire import MAX_DEPTH, MESSAGE_TYPES, decode, dumps, loads
from uldp.errors import ProtocolError

SMALL = Encoding(precision=1e-8, n_max=60, value_bound=100.0)
SILOS, USERS, D = 3, 4, 3
EVERYONE = np.ones(USERS, dtype=bool)


def params(**changes) -> ProtocolParams:
    fields = dict(silos=SILOS, users=USERS, dimension=D, key_bits=1024, encoding=SMALL, test_keys=True)
    return ProtocolParams(**{**fields, **changes})


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 6, size=(SILOS, USERS))
    rounds = [
        (
            [rng.normal(scale=0.5, size=(USERS, D)) for _ in range(SILOS)],
            [rng.normal(size=D) for _ in range(SILOS)],
        )
        for _ in range(2)
    ]
    return counts, rounds


def wire(envelope: Envelope) -> Envelope:
    """The network between two Flower nodes: only the bytes of the envelope cross it."""
    data = dumps(envelope)
    assert isinstance(data, bytes)
    return loads(data)


def plain_aggregates(keypair, counts, rounds) -> list[np.ndarray]:
    federation = setup(counts, params(), keypair=keypair)
    return [
        weighting_round(federation, t, deltas, noise, EVERYONE, workers=1).aggregate
        for t, (deltas, noise) in enumerate(rounds)
    ]


# -- envelopes on the wire ---------------------------------------------------------------------------

INTS = st.one_of(st.integers(), st.integers(min_value=-(2**6200), max_value=2**6200))
INT_TUPLES = st.lists(INTS, max_size=6).map(tuple)
MESSAGES = st.one_of(
    st.builds(PaillierKeyMessage, n=INTS),
    st.builds(DhKeyMessage, silo=INTS, public=INTS),
    st.builds(DhKeysBroadcast, publics=st.lists(st.tuples(INTS, INTS), max_size=5).map(tuple)),
    st.builds(
        SealedSeedMessage,
        sender=INTS,
        recipient=INTS,
        box=st.builds(SealedBox, nonce=st.binary(), ciphertext=st.binary(), tag=st.binary()),
    ),
    st.builds(BlindedHistogramMessage, silo=INTS, values=INT_TUPLES),
    st.builds(EncryptedWeightsMessage, round=INTS, ciphertexts=INT_TUPLES),
    st.builds(MaskedSumMessage, silo=INTS, round=INTS, ciphertexts=INT_TUPLES),
)
ENVELOPES = st.builds(
    Envelope,
    sender=st.text(max_size=12),
    receiver=st.text(max_size=12),
    kind=st.text(max_size=20),
    round=INTS,
    seq=INTS,
    payload=MESSAGES,
    tag=st.binary(max_size=40),
)


def python_types(value) -> bool:
    """Every int a Python int, every sequence a tuple, all the way down."""
    if dataclasses.is_dataclass(value):
        return all(python_types(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, tuple):
        return all(python_types(item) for item in value)
    return type(value) in (int, bytes, str)


@pytest.mark.parametrize("first", ["uldp.crypto.wire", "uldp.crypto.protocol.silo", "uldp.crypto.protocol"])
def test_imports_in_any_order(first):
    """crypto.wire and crypto.protocol import each other's modules: either may be imported first."""
    code = f"import {first}; from uldp.crypto.wire import loads; from uldp.crypto.protocol import Silo"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_message_kind_may_travel():
    assert set(MESSAGE_TYPES) == set(Message.__subclasses__())


@settings(max_examples=300, deadline=None)
@given(ENVELOPES)
def test_loads_inverts_dumps_for_every_message_kind(envelope):
    back = loads(dumps(envelope))
    assert back == envelope
    assert type(back.payload) is type(envelope.payload)
    assert python_types(back)


def test_lists_come_back_as_tuples_and_numpy_ints_as_python_ints():
    message = BlindedHistogramMessage(np.int64(2), [np.int64(5), 7])  # type: ignore[arg-type]
    back = loads(dumps(Envelope("silo 2", "server", message.KIND, -1, 0, message, b"t" * 32)))
    assert back.payload == BlindedHistogramMessage(2, (5, 7))
    assert python_types(back)


def test_protocol_through_the_wire_gives_the_in_process_aggregate(keypair_1024):
    """A real setup and two rounds, every envelope decoded from bytes: each still verifies."""
    counts, rounds = inputs()
    federation = setup(counts, params(), keypair=keypair_1024, network=wire)
    over_the_wire = [
        weighting_round(federation, t, deltas, noise, EVERYONE, workers=1).aggregate
        for t, (deltas, noise) in enumerate(rounds)
    ]
    for got, expected in zip(over_the_wire, plain_aggregates(keypair_1024, counts, rounds)):
        np.testing.assert_array_equal(got, expected)
    assert all(isinstance(envelope, Envelope) for envelope in federation.server.inbox)


def test_a_well_formed_but_altered_envelope_is_still_refused_by_its_recipient(keypair_1024):
    """Decoding checks the form only; the tag is checked by the recipient, as in one process."""

    def flip_last_tag_byte(envelope: Envelope) -> Envelope:
        data = bytearray(dumps(envelope))
        if envelope.kind == "masked-sum":
            data[-1] ^= 1  # the tag is the envelope's last field
        return loads(bytes(data))

    counts, rounds = inputs()
    federation = setup(counts, params(), keypair=keypair_1024, network=flip_last_tag_byte)
    with pytest.raises(TamperedMessage, match="masked-sum from silo 0 to server .* failed authentication"):
        weighting_round(federation, 0, *rounds[0], EVERYONE, workers=1)


def test_envelope_and_state_survive_a_flower_record_as_bytes(keypair_1024):
    """A ConfigRecord bytes value through Flower's own protobuf serialisation, as between nodes."""
    flwr_app = pytest.importorskip("flwr.app")
    serde = pytest.importorskip("flwr.common.serde")

    def through_flower(value: bytes) -> bytes:
        record = flwr_app.RecordDict({"protocol": flwr_app.ConfigRecord({"data": value})})
        return serde.recorddict_from_proto(serde.recorddict_to_proto(record))["protocol"]["data"]

    counts, rounds = inputs()
    federation = setup(counts, params(), keypair=keypair_1024)
    weights = federation.server.encrypted_weights(0, EVERYONE)[1]
    silo = Silo.restore(through_flower(federation.silos[1].export_state()), params())
    reply = silo.masked_sum(
        loads(through_flower(dumps(weights))), rounds[0][0][1], rounds[0][1][1], workers=1
    )
    assert loads(through_flower(dumps(reply))) == reply


# -- malformed input ---------------------------------------------------------------------------------


def sample_envelope() -> Envelope:
    message = DhKeysBroadcast(((0, 5), (1, -300)))
    return Envelope("server", "silo 1", message.KIND, -1, 3, message, bytes(range(32)))


def field(tag: bytes, contents: bytes) -> bytes:
    return tag + len(contents).to_bytes(8, "big") + contents


def envelope_with(payload) -> bytes:
    """The encoding of an envelope around `payload`, which may be any dataclass at all."""
    return encode(dataclasses.replace(sample_envelope(), payload=payload))


@dataclass(frozen=True)
class Popen:  # a class the data names but the decoder must never build
    args: tuple[str, ...]


def named(name: str, **fields):
    """A dataclass instance whose class is called `name` with exactly `fields`, in this order."""
    cls = dataclasses.make_dataclass(name, list(fields))
    return cls(**fields)


def malformed_inputs() -> dict[str, tuple[bytes, str]]:
    good = dumps(sample_envelope())
    return {
        "empty": (b"", "truncated"),
        "trailing bytes": (good + b"\0", "1 trailing byte after the Envelope"),
        "two envelopes": (good + good, "trailing bytes after the Envelope"),
        "unknown tag": (b"x" + good[1:], "unknown type tag b'x'"),
        "length beyond the data": (good[:1] + (2**63).to_bytes(8, "big") + good[9:], "runs beyond the data"),
        "unknown class": (envelope_with(Popen(("rm", "-rf"))), "class 'Popen' where PaillierKeyMessage or"),
        "an envelope in an envelope": (envelope_with(sample_envelope()), "class 'Envelope' where"),
        "a message at the top": (encode(PaillierKeyMessage(7)), "class 'PaillierKeyMessage' where Envelope"),
        "a missing field": (envelope_with(named("DhKeyMessage", silo=1)), "lacks its field 'public'"),
        "an extra field": (
            envelope_with(named("DhKeyMessage", silo=1, public=2, admin=1)),
            "DhKeyMessage has more than its 2 fields",
        ),
        "a renamed field": (
            envelope_with(named("DhKeyMessage", silo=1, key=2)),
            "a field 'key' where 'public' is expected",
        ),
        "fields out of order": (
            envelope_with(named("DhKeyMessage", public=2, silo=1)),
            "a field 'public' where 'silo' is expected",
        ),
        "a field of the wrong type": (
            envelope_with(named("DhKeyMessage", silo="1", public=2)),
            "expected an int, found text",
        ),
        "a pair of three": (envelope_with(DhKeysBroadcast(((0, 1, 2),))), "a tuple of more than 2 items"),
        "a pair of one": (envelope_with(DhKeysBroadcast(((0,),))), "a tuple of 1 items where 2 are expected"),
        "text that is not UTF-8": (field(b"d", field(b"s", b"Envel\xffope")), "not UTF-8"),
        "not bytes": ("an envelope", "expected bytes"),  # type: ignore[dict-item]
    }


@pytest.mark.parametrize("case", sorted(malformed_inputs()))
def test_malformed_input_is_one_protocol_error_line_naming_the_fault(case):
    data, expected = malformed_inputs()[case]
    with pytest.raises(ProtocolError, match="malformed protocol message") as error:
        loads(data)
    assert expected in str(error.value)
    assert "\n" not in str(error.value)


def test_an_int_not_in_its_one_encoding_is_refused():
    """Two byte strings for one value would make decoding no longer the inverse of encoding."""
    message = field(b"s", b"PaillierKeyMessage") + field(b"s", b"n")
    assert decode(field(b"d", message + field(b"i", b"\x05")), PaillierKeyMessage, what="test") == (
        PaillierKeyMessage(5)
    )
    with pytest.raises(ProtocolError, match="an int of 2 bytes that is not in its one encoding"):
        decode(field(b"d", message + field(b"i", b"\x00\x05")), PaillierKeyMessage, what="test")
    with pytest.raises(ProtocolError, match="an int of 0 bytes"):
        decode(field(b"d", message + field(b"i", b"")), PaillierKeyMessage, what="test")


def test_every_truncation_is_refused():
    data = dumps(sample_envelope())
    for length in range(len(data)):
        with pytest.raises(ProtocolError, match="malformed protocol message"):
            loads(data[:length])


def test_dumps_refuses_what_loads_would_refuse():
    with pytest.raises(ProtocolError, match="a Popen is not a message of Protocol 1"):
        dumps(dataclasses.replace(sample_envelope(), payload=Popen(("ls",))))
    with pytest.raises(ProtocolError, match="only an Envelope goes on the wire, got a DhKeyMessage"):
        dumps(DhKeyMessage(1, 2))  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="cannot put this envelope on the wire: .* no booleans"):
        dumps(dataclasses.replace(sample_envelope(), payload=DhKeyMessage(True, 2)))


def test_size_limit_refuses_before_decoding_and_dumps_refuses_too():
    data = dumps(sample_envelope())
    assert loads(data, max_bytes=len(data)) == sample_envelope()
    with pytest.raises(ProtocolError, match=f"{len(data)} bytes, above the limit of {len(data) - 1}"):
        loads(data, max_bytes=len(data) - 1)
    with pytest.raises(ProtocolError, match="dh-keys message is .* bytes, above the limit"):
        dumps(sample_envelope(), max_bytes=len(data) - 1)


@dataclass(frozen=True)
class Nest:
    inner: tuple[Nest, ...]


def nested(levels: int) -> Nest:
    value = Nest(())
    for _ in range(levels - 1):
        value = Nest((value,))
    return value


def test_nesting_beyond_the_limit_is_refused_without_recursion_error():
    # A Nest of k levels has 2k - 1 nested values (each Nest and its tuple, the innermost's empty).
    levels = (MAX_DEPTH + 1) // 2
    assert decode(encode(nested(levels)), Nest, what="test value") == nested(levels)
    with pytest.raises(ProtocolError, match=f"nested deeper than {MAX_DEPTH} levels"):
        decode(encode(nested(levels + 1)), Nest, what="test value")
    deep = b""
    for _ in range(100_000):  # far beyond Python's recursion limit
        deep = field(b"t", deep)
    with pytest.raises(ProtocolError):
        decode(deep, Nest, what="test value")
    with pytest.raises(ProtocolError):
        loads(envelope_with(DhKeysBroadcast(((0, (1, (2, (3, (4,))))),))))  # type: ignore[arg-type]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mangled_bytes_give_an_envelope_or_a_protocol_error_and_nothing_else(data):
    good = bytearray(dumps(data.draw(ENVELOPES)))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(good)))
        action = data.draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        if action == "flip" and position < len(good):
            good[position] ^= 1 << data.draw(st.integers(0, 7))
        elif action == "insert":
            good[position:position] = data.draw(st.binary(min_size=1, max_size=9))
        elif action == "delete":
            del good[position : position + data.draw(st.integers(1, 9))]
        elif action == "cut":
            del good[position:]
    try:
        result = loads(bytes(good))
    except ProtocolError as error:
        assert "\n" not in str(error)
    else:
        assert isinstance(result, Envelope)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_give_a_protocol_error(data):
    with pytest.raises(ProtocolError):
        loads(data)


# -- a silo's state between messages -----------------------------------------------------------------


class Node:
    """A silo's Flower node: between two messages only the bytes of its state survive."""

    def __init__(self, silo: Silo) -> None:
        self.params = silo.params
        self.state = silo.export_state()
        self.restores = 0

    def handle(self, step, *args, **kwargs):
        """Restore the silo, run one step of it, keep its state, and forget the object."""
        silo = Silo.restore(self.state, self.params)
        self.restores += 1
        result = step(silo, *args, **kwargs)
        self.state = silo.export_state()
        return result


def setup_across_restores(counts, keypair) -> tuple[AggregationServer, list[Node]]:
    """Setup (a)-(f) as `crypto.protocol.setup` runs it, each silo restored for every message."""
    p = params()
    server = AggregationServer(p, keypair)
    nodes = [Node(Silo(s, counts[s], p, server_key=server.dh_public)) for s in range(SILOS)]
    for node in nodes:
        server.receive_dh_key(wire(node.handle(Silo.dh_key)))
    for node, envelope in zip(nodes, server.paillier_key()):
        node.handle(Silo.receive_paillier_key, wire(envelope))
    for node, envelope in zip(nodes, server.broadcast_dh_keys()):
        node.handle(Silo.receive_dh_keys, wire(envelope))
    for envelope in nodes[SEED_OWNER].handle(Silo.sealed_seeds):
        relayed = wire(server.relay(wire(envelope)))
        nodes[int(relayed.receiver.removeprefix("silo "))].handle(Silo.receive_sealed_seed, relayed)
    for node in nodes:
        server.receive_histogram(wire(node.handle(Silo.blinded_histogram)))
    server.compute_inverses()
    return server, nodes


def round_across_restores(server, nodes, t, deltas, noise) -> np.ndarray:
    for node, envelope, silo_deltas, silo_noise in zip(
        nodes, server.encrypted_weights(t, EVERYONE), deltas, noise
    ):
        reply = node.handle(Silo.masked_sum, wire(envelope), silo_deltas, silo_noise, workers=1)
        server.receive_masked_sum(wire(reply))
    return server.aggregate(t)


def test_silos_restored_between_every_two_messages_give_the_plain_aggregate(keypair_1024):
    counts, rounds = inputs(seed=3)
    server, nodes = setup_across_restores(counts, keypair_1024)
    got = [round_across_restores(server, nodes, t, *round_inputs) for t, round_inputs in enumerate(rounds)]
    for aggregate, expected in zip(got, plain_aggregates(keypair_1024, counts, rounds)):
        np.testing.assert_array_equal(aggregate, expected)
    # (a) dh key, Paillier key, (b) DH keys, (c) seed, (e) histogram, two rounds; silo 0 seals instead.
    assert [node.restores for node in nodes] == [7, 7, 7]


def refusal(silo: Silo, step, *args, **kwargs) -> str:
    with pytest.raises(ProtocolError) as error:
        step(silo, *args, **kwargs)
    return str(error.value)


def test_a_restored_silo_refuses_a_replay_and_a_used_round_as_the_original(keypair_1024):
    counts, rounds = inputs()
    federation = setup(counts, params(), keypair=keypair_1024)
    server, original = federation.server, federation.silos[1]
    deltas, noise = rounds[0]
    weights = server.encrypted_weights(0, EVERYONE)
    original.masked_sum(weights[1], deltas[1], noise[1], workers=1)
    restored = Silo.restore(original.export_state(), params())

    replayed = [
        refusal(silo, Silo.masked_sum, wire(weights[1]), deltas[1], noise[1]) for silo in (original, restored)
    ]
    assert replayed[0] == replayed[1]
    assert "encrypted-weights from server to silo 1 (round 0, message 2) is replayed" in replayed[0]

    again = server.encrypted_weights(0, EVERYONE)[1]  # a fresh, authentic message reusing round 0
    reused = [
        refusal(silo, Silo.masked_sum, wire(again), deltas[1], noise[1]) for silo in (original, restored)
    ]
    assert reused[0] == reused[1]
    assert "round 0 was already used" in reused[0]


def test_export_restore_export_is_the_same_state(keypair_1024):
    counts, _ = inputs()
    federation = setup(counts, params(), keypair=keypair_1024)
    for silo in federation.silos:
        state = silo.export_state()
        assert Silo.restore(state, params()).export_state() == state


@functools.cache
def fresh_state() -> bytes:
    """Silo 1 just created: its DH key pair and its channel with the server."""
    return Silo(1, [1, 2, 3, 4], params(), server_key=generate_dh_keypair().public).export_state()


@pytest.mark.parametrize(
    ("other", "expected"),
    [
        (dict(users=5), r"silos, users, d = \(3, 4, 3\), now \(3, 5, 3\)"),
        (dict(dimension=4), r"now \(3, 4, 4\)"),
        (dict(silos=2), r"now \(2, 4, 3\)"),
        (dict(key_bits=512), "another key size or encoding"),
        (
            dict(encoding=Encoding(precision=1e-7, n_max=60, value_bound=100.0)),
            "another key size or encoding",
        ),
    ],
)
def test_restore_under_other_params_is_refused(other, expected):
    with pytest.raises(
        ProtocolError, match=r"silo state \(silo 1\) was made under other protocol parameters"
    ):
        Silo.restore(fresh_state(), params(**other))
    with pytest.raises(ProtocolError, match=expected):
        Silo.restore(fresh_state(), params(**other))


def replace_state(data: bytes, **changes) -> bytes:
    return encode(dataclasses.replace(decode(data, SiloState, what="silo state"), **changes))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"garbage", "malformed silo state: truncated"),
        (b"", "malformed silo state: truncated"),
        (dumps(sample_envelope()), "malformed silo state: class 'Envelope' where SiloState is expected"),
        (lambda: fresh_state()[:-1], "malformed silo state"),
        (lambda: fresh_state() + b"\0", "malformed silo state: 1 trailing byte after the SiloState"),
        (lambda: replace_state(fresh_state(), version=3), "version 3, this code reads version 2"),
        (lambda: replace_state(fresh_state(), seed=(b"short",)), "one 32-byte seed R"),
        (lambda: replace_state(fresh_state(), counts=(1, 2, 3)), "3 counts for 4 users"),
        (lambda: replace_state(fresh_state(), counts=(1, 2, 3, 61)), "exceeds N_max = 60"),
        (lambda: replace_state(fresh_state(), silo=2), r"the channels are those of silo 1"),
        (lambda: replace_state(fresh_state(), mask_seeds=((1, bytes(32)),)), "mask seeds for silos \\[1\\]"),
        (lambda: replace_state(fresh_state(), dh_private=1), "the DH key pair is out of range"),
        (lambda: replace_state(fresh_state(), paillier_n=(2**1023 + 1,)), "small prime factor 3"),
    ],
)
def test_restore_of_a_malformed_state_is_a_protocol_error(data, expected):
    with pytest.raises(ProtocolError, match=expected) as error:
        Silo.restore(data() if callable(data) else data, params())
    assert "\n" not in str(error.value)


def test_a_restored_state_without_the_sealing_key_refuses_the_seed_as_a_protocol_error(keypair_1024):
    """Issue 32, item 4: a state whose sealing key of silo 0 is gone (mutated, or a channel restored
    without it) raised KeyError at the sealed seed, "internal error"; it is a ProtocolError."""
    counts, _ = inputs()
    p = params()
    server = AggregationServer(p, keypair_1024)
    silos = [Silo(s, counts[s], p, server_key=server.dh_public) for s in range(SILOS)]
    for silo in silos:
        server.receive_dh_key(silo.dh_key())
    for silo, envelope in zip(silos, server.paillier_key()):
        silo.receive_paillier_key(envelope)
    for silo, envelope in zip(silos, server.broadcast_dh_keys()):
        silo.receive_dh_keys(envelope)
    sealed = silos[SEED_OWNER].sealed_seeds()[0]  # for silo 1
    silo = Silo.restore(replace_state(silos[1].export_state(), seal_keys=()), p)
    with pytest.raises(
        ProtocolError, match=r"^silo 1: a sealed seed before the DH key broadcast \(setup \(b\)\)$"
    ):
        silo.receive_sealed_seed(server.relay(sealed))
