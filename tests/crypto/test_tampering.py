"""Protocol 1 under a man in the middle (issue 12, point 7): every change in transit is detected
and named, before anything is decrypted or decoded; the honest run still gives the exact sum."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from click.testing import CliRunner

from uldp.cli.main import cli
from uldp.crypto.channel import SERVER, SETUP_ROUND, Channels, Envelope, TamperedMessage, encode, silo_name
from uldp.crypto.dh import generate_dh_keypair
from uldp.crypto.encoding import Encoding
from uldp.crypto.paillier import PrivateKey, PublicKey, generate_keypair
from uldp.crypto.protocol import (
    AggregationServer,
    PaillierKeyMessage,
    ProtocolParams,
    Silo,
    setup,
    weighting_round,
)
from uldp.crypto.sealing import SealedBox
from uldp.errors import ProtocolError, UldpError

SMALL = Encoding(precision=1e-8, n_max=60, value_bound=100.0)
SILOS, USERS, D = 3, 4, 3


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 6, size=(SILOS, USERS))
    deltas = [rng.normal(scale=0.5, size=(USERS, D)) for _ in range(SILOS)]
    noise = [rng.normal(size=D) for _ in range(SILOS)]
    return counts, deltas, noise


def params(key_bits: int = 1024) -> ProtocolParams:
    return ProtocolParams(
        silos=SILOS, users=USERS, dimension=D, key_bits=key_bits, encoding=SMALL, test_keys=key_bits < 2048
    )


def exact(deltas, counts, noise) -> np.ndarray:
    """What the protocol computes: fixed-point values, weighted exactly (Appendix D.4)."""
    totals = counts.sum(axis=0)
    out = []
    for j in range(D):
        acc = Fraction(0)
        for s in range(SILOS):
            for u, e in enumerate(SMALL.fixed_point(deltas[s][:, j])):
                acc += Fraction(e * int(counts[s, u]), int(totals[u]))
            acc += SMALL.fixed_point(noise[s][j : j + 1])[0]
        out.append(float(acc) * SMALL.precision)
    return np.array(out)


class Attacker:
    """The wire: passes every envelope on, except those `alter` changes; records what it saw."""

    def __init__(self, alter=None):
        self.alter = alter or (lambda envelope: envelope)
        self.seen: list[Envelope] = []

    def __call__(self, envelope: Envelope) -> Envelope:
        self.seen.append(envelope)
        return self.alter(envelope)


def federation(keypair, network=None, seed: int = 0):
    counts, deltas, noise = inputs(seed)
    fed = setup(counts, params(keypair[0].bits), keypair=keypair, **({"network": network} if network else {}))
    return fed, deltas, noise


def one_round(fed, deltas, noise, t: int = 0):
    return weighting_round(fed, t, deltas, noise, np.ones(USERS, dtype=bool), workers=1)


def replace_payload(envelope: Envelope, **changes) -> Envelope:
    return dataclasses.replace(envelope, payload=dataclasses.replace(envelope.payload, **changes))


def shift_silo_sum(public: PublicKey, silo: int, k: int):
    """Multiply silo `silo`'s first masked ciphertext by Enc(k): the aggregate moves by exactly k."""

    def alter(envelope: Envelope) -> Envelope:
        if envelope.kind == "masked-sum" and envelope.sender == silo_name(silo):
            first, *rest = envelope.payload.ciphertexts
            return replace_payload(envelope, ciphertexts=(int(public.add(first, public.encrypt(k))), *rest))
        return envelope

    return alter


def test_honest_run_gives_the_exact_aggregate(keypair_1024):
    counts, deltas, noise = inputs()
    wire = Attacker()
    fed = setup(counts, params(), keypair=keypair_1024, network=wire)
    for t in range(2):
        result = one_round(fed, deltas, noise, t)
        np.testing.assert_allclose(result.aggregate, exact(deltas, counts, noise), rtol=0, atol=1e-12)
    kinds = {e.kind for e in wire.seen}
    assert kinds == set(
        "dh-key paillier-key dh-keys sealed-seed blinded-histogram encrypted-weights masked-sum".split()
    )
    assert all(isinstance(e, Envelope) and len(e.tag) == 32 for e in wire.seen)
    assert fed.authentication_seconds > 0


