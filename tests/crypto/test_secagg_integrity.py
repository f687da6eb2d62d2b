"""Secure aggregation under tampering (issue 32, item 8): what was altered is named, nothing is released.

Two attacks the audits ran against `uldp.crypto.secagg`: a masked input shifted in transit by 2^24
moved the sum by exactly +1.0 unnoticed, and a corrupted seed share with exactly k survivors gave
a sum of 4.3e11 where no sum can exceed n B = 24. Each is now refused with a ProtocolError naming
the participant and the round, before any share is requested or any sum returned.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.crypto.resigning import signed_by
from uldp.crypto.secagg import MaskedInput, SecAggParams, SecAggParticipant, SecAggServer, UnmaskResponse
from uldp.errors import ProtocolError

N, K, B, D = 6, 4, 4.0, 16
"""n B = 24: no sum of six inputs within the bound exceeds 24 in any coordinate."""
ONE = 2**24
"""The code of 1.0 at the default 24 fractional bits."""


class Round:
    """One round of N participants, step by step, with the signing keys kept to forge 'honest' messages."""

    def __init__(self, round_number: int = 5) -> None:
        self.params = SecAggParams(threshold=K, dimension=D, bound=B)
        self.server = SecAggServer(self.params, round=round_number, participants=range(N))
        self.parties = {i: SecAggParticipant(i, self.params, round=round_number) for i in range(N)}
        self.signing = {i: p._sign.private for i, p in self.parties.items()}
        rng = np.random.default_rng(3)
        self.vectors = {i: rng.uniform(-B, B, D) for i in range(N)}
        broadcast = self.server.collect_keys(p.advertise() for p in self.parties.values())
        self.inboxes = self.server.route_shares([p.share_keys(broadcast) for p in self.parties.values()])

    def upload(self, uploading) -> list[MaskedInput]:
        return [self.parties[i].masked_input(self.vectors[i], self.inboxes[i]) for i in uploading]

    def expected(self, included) -> np.ndarray:
        return sum((self.params.fixed_point.encode(self.vectors[i]) for i in included), np.uint64(0))


def shifted(masked: MaskedInput, by: int, coordinate: int = 0) -> MaskedInput:
    words = masked.vector.copy()
    words[coordinate] += np.uint64(by)  # modulo 2^64, as the sum is
    return dataclasses.replace(masked, masked=words.astype("<u8").tobytes())


# -- (a) masked inputs are authenticated ------------------------------------------------------------


def test_an_honest_round_still_gives_the_exact_sum():
    r = Round()
    request = r.server.unmask_request(r.upload(range(N)))
    total = r.server.aggregate_encoded([r.parties[i].unmask(request) for i in range(N)])
    assert (total == r.expected(range(N))).all()


def test_a_masked_input_shifted_in_transit_by_2_to_the_24_is_named_before_any_share_is_requested():
    """The audit's attack: +2^24 on one coordinate of y_2 moved the sum by exactly +1.0, unnoticed."""
    r = Round()
    masked = r.upload(range(N))
    masked[2] = shifted(masked[2], ONE)
    with pytest.raises(
        ProtocolError,
        match=r"^the masked-input message of participant 2 \(round 5\) fails its signature check: "
        r"altered in transit .*no share is requested, nothing is revealed",
    ):
        r.server.unmask_request(masked)
    assert r.server.step == "unmask_request"  # no request went out: no participant revealed a share


def test_a_masked_input_flipped_on_the_wire_as_bytes_is_refused():
    r = Round()
    masked = r.upload(range(N))
    data = bytearray(masked[4].to_bytes())
    data[-100] ^= 0x01  # inside y_4's words, well before the signature's 64 bytes
    with pytest.raises(ProtocolError, match=r"participant 4 \(round 5\) fails its signature check"):
        r.server.unmask_request([*masked[:4], MaskedInput.from_bytes(bytes(data)), masked[5]])


@pytest.mark.parametrize("change", ["sender", "round", "session", "swap"])
def test_a_signature_does_not_carry_over_to_another_sender_round_or_session(change):
    r = Round()
    masked = r.upload(range(N))
    if change == "sender":  # y_1 sent again as participant 5's, with participant 1's signature
        forged = dataclasses.replace(masked[1], participant=5)
        masked = [*masked[:5], forged]
        who = 5
    elif change == "swap":  # the signatures of 0 and 3 exchanged
        masked[0], masked[3] = (
            dataclasses.replace(masked[0], signature=masked[3].signature),
            dataclasses.replace(masked[3], signature=masked[0].signature),
        )
        who = 0
    else:  # the same y_0 and signature from another round or session: the server's own are signed
        other = Round(round_number=6 if change == "round" else 5)
        theirs = other.upload(range(N))[0]
        masked[0] = dataclasses.replace(theirs, round=5, session=r.server.session)
        who = 0
    with pytest.raises(ProtocolError, match=rf"participant {who} \(round 5\) fails its signature check"):
        r.server.unmask_request(masked)