def test_the_shift_attack_works_on_the_bare_ciphertexts(keypair_1024):
    # The attack the audit ran, on the ciphertexts alone: Paillier is malleable, so only the
    # channel can stop it (this is why every message is authenticated).
    public, private = keypair_1024
    c = public.encrypt(41)
    assert private.decrypt(public.add(c, public.encrypt(1000))) == 1041


@pytest.mark.parametrize("k", [1, 10**8])
def test_targeted_enc_k_shift_in_transit_is_detected_before_decryption(keypair_1024, monkeypatch, k):
    decrypted = []
    real = PrivateKey.decrypt
    monkeypatch.setattr(PrivateKey, "decrypt", lambda self, c: decrypted.append(c) or real(self, c))
    fed, deltas, noise = federation(keypair_1024)
    fed.network = Attacker(shift_silo_sum(keypair_1024[0], silo=1, k=k))
    with pytest.raises(TamperedMessage) as caught:
        one_round(fed, deltas, noise)
    message = str(caught.value)
    assert message.startswith("tampered message: masked-sum from silo 1 to server (round 0, ")
    assert "failed authentication" in message and "outside the decodable range" not in message
    assert "\n" not in message
    assert (caught.value.sender, caught.value.receiver, caught.value.round, caught.value.kind) == (
        "silo 1",
        "server",
        0,
        "masked-sum",
    )
    assert decrypted == []  # refused on receipt: nothing was decrypted, nothing decoded


def test_targeted_shift_is_detected_at_3072_bits():
    keypair = generate_keypair(3072)
    counts, deltas, noise = inputs()
    encoding = Encoding(precision=1e-10, n_max=2000)
    p = ProtocolParams(silos=SILOS, users=USERS, dimension=D, encoding=encoding)
    fed = setup(counts, p, keypair=keypair)
    fed.network = Attacker(shift_silo_sum(keypair[0], silo=2, k=10**10))
    with pytest.raises(TamperedMessage, match="masked-sum from silo 2 to server"):
        one_round(fed, deltas, noise)


def flip_bit(value, bit: int):
    if isinstance(value, bytes):
        data = bytearray(value)
        data[bit % len(data)] ^= 1 << (bit % 8)
        return bytes(data)
    return int(value) ^ (1 << (bit % max(int(value).bit_length(), 1)))


def corrupt_payload(payload, rng):
    """`payload` with one random bit flipped in one of its numbers or byte strings."""
    for f in dataclasses.fields(payload):
        value = getattr(payload, f.name)
        if isinstance(value, tuple) and value and isinstance(value[0], tuple):  # DH keys (id, key)
            i = int(rng.integers(len(value)))
            items = list(value)
            items[i] = (items[i][0], flip_bit(items[i][1], int(rng.integers(3072))))
            return dataclasses.replace(payload, **{f.name: tuple(items)})
        if isinstance(value, tuple) and value:
            i = int(rng.integers(len(value)))
            items = list(value)
            items[i] = flip_bit(items[i], int(rng.integers(1024)))
            return dataclasses.replace(payload, **{f.name: tuple(items)})
        if isinstance(value, SealedBox):
            return dataclasses.replace(
                payload, box=dataclasses.replace(value, ciphertext=flip_bit(value.ciphertext, 5))
            )
    name = "n" if hasattr(payload, "n") else "public"
    return dataclasses.replace(payload, **{name: flip_bit(getattr(payload, name), int(rng.integers(1000)))})


KINDS = [
    ("dh-key", "silo 1", "server"),
    ("paillier-key", "server", "silo 2"),
    ("dh-keys", "server", "silo 0"),
    ("sealed-seed", "silo 0", "silo 2"),
    ("blinded-histogram", "silo 2", "server"),
    ("encrypted-weights", "server", "silo 1"),
    ("masked-sum", "silo 0", "server"),
]


@pytest.mark.parametrize("kind,sender,receiver", KINDS)
@pytest.mark.parametrize("seed", [0, 1])
def test_random_corruption_of_any_message_is_detected_and_named(keypair_512, kind, sender, receiver, seed):
    rng = np.random.default_rng(seed)
    done: list[bool] = []

    def alter(envelope: Envelope) -> Envelope:
        # Once: a relayed message crosses the wire twice, and flipping the same bit twice undoes it.
        if (envelope.kind, envelope.sender, envelope.receiver) == (kind, sender, receiver) and not done:
            done.append(True)
            return dataclasses.replace(envelope, payload=corrupt_payload(envelope.payload, rng))
        return envelope

    counts, deltas, noise = inputs(seed)
    with pytest.raises(TamperedMessage) as caught:
        fed = setup(counts, params(512), keypair=keypair_512, network=Attacker(alter))
        one_round(fed, deltas, noise)
    assert f"{kind} from {sender} to {receiver}" in str(caught.value)


@pytest.mark.parametrize(
    "field,value",
    [("tag", bytes(32)), ("round", 1), ("seq", 1), ("kind", "encrypted-weights"), ("sender", "silo 1")],
)
def test_changing_the_header_or_tag_is_detected(keypair_512, field, value):
    fed, deltas, noise = federation(keypair_512)
    target = ("masked-sum", "silo 0")

    def alter(envelope: Envelope) -> Envelope:
        if (envelope.kind, envelope.sender) == target:
            return dataclasses.replace(envelope, **{field: value})
        return envelope

    fed.network = Attacker(alter)
    with pytest.raises(TamperedMessage, match="failed authentication"):
        one_round(fed, deltas, noise)


def test_replay_of_a_previous_rounds_masked_sum_is_detected(keypair_512):
    fed, deltas, noise = federation(keypair_512)
    wire = Attacker()
    fed.network = wire
    one_round(fed, deltas, noise, 0)
    old = next(e for e in wire.seen if e.kind == "masked-sum" and e.sender == "silo 1")
    fed.network = Attacker(lambda e: old if e.kind == "masked-sum" and e.sender == "silo 1" else e)
    with pytest.raises(TamperedMessage) as caught:
        one_round(fed, deltas, noise, 1)
    assert "masked-sum from silo 1 to server (round 0, message 2) is replayed: message 3 was expected" in str(
        caught.value
    )


def test_replay_of_a_previous_rounds_weights_to_a_silo_is_detected(keypair_512):
    fed, deltas, noise = federation(keypair_512)
    wire = Attacker()
    fed.network = wire
    one_round(fed, deltas, noise, 0)
    old = next(e for e in wire.seen if e.kind == "encrypted-weights" and e.receiver == "silo 2")
    fed.network = Attacker(lambda e: old if e.kind == "encrypted-weights" and e.receiver == "silo 2" else e)
    with pytest.raises(TamperedMessage, match="encrypted-weights from server to silo 2 .*replayed"):
        one_round(fed, deltas, noise, 1)


def test_a_dropped_message_shows_as_out_of_order(keypair_512):
    fed, deltas, noise = federation(keypair_512)
    weights = fed.server.encrypted_weights(0, np.ones(USERS, dtype=bool))
    fed.server.encrypted_weights(1, np.ones(USERS, dtype=bool))  # round 0's copy never arrives...
    later = fed.server.encrypted_weights(2, np.ones(USERS, dtype=bool))
    fed.silos[0].masked_sum(weights[0], deltas[0], noise[0], workers=1)
    with pytest.raises(TamperedMessage, match="out of order"):
        fed.silos[1].masked_sum(later[1], deltas[1], noise[1], workers=1)


def test_a_round_with_a_missing_masked_sum_is_a_protocol_error_naming_silo_and_round(keypair_512):
    """Issue 32, item 4: a masked sum that never arrives (dropped in transit, a silo gone) stops the
    round with a ProtocolError naming the silo and the round (it raised RuntimeError, exit 1)."""
    fed, deltas, noise = federation(keypair_512)
    weights = fed.server.encrypted_weights(3, np.ones(USERS, dtype=bool))
    for silo in (0, 2):  # silo 1's masked sum is lost
        fed.server.receive_masked_sum(fed.silos[silo].masked_sum(weights[silo], deltas[silo], noise[silo]))
    with pytest.raises(
        ProtocolError, match=r"^round 3: no masked sum from silo\(s\) \[1\]; .*nothing is decrypted"
    ):
        fed.server.aggregate(3)
    with pytest.raises(ProtocolError, match="round 4 was not opened by the server"):
        fed.server.aggregate(4)