def test_an_unmask_response_altered_in_transit_is_refused_naming_its_sender():
    r = Round()
    request = r.server.unmask_request(r.upload(range(N)))
    responses = [r.parties[i].unmask(request) for i in range(N)]
    owner, share = responses[3].seed_shares[0]
    responses[3] = dataclasses.replace(
        responses[3], seed_shares=((owner, share ^ 1), *responses[3].seed_shares[1:])
    )
    with pytest.raises(
        ProtocolError,
        match=r"^the unmask-response message of participant 3 \(round 5\) fails its signature check",
    ):
        r.server.aggregate_encoded(responses)


# -- (b) corrupted shares with exactly k responses; the range check -----------------------------------


def test_a_corrupted_seed_share_with_exactly_k_survivors_is_named_instead_of_a_wrong_sum():
    """The audit's attack: k survivors, one b-share off by one, gave 4.3e11 (no sum exceeds 24).

    The participant corrupts its own share (its signature is valid): k shares have no redundancy
    for the consistency check, so the commitment c(b_0) is what catches it.
    """
    r = Round()
    request = r.server.unmask_request(r.upload(range(K)))  # participants 4 and 5 dropped: exactly k
    responses = [r.parties[i].unmask(request) for i in range(K)]
    owner, share = responses[1].seed_shares[0]
    corrupted = dataclasses.replace(
        responses[1], seed_shares=((owner, share + 1), *responses[1].seed_shares[1:])
    )
    responses[1] = signed_by(r.signing[1], corrupted)
    with pytest.raises(
        ProtocolError,
        match=rf"^the shares of participant {owner}'s mask seed b_{owner} do not rebuild the seed it "
        r"committed to \(round 5\): a corrupted share; nothing is released",
    ):
        r.server.aggregate_encoded(responses)


def test_a_corrupted_key_share_with_exactly_k_survivors_is_named():
    r = Round()
    request = r.server.unmask_request(r.upload(range(K)))
    responses = [r.parties[i].unmask(request) for i in range(K)]
    owner, share = responses[2].key_shares[0]
    corrupted = dataclasses.replace(
        responses[2], key_shares=((owner, share + 1), *responses[2].key_shares[1:])
    )
    responses[2] = signed_by(r.signing[2], corrupted)
    with pytest.raises(
        ProtocolError, match=rf"participant {owner}'s mask key do not rebuild the key it advertised"
    ):
        r.server.aggregate_encoded(responses)


def test_an_unmasked_sum_outside_n_times_the_bound_is_refused():
    """A participant that leaves garbage in its own (signed) y_i: the sum is no sum of inputs within B."""
    r = Round()
    masked = r.upload(range(N))
    masked[0] = signed_by(r.signing[0], shifted(masked[0], 2**61, coordinate=7))
    request = r.server.unmask_request(masked)
    with pytest.raises(
        ProtocolError,
        match=r"^round 5: the unmasked sum is .* at coordinate 7, outside \[-n B, n B\] = \[-24, 24\] for "
        r"n = 6 survivors \(1 of 16 coordinates are\).*nothing is released",
    ):
        r.server.aggregate([r.parties[i].unmask(request) for i in range(N)])