def test_a_step_whose_message_never_came_is_a_protocol_error(keypair_512):
    """The setup steps that need every silo's message say which silo's is missing (item 4)."""
    server = AggregationServer(params(512), keypair_512)
    with pytest.raises(ProtocolError, match=r"setup \(b\): no DH public key from silo\(s\) \[0, 1, 2\]"):
        server.broadcast_dh_keys()
    with pytest.raises(ProtocolError, match=r"setup \(e\): no blinded histogram from silo\(s\) \[0, 1, 2\]"):
        server.compute_inverses()
    with pytest.raises(ProtocolError, match=r"round 0: setup \(f\) has not run"):
        server.encrypted_weights(0, np.ones(USERS, dtype=bool))


def test_a_message_re_addressed_to_another_silo_is_detected(keypair_512):
    counts, deltas, noise = inputs()
    # The sealed seed for silo 1, re-addressed to silo 2 (the server routes by the header).
    readdress = Attacker(
        lambda e: (
            dataclasses.replace(e, receiver="silo 2")
            if e.kind == "sealed-seed" and e.receiver == "silo 1"
            else e
        )
    )
    with pytest.raises(TamperedMessage, match="sealed-seed from silo 0 to silo 2 .*failed authentication"):
        setup(counts, params(512), keypair=keypair_512, network=readdress)
    # The weights meant for silo 1, delivered unchanged to silo 2.
    fed, deltas, noise = federation(keypair_512)
    weights = fed.server.encrypted_weights(0, np.ones(USERS, dtype=bool))
    with pytest.raises(
        TamperedMessage, match="encrypted-weights from server to silo 1 .*delivered to silo 2"
    ):
        fed.silos[2].masked_sum(weights[1], deltas[2], noise[2], workers=1)
    # ... or re-addressed to it.
    with pytest.raises(TamperedMessage, match="to silo 2 .*failed authentication"):
        fed.silos[2].masked_sum(dataclasses.replace(weights[1], receiver="silo 2"), deltas[2], noise[2])


def test_a_message_reflected_to_its_sender_is_detected(keypair_512):
    fed, deltas, noise = federation(keypair_512)
    weights = fed.server.encrypted_weights(0, np.ones(USERS, dtype=bool))
    reflected = dataclasses.replace(weights[1], sender="silo 1", receiver="server", kind="masked-sum")
    with pytest.raises(TamperedMessage, match="failed authentication"):
        fed.server.receive_masked_sum(reflected)


def test_a_man_in_the_middle_substituting_a_silo_dh_key_is_detected(keypair_512):
    """The attacker replaces silo 1's DH key with its own and tags it correctly (it knows the
    server's public anchor); the server accepts, but silo 1 cannot verify anything the server
    then sends, since their keys differ."""
    anchor: list[int] = []
    mitm = generate_dh_keypair()

    def alter(envelope: Envelope) -> Envelope:
        if envelope.kind == "dh-key" and envelope.sender == "silo 1":
            forged = Channels("silo 1")
            forged.connect_dh(mitm, SERVER, anchor[0])
            return forged.wrap(
                SERVER, "dh-key", SETUP_ROUND, replace_payload(envelope, public=mitm.public).payload
            )
        return envelope

    import uldp.crypto.protocol.run as run_module

    real_server = run_module.AggregationServer

    def server(*args, **kwargs):
        made = real_server(*args, **kwargs)
        anchor.append(made.dh_public)  # public: the attacker may know it
        return made

    counts, _, _ = inputs()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run_module, "AggregationServer", server)
        with pytest.raises(
            TamperedMessage, match="paillier-key from server to silo 1 .*failed authentication"
        ):
            setup(counts, params(512), keypair=keypair_512, network=Attacker(alter))


def test_dh_key_broadcast_altered_in_transit_is_detected(keypair_512):
    mitm = generate_dh_keypair()

    def alter(envelope: Envelope) -> Envelope:
        if envelope.kind == "dh-keys" and envelope.receiver == "silo 0":
            publics = tuple((s, mitm.public if s == 2 else key) for s, key in envelope.payload.publics)
            return replace_payload(envelope, publics=publics)
        return envelope

    counts, _, _ = inputs()
    with pytest.raises(TamperedMessage, match="dh-keys from server to silo 0"):
        setup(counts, params(512), keypair=keypair_512, network=Attacker(alter))