def test_a_wrong_mask_left_in_the_sum_is_caught_by_the_range_check_alone():
    """Every other check bypassed (the commitment forged to match a wrong seed): the range still holds."""
    r = Round()
    request = r.server.unmask_request(r.upload(range(K)))
    responses = [r.parties[i].unmask(request) for i in range(K)]
    server = r.server
    # Rebuild b_0 from the corrupted shares the way the server will, then commit to that wrong seed.
    from uldp.crypto.secagg.authentication import seed_commitment
    from uldp.crypto.secagg.shamir import reconstruct_secret

    shares = {i + 1: dict(resp.seed_shares)[0] for i, resp in enumerate(responses)}
    shares[2] += 1
    wrong = reconstruct_secret(shares, K)
    server.keys[0] = dataclasses.replace(
        server.keys[0], seed_commitment=seed_commitment(wrong, round_number=5, participant=0)
    )
    owner_share = dict(responses[1].seed_shares)[0]
    corrupted = dataclasses.replace(
        responses[1], seed_shares=tuple((o, y + 1 if o == 0 else y) for o, y in responses[1].seed_shares)
    )
    assert dict(corrupted.seed_shares)[0] == owner_share + 1
    responses[1] = signed_by(r.signing[1], corrupted)
    with pytest.raises(ProtocolError, match=r"outside \[-n B, n B\] = \[-16, 16\] for n = 4 survivors"):
        server.aggregate_encoded(responses)


def test_what_is_not_detected_a_participant_shifting_its_own_input_within_the_range():
    """Secure aggregation hides inputs, it does not validate them (docs/secagg.md, threat model): a
    participant that signs a y_i shifted by 2^24 moves the sum by 1.0 while it stays within n B."""
    r = Round()
    masked = r.upload(range(N))
    masked[2] = signed_by(r.signing[2], shifted(masked[2], ONE))
    request = r.server.unmask_request(masked)
    total = r.server.aggregate_encoded([r.parties[i].unmask(request) for i in range(N)])
    difference = (total - r.expected(range(N))).view(np.int64)
    assert difference[0] == ONE and not difference[1:].any()


def test_messages_without_a_well_formed_signature_are_refused_as_malformed():
    r = Round()
    masked = r.upload(range(N))[0]
    for message in (masked, UnmaskResponse(0, 5, r.server.session, (), (), b"s" * 64)):
        with pytest.raises(ProtocolError, match="a signature has 64 bytes, got 63"):
            dataclasses.replace(message, signature=b"s" * 63)


# -- mutated messages: a refusal or the exact sum, never a wrong one ----------------------------------


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_property_a_bit_flipped_anywhere_in_a_signed_message_never_yields_a_wrong_sum(data):
    """The audits' mutation campaign, on the two messages the server cannot otherwise check: one bit
    of one masked input or unmask response flipped on the wire ends the round with a ProtocolError
    (or, where the bit is not part of the message's meaning, which the strict encoding rules out,
    with the exact sum); no mutation may produce another sum or another exception."""
    r = Round()
    survivors = data.draw(st.sampled_from([range(K), range(N)]), label="survivors")
    target = data.draw(st.sampled_from(["masked", "response"]), label="message")
    victim = data.draw(st.sampled_from(list(survivors)), label="sender")
    # Drawn before the round: a message's length varies with its shares, and the draws must not.
    position = data.draw(st.integers(0, 2**32 - 1), label="bit position")

    def flip(message):
        raw = bytearray(message.to_bytes())
        bit = position % (8 * len(raw))
        raw[bit // 8] ^= 1 << (bit % 8)
        return type(message).from_bytes(bytes(raw))

    try:
        masked = r.upload(survivors)
        if target == "masked":
            masked = [flip(m) if m.participant == victim else m for m in masked]
        request = r.server.unmask_request(masked)
        responses = [r.parties[i].unmask(request) for i in survivors]
        if target == "response":
            responses = [flip(m) if m.participant == victim else m for m in responses]
        total = r.server.aggregate_encoded(responses)
    except ProtocolError:
        return
    assert (total == r.expected(survivors)).all()


def test_a_state_naming_a_peer_outside_the_key_broadcast_is_refused():
    """A node's stored state holding shares or an opening key of an id the broadcast never listed
    would fail later with a KeyError ("internal error"); it is refused when restored (item 4)."""
    from uldp.crypto.channel import encode
    from uldp.crypto.secagg.participant import HeldShares, ParticipantState
    from uldp.crypto.wire import decode

    r = Round()
    shared = decode(r.parties[0].export_state(), ParticipantState, what="state")
    r.upload([0])
    masked = decode(r.parties[0].export_state(), ParticipantState, what="state")
    for state, problem in (
        (
            dataclasses.replace(shared, open_keys=((99, b"k" * 32),)),
            "a key to open the shares of a participant",
        ),
        (
            dataclasses.replace(masked, held=(*masked.held, HeldShares(99, 1, 2))),
            "held shares of a participant",
        ),
    ):
        with pytest.raises(ProtocolError, match=f"^secure-aggregation participant state: {problem} outside"):
            SecAggParticipant.from_state(encode(state))