def test_direction_keys_are_separate_from_mask_and_seal_keys(keypair_512):
    fed, _, _ = federation(keypair_512)
    silo0, silo1 = fed.silos[0], fed.silos[1]
    auth = {silo0.channels._send_keys["silo 1"], silo0.channels._receive_keys["silo 1"]}
    assert len(auth) == 2  # one key per direction
    assert auth == {silo1.channels._receive_keys["silo 0"], silo1.channels._send_keys["silo 0"]}
    assert not auth & {silo0._mask_seeds[1], silo0._seal_keys[1]}


def test_encoding_is_injective_on_messages():
    assert encode((1, 2)) != encode(((1, 2),)) != encode((b"\x01", b"\x02"))
    assert encode((12, 3)) != encode((1, 23)) and encode(-1) != encode(255)
    assert encode(PaillierKeyMessage(5)) != encode(dataclasses.replace(PaillierKeyMessage(5), n=6))
    assert encode(gmpy2.mpz(2**700 + 1)) == encode(2**700 + 1) and encode(np.int64(-7)) == encode(-7)
    with pytest.raises(ValueError, match="cannot encode a float"):
        encode((1, 2.0))


# --- the Paillier modulus a silo receives (authentic, but possibly a bad one) ---


def server_channel_to(silo_id: int, p: ProtocolParams):
    server_dh = generate_dh_keypair()
    silo = Silo(silo_id, [1] * p.users, p, server_key=server_dh.public)
    channels = Channels(SERVER)
    channels.connect_dh(server_dh, silo_name(silo_id), silo.dh_key().payload.public)
    return silo, lambda message: channels.wrap(silo_name(silo_id), message.KIND, SETUP_ROUND, message)


def prime(bits: int, offset: int = 0) -> int:
    return int(gmpy2.next_prime(3 * 2 ** (bits - 2) + offset))  # exactly `bits` bits


@pytest.mark.parametrize(
    "modulus,needle",
    [
        pytest.param(3 * prime(2047), "small prime factor 3;", id="factor-3"),
        pytest.param(65521 * prime(2032), "small prime factor 65521;", id="factor-65521"),
        pytest.param(prime(1024) ** 2, "perfect power (e.g. p^2)", id="square"),
        pytest.param(prime(1024) * prime(1023), "2047-bit Paillier modulus is insecure", id="short"),
        pytest.param(prime(1024) * prime(1024, 2**100) * 2, "must be odd", id="even"),
        pytest.param(prime(2048), "is a prime", id="prime"),
    ],
)
def test_silo_refuses_a_bad_modulus_in_one_line(modulus, needle):
    p = ProtocolParams(silos=2, users=2, dimension=1, key_bits=2048, encoding=Encoding(n_max=10))
    silo, send = server_channel_to(0, p)
    with pytest.raises(UldpError) as caught:  # what the CLI reports with exit 2
        silo.receive_paillier_key(send(PaillierKeyMessage(modulus)))
    assert needle in str(caught.value) and "\n" not in str(caught.value)
    assert not isinstance(caught.value, TamperedMessage)  # authentic: the server's fault, not the wire's


def test_the_cli_reports_tampering_in_one_error_line_exit_2(monkeypatch):
    import uldp.crypto.protocol.benchmark as benchmark

    real_setup = benchmark.setup

    def tampered_setup(counts, protocol, *args, **kwargs):
        fed = real_setup(counts, protocol, *args, **kwargs)
        fed.network = Attacker(shift_silo_sum(fed.server.public_key, silo=1, k=7))
        return fed

    monkeypatch.setattr(benchmark, "setup", tampered_setup)
    result = CliRunner().invoke(
        cli,
        [
            "bench",
            "protocol",
            "--key-bits",
            "512",
            "--test-keys",
            "--silos",
            "2",
            "--params",
            "2",
            "--users",
            "2",
        ],
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1 and "tampered message: masked-sum from silo 1 to server (round 0" in errors[0]
    assert "Traceback" not in result.output
