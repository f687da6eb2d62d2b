"""Secure aggregation with dropouts (Algorithm 3 of Baek et al. 2021): exact sums, refusals, views."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.crypto.resigning import signed_by
from uldp.crypto.secagg import (
    AdvertiseKeys,
    EncryptedShare,
    KeyBroadcast,
    MaskedInput,
    SecAggParams,
    SecAggParticipant,
    SecAggServer,
    ShareInbox,
    ShareKeys,
    UnmaskRequest,
    UnmaskResponse,
    secure_sum,
)
from uldp.crypto.secagg.shamir import reconstruct_secret
from uldp.errors import InvalidParameter, ProtocolError

D = 16


def vectors_for(ids, d=D, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return {i: rng.uniform(-scale, scale, d) for i in ids}


class Round:
    """One round, step by step, recording what every participant receives."""

    def __init__(self, ids, k, *, d=D, round_number=0, weights=None, n0=None, through_bytes=False):
        self.params = SecAggParams(threshold=k, dimension=d, bound=4.0)
        self.server = SecAggServer(
            self.params, round=round_number, participants=ids, weights=weights, min_weight_sum=n0
        )
        self.parties = {i: SecAggParticipant(i, self.params, round=round_number) for i in ids}
        self.seen: dict[int, list] = defaultdict(list)
        self.through_bytes = through_bytes

    def wire(self, message):
        return type(message).from_bytes(message.to_bytes()) if self.through_bytes else message

    def give(self, i, message):
        message = self.wire(message)
        self.seen[i].append(message)
        return message

    def keys(self, alive):
        self.broadcast = self.server.collect_keys(self.wire(self.parties[i].advertise()) for i in alive)
        return self.broadcast

    def shares(self, alive):
        outs = [self.wire(self.parties[i].share_keys(self.give(i, self.broadcast))) for i in alive]
        self.inboxes = self.server.route_shares(outs)
        return self.inboxes

    def upload(self, alive, vectors):
        masked = [
            self.wire(self.parties[i].masked_input(vectors[i], self.give(i, self.inboxes[i]))) for i in alive
        ]
        self.masked = masked
        self.request = self.server.unmask_request(masked)
        return self.request

    def unmask(self, alive):
        self.responses = [self.wire(self.parties[i].unmask(self.give(i, self.request))) for i in alive]
        return self.server.aggregate_encoded(self.responses)

    def run(self, vectors, *, before_shares=(), before_upload=(), before_unmask=()):
        ids = sorted(self.parties)
        alive = [i for i in ids if i not in before_shares]
        self.keys(ids)
        self.shares(alive)
        alive = [i for i in alive if i not in before_upload]
        self.upload(alive, vectors)
        return self.unmask([i for i in alive if i not in before_unmask])

    def expected(self, vectors, included):
        fp = self.params.fixed_point
        total = np.zeros(self.params.dimension, dtype=np.uint64)
        for i in included:
            total += fp.encode(vectors[i])
        return total


# -- exact sums ----------------------------------------------------------------------------------------


def test_masks_cancel_to_the_exact_integer_sum():
    ids = [0, 1, 2, 3, 4]
    vectors = vectors_for(ids)
    r = Round(ids, k=3)
    encoded = r.run(vectors)
    assert (encoded == r.expected(vectors, ids)).all()
    assert all((m.vector != r.params.fixed_point.encode(vectors[m.participant])).all() for m in r.masked)
    total = r.params.fixed_point.decode(encoded)
    assert np.abs(total - sum(vectors.values())).max() <= r.params.fixed_point.rounding_error_bound(5) + 1e-15


@pytest.mark.parametrize(
    ("before_upload", "before_unmask"),
    [
        ({4}, set()),
        (set(), {4}),
        ({0, 5}, set()),
        (set(), {0, 5}),
        ({1}, {3}),
        ({0, 2, 5}, set()),
        (set(), {1, 3, 4}),
        ({2}, {0, 5}),
    ],
)
def test_dropouts_up_to_n_minus_k_give_the_exact_sum(before_upload, before_unmask):
    ids, k = [0, 1, 2, 3, 4, 5], 3  # n - k = 3 dropouts at most
    vectors = vectors_for(ids, seed=len(before_upload))
    r = Round(ids, k)
    encoded = r.run(vectors, before_upload=before_upload, before_unmask=before_unmask)
    survivors = [i for i in ids if i not in before_upload]  # those dropped before unmask are in the sum
    assert r.request.survivors == tuple(survivors) and r.request.dropped == tuple(sorted(before_upload))
    assert (encoded == r.expected(vectors, survivors)).all()


def test_a_participant_gone_before_sharing_is_left_out_entirely():
    ids = [3, 7, 8, 11, 20]
    vectors = vectors_for(ids)
    r = Round(ids, k=3)
    encoded = r.run(vectors, before_shares={7}, before_upload={20})
    assert set(r.inboxes) == {3, 8, 11, 20} and all(
        s.sender != 7 for b in r.inboxes.values() for s in b.shares
    )
    assert r.request.dropped == (20,)  # 7 was never in U_2: no mask with it to remove
    assert (encoded == r.expected(vectors, [3, 8, 11])).all()


def test_double_masking_the_server_never_gets_both_secrets_of_one_participant():
    ids = [0, 1, 2, 3, 4]
    r = Round(ids, k=3)
    r.run(vectors_for(ids), before_upload={2})
    for response in r.responses:
        assert {owner for owner, _ in response.seed_shares} == {0, 1, 3, 4}  # b-shares of survivors only
        assert {owner for owner, _ in response.key_shares} == {2}  # s^SK-shares of the dropped only


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_property_any_n_k_d_and_dropouts_give_the_exact_sum_or_a_refusal(data):
    n = data.draw(st.integers(2, 7), label="n")
    k = data.draw(st.integers(2, n), label="k")
    d = data.draw(st.integers(1, 40), label="d")
    ids = sorted(data.draw(st.sets(st.integers(0, 1000), min_size=n, max_size=n), label="ids"))
    before_upload = data.draw(st.sets(st.sampled_from(ids), max_size=n), label="before_upload")
    rest = [i for i in ids if i not in before_upload]
    before_unmask = data.draw(st.sets(st.sampled_from(rest), max_size=len(rest)) if rest else st.just(set()))
    vectors = vectors_for(ids, d=d, seed=data.draw(st.integers(0, 2**16), label="seed"), scale=4.0)
    r = Round(ids, k, d=d)
    uploaded = [i for i in ids if i not in before_upload]
    if len(uploaded) < k or len(uploaded) - len(before_unmask) < k:
        with pytest.raises(ProtocolError, match="below the threshold"):
            r.run(vectors, before_upload=before_upload, before_unmask=before_unmask)
        return
    encoded = r.run(vectors, before_upload=before_upload, before_unmask=before_unmask)
    assert (encoded == r.expected(vectors, uploaded)).all()


def test_secure_sum_runs_every_party_in_process():
    ids = list(range(8))
    vectors = vectors_for(ids, d=100)
    params = SecAggParams(threshold=5, dimension=100, bound=1.0)
    total = secure_sum(vectors, params, {i: 1.0 for i in ids}, {1, 6}, {2}, round=3, min_weight_sum=5.0)
    survivors = [i for i in ids if i not in (1, 6)]
    assert np.abs(
        total - sum(vectors[i] for i in survivors)
    ).max() <= params.fixed_point.rounding_error_bound(6)
    with pytest.raises(ProtocolError, match="below min_weight_sum n0 = 7.0"):
        secure_sum(vectors, params, None, {1, 6}, min_weight_sum=7.0)
    with pytest.raises(InvalidParameter, match=r"\[9\]"):
        secure_sum(vectors, params, dropped_before_upload={9})
    with pytest.raises(InvalidParameter, match="both"):
        secure_sum(vectors, params, dropped_before_upload={1}, dropped_before_unmask={1})


# -- refusals: too few, too light; nothing revealed ----------------------------------------------------


def test_fewer_than_k_survivors_refused_before_any_share_is_requested():
    ids = [0, 1, 2, 3, 4]
    vectors = vectors_for(ids)
    r = Round(ids, k=4)
    r.keys(ids)
    r.shares(ids)
    masked = [r.parties[i].masked_input(vectors[i], r.inboxes[i]) for i in (0, 1, 2)]
    with pytest.raises(
        ProtocolError, match=r"only 3 of the 5 participants .*threshold k = 4; no share is requested"
    ):
        r.server.unmask_request(masked)
    assert r.server.step == "unmask_request" and r.server.survivors == ()  # no UnmaskRequest was produced
    assert all(p.phase == "masked" for i, p in r.parties.items() if i < 3)  # nobody revealed a share
    with pytest.raises(ProtocolError, match="not the next step"):
        r.server.aggregate_encoded([])


def test_survivors_weight_below_n0_refused_before_any_share_is_requested():
    ids = [0, 1, 2, 3, 4]
    weights = {0: 1.0, 1: 1.0, 2: 1.0, 3: 3.0, 4: 3.0}
    vectors = vectors_for(ids)
    r2 = Round(ids, k=2, weights=weights, n0=6.5)
    r2.keys(ids)
    r2.shares(ids)
    masked = [r2.parties[i].masked_input(vectors[i], r2.inboxes[i]) for i in (0, 1, 2, 3)]
    with pytest.raises(
        ProtocolError, match=r"weigh 6.0, below min_weight_sum n0 = 6.5.*no share is requested"
    ):
        r2.server.unmask_request(masked)
    assert all(p.phase == "masked" for i, p in r2.parties.items() if i < 4)


def test_n0_met_by_the_survivors_lets_the_round_finish():
    ids = [0, 1, 2, 3, 4]
    weights = {0: 1.0, 1: 1.0, 2: 1.0, 3: 3.0, 4: 3.0}
    vectors = vectors_for(ids)
    r = Round(ids, k=2, weights=weights, n0=6.0)
    encoded = r.run(vectors, before_upload={4})
    assert r.server.survivor_weight == 6.0 and (encoded == r.expected(vectors, [0, 1, 2, 3])).all()
    # n0 bounds the weight in the sum (the survivors'), not that of those who answer the unmasking.
    r = Round(ids, k=2, weights=weights, n0=6.0)
    encoded = r.run(vectors, before_upload={4}, before_unmask={3})
    assert (encoded == r.expected(vectors, [0, 1, 2, 3])).all()


def test_fewer_than_k_responses_refused():
    ids = [0, 1, 2, 3]
    r = Round(ids, k=3)
    with pytest.raises(ProtocolError, match=r"only 2 of the 4 participants answered the unmask request"):
        r.run(vectors_for(ids), before_unmask={0, 1})


def test_a_corrupted_share_in_an_unmask_response_stops_the_round_instead_of_a_wrong_sum():
    ids = [0, 1, 2, 3, 4]
    r = Round(ids, k=2)
    r.keys(ids)
    r.shares(ids)
    r.upload(ids[:4], vectors_for(ids))  # participant 4 dropped: its s^SK is rebuilt
    signing = {i: r.parties[i]._sign.private for i in ids[:4]}
    responses = [r.parties[i].unmask(r.request) for i in ids[:4]]
    # Corrupted by the participants themselves (signed): what a signature cannot catch.
    seed = signed_by(
        signing[1],
        dataclasses.replace(
            responses[1],
            seed_shares=((0, responses[1].seed_shares[0][1] ^ 1),) + responses[1].seed_shares[1:],
        ),
    )
    fresh = Round(ids, k=2)  # the server object is spent by one attempt: replay the round's state
    fresh.server.__dict__.update({**r.server.__dict__, "step": "aggregate"})
    with pytest.raises(ProtocolError, match="do not lie on one polynomial"):
        fresh.server.aggregate_encoded([responses[0], seed, *responses[2:]])
    key = signed_by(
        signing[2], dataclasses.replace(responses[2], key_shares=((4, responses[2].key_shares[0][1] ^ 1),))
    )
    with pytest.raises(ProtocolError, match="do not lie on one polynomial"):
        r.server.aggregate_encoded([*responses[:2], key, responses[3]])


def test_participant_refuses_requests_that_would_reveal_too_much():
    ids = [0, 1, 2, 3, 4]
    vectors = vectors_for(ids)
    r = Round(ids, k=3)
    r.keys(ids)
    r.shares(ids)
    r.upload(ids, vectors)
    p = r.parties[0]
    session = r.server.session
    asks = {
        "asks for both the mask-seed and the key share of participant.s. \\[2\\]": ((0, 1, 2, 3), (2,)),
        "does not list it among the survivors": ((1, 2, 3), (0,)),
        "below the threshold k = 3": ((0, 1), (2, 3, 4)),
        "names participant.s. \\[9\\] whose shares it never received": ((0, 1, 2, 9), ()),
        "repeats an id": ((0, 1, 1, 2), ()),
    }
    for message, (survivors, dropped) in asks.items():
        with pytest.raises(ProtocolError, match=message):
            p.unmask(UnmaskRequest(0, session, survivors, dropped))
        assert p.phase == "masked"  # nothing revealed, the honest request can still be answered
    p.unmask(r.request)
    with pytest.raises(ProtocolError, match="already answered an unmask request"):
        p.unmask(UnmaskRequest(0, session, (0, 1, 2), (3, 4)))


def test_each_step_runs_once_in_order():
    ids = [0, 1, 2]
    vectors = vectors_for(ids)
    r = Round(ids, k=2)
    with pytest.raises(ProtocolError, match="not the next step"):
        r.server.route_shares([])
    r.keys(ids)
    r.shares(ids)
    p = r.parties[0]
    p.masked_input(vectors[0], r.inboxes[0])
    # A second masked input under the same masks would give the server x - x'.
    with pytest.raises(ProtocolError, match="masked_input is not the next step"):
        p.masked_input(vectors[0] / 2, r.inboxes[0])
    with pytest.raises(ProtocolError, match="share_keys is not the next step"):
        p.share_keys(r.broadcast)


# -- bad parameters ----------------------------------------------------------------------------------


def test_bad_parameters_are_refused_naming_the_parameter():
    params = SecAggParams(threshold=4, dimension=3, bound=1.0)
    with pytest.raises(InvalidParameter, match="threshold k = 4 exceeds the 3 participants"):
        SecAggServer(params, round=0, participants=[0, 1, 2])
    with pytest.raises(InvalidParameter, match="threshold k must be >= 2, got 1"):
        SecAggParams(threshold=1, dimension=3, bound=1.0)
    with pytest.raises(InvalidParameter, match=r"min_weight_sum n0 = 5.0 exceeds .* weight sum 4.0"):
        SecAggServer(params, round=0, participants=[0, 1, 2, 3], min_weight_sum=5.0)
    with pytest.raises(InvalidParameter, match=r"weights: no weight for participant\(s\) \[3\]"):
        SecAggServer(params, round=0, participants=[0, 1, 2, 3], weights={0: 1, 1: 1, 2: 1})
    with pytest.raises(InvalidParameter, match="weights must be finite and >= 0"):
        SecAggServer(params, round=0, participants=[0, 1, 2, 3], weights={0: 1, 1: 1, 2: 1, 3: -1})
    with pytest.raises(InvalidParameter, match="participants must be distinct"):
        SecAggServer(params, round=0, participants=[0, 1, 2, 2])
    with pytest.raises(InvalidParameter, match="participant must be in"):
        SecAggParticipant(-1, params, round=0)
    with pytest.raises(InvalidParameter, match="dimension must be >= 1"):
        SecAggParams(threshold=2, dimension=0, bound=1.0)
    with pytest.raises(InvalidParameter, match="threshold must be an int"):
        SecAggParams(threshold=2.5, dimension=3, bound=1.0)  # type: ignore[arg-type]


def test_inputs_of_the_wrong_shape_or_beyond_the_bound_are_refused():
    ids = [0, 1, 2]
    r = Round(ids, k=2, d=4)
    r.keys(ids)
    r.shares(ids)
    with pytest.raises(InvalidParameter, match=r"shape \(3,\); dimension = 4"):
        r.parties[0].masked_input(np.zeros(3), r.inboxes[0])
    with pytest.raises(InvalidParameter, match=r"coordinate 2 is 5.0, outside the bound \|x\| <= 4.0"):
        r.parties[0].masked_input(np.array([0.0, 1.0, 5.0, 0.0]), r.inboxes[0])
    assert r.parties[0].phase == "shared"  # refused before anything was sent


# -- tampering ----------------------------------------------------------------------------------------


def _flip_first_byte(share: EncryptedShare) -> EncryptedShare:
    return dataclasses.replace(share, ciphertext=bytes([share.ciphertext[0] ^ 1]) + share.ciphertext[1:])


def _prepared(ids, k=2, round_number=0):
    r = Round(ids, k, round_number=round_number)
    r.keys(ids)
    r.shares(ids)
    return r


def test_tampered_ciphertext_is_refused_naming_sender_receiver_and_round():
    ids = [0, 1, 2]
    r = _prepared(ids, round_number=5)
    inbox = r.inboxes[1]
    bad = [_flip_first_byte(s) if s.sender == 2 else s for s in inbox.shares]
    with pytest.raises(
        ProtocolError, match=r"share from participant 2 to participant 1 \(round 5\) failed authentication"
    ):
        r.parties[1].masked_input(np.zeros(D), dataclasses.replace(inbox, shares=tuple(bad)))
    assert r.parties[1].phase == "shared"


def test_share_re_addressed_to_another_participant_is_refused():
    ids = [0, 1, 2]
    r = _prepared(ids)
    share_0_to_1 = next(s for s in r.inboxes[1].shares if s.sender == 0)
    # Delivered as is to participant 2: its header still names 1.
    inbox = dataclasses.replace(r.inboxes[2], shares=(share_0_to_1,) + r.inboxes[2].shares[1:])
    with pytest.raises(
        ProtocolError, match=r"share from participant 0 to participant 1 .* delivered to participant 2"
    ):
        r.parties[2].masked_input(np.zeros(D), inbox)
    # Its header rewritten to name 2: the key and the associated data are those of 0 -> 1.
    forged = dataclasses.replace(share_0_to_1, receiver=2)
    inbox = dataclasses.replace(r.inboxes[2], shares=(forged,) + r.inboxes[2].shares[1:])
    with pytest.raises(
        ProtocolError, match=r"share from participant 0 to participant 2 \(round 0\) failed authentication"
    ):
        r.parties[2].masked_input(np.zeros(D), inbox)
    # Reflected back to its sender, as if from 1.
    reflected = dataclasses.replace(share_0_to_1, sender=1, receiver=0)
    inbox = dataclasses.replace(
        r.inboxes[0], shares=tuple(s if s.sender != 1 else reflected for s in r.inboxes[0].shares)
    )
    with pytest.raises(
        ProtocolError, match=r"share from participant 1 to participant 0 \(round 0\) failed authentication"
    ):
        r.parties[0].masked_input(np.zeros(D), inbox)


def test_ciphertext_replayed_from_another_round_is_refused():
    ids = [0, 1, 2]
    old = _prepared(ids, round_number=3)
    new = _prepared(ids, round_number=4)
    stale = next(s for s in old.inboxes[1].shares if s.sender == 0)
    inbox = dataclasses.replace(new.inboxes[1], shares=(stale,) + new.inboxes[1].shares[1:])
    with pytest.raises(
        ProtocolError,
        match=r"share from participant 0 to participant 1 \(round 4\) failed authentication: .*replayed from "
        r"another round",
    ):
        new.parties[1].masked_input(np.zeros(D), inbox)
    # A share of another session with the same round number: its key and associated data differ.
    other = _prepared(ids, round_number=4)
    foreign = next(s for s in other.inboxes[1].shares if s.sender == 0)
    inbox = dataclasses.replace(new.inboxes[1], shares=(foreign,) + new.inboxes[1].shares[1:])
    with pytest.raises(
        ProtocolError, match=r"participant 0 to participant 1 \(round 4\) failed authentication"
    ):
        new.parties[1].masked_input(np.zeros(D), inbox)
    with pytest.raises(ProtocolError, match="share-inbox message of another session"):
        new.parties[1].masked_input(np.zeros(D), other.inboxes[1])
    # A whole message of another round.
    with pytest.raises(ProtocolError, match="in round 4 received a share-inbox message of round 3"):
        new.parties[1].masked_input(np.zeros(D), old.inboxes[1])
    with pytest.raises(ProtocolError, match="server of round 4 received a masked-input message of round 3"):
        new.server.unmask_request([old.parties[0].masked_input(np.zeros(D), old.inboxes[0])])


def test_the_server_checks_who_sent_what():
    ids = [0, 1, 2]
    r = Round(ids, k=2)
    adverts = [r.parties[i].advertise() for i in ids]
    with pytest.raises(ProtocolError, match="participant 1 advertised keys twice"):
        r.server.collect_keys(adverts + [adverts[1]])
    stranger = SecAggParticipant(9, r.params, round=0).advertise()
    with pytest.raises(ProtocolError, match="participant 9, who was not sampled"):
        r.server.collect_keys(adverts + [stranger])
    broadcast = r.server.collect_keys(adverts)
    outs = [r.parties[i].share_keys(broadcast) for i in ids]
    partial = dataclasses.replace(outs[0], shares=outs[0].shares[:1])
    with pytest.raises(ProtocolError, match="participant 0 did not send exactly one share to every other"):
        r.server.route_shares([partial, outs[1], outs[2]])


def test_a_broadcast_that_misstates_a_participants_own_keys_is_refused():
    ids = [0, 1, 2]
    r = Round(ids, k=2)
    broadcast = r.server.collect_keys(r.parties[i].advertise() for i in ids)
    swapped = tuple(
        dataclasses.replace(k, s_public=broadcast.keys[1].s_public) if k.participant == 0 else k
        for k in broadcast.keys
    )
    with pytest.raises(ProtocolError, match="omits or misstates its own keys"):
        r.parties[0].share_keys(dataclasses.replace(broadcast, keys=swapped))
    repeated = tuple(
        dataclasses.replace(k, s_public=broadcast.keys[0].s_public) if k.participant == 2 else k
        for k in broadcast.keys
    )
    with pytest.raises(ProtocolError, match="repeats a key"):
        r.parties[0].share_keys(dataclasses.replace(broadcast, keys=repeated))


# -- what each party sees ---------------------------------------------------------------------------


def test_a_participants_view_holds_public_keys_its_own_ciphertexts_and_ids_only():
    ids = [0, 1, 2, 3, 4]
    vectors = vectors_for(ids)
    r = Round(ids, k=3)
    r.run(vectors, before_upload={4})
    for i in (0, 1, 2, 3):
        kinds = [type(m) for m in r.seen[i]]
        assert kinds == [KeyBroadcast, ShareInbox, UnmaskRequest]  # never a MaskedInput or a response
        broadcast, inbox, request = r.seen[i]
        assert all(isinstance(k, AdvertiseKeys) for k in broadcast.keys)  # public keys only
        assert inbox.receiver == i and all(s.receiver == i and s.sender != i for s in inbox.shares)
        assert all(isinstance(x, int) for x in request.survivors + request.dropped)
    # The public keys are exactly those advertised; every ciphertext reaches its one addressee only.
    assert r.seen[0][0].keys == tuple(r.broadcast.keys)
    boxes = {i: {s.ciphertext for s in r.seen[i][1].shares} for i in (0, 1, 2, 3)}
    assert all(boxes[i].isdisjoint(boxes[j]) for i in boxes for j in boxes if i < j)


def test_a_participants_shares_of_a_peer_rebuild_nothing():
    ids = [0, 1, 2, 3]
    r = Round(ids, k=2)
    r.keys(ids)
    r.shares(ids)
    p = r.parties[1]
    p.masked_input(np.zeros(D), r.inboxes[1])
    state = SecAggParticipant.from_state(p.export_state())
    for seed_share, key_share in state._held.values():  # one share of each peer's two secrets
        with pytest.raises(ProtocolError, match="at least k are needed"):
            reconstruct_secret({p.id + 1: seed_share}, 2)
        with pytest.raises(ProtocolError, match="at least k are needed"):
            reconstruct_secret({p.id + 1: key_share}, 2)


def test_a_masked_input_is_not_the_input():
    ids = [0, 1]
    r = Round(ids, k=2)
    r.keys(ids)
    r.shares(ids)
    zero = r.parties[0].masked_input(np.zeros(D), r.inboxes[0])
    assert (zero.vector != 0).all()  # H(b_0) + H(s_01): uniform words, not the zeros sent


# -- bytes on the wire and between two messages ---------------------------------------------------------


def test_the_protocol_runs_through_bytes():
    ids = [0, 1, 2, 3]
    vectors = vectors_for(ids)
    r = Round(ids, k=2, through_bytes=True)
    encoded = r.run(vectors, before_upload={3}, before_unmask={0})
    assert (encoded == r.expected(vectors, [0, 1, 2])).all()


def test_every_message_round_trips_through_bytes():
    ids = [0, 1, 2]
    r = Round(ids, k=2)
    r.run(vectors_for(ids), before_upload={2})
    messages = [
        r.broadcast.keys[0],
        r.broadcast,
        r.inboxes[0].shares[0],
        r.inboxes[0],
        r.masked[0],
        r.request,
        r.responses[0],
    ]
    outs = Round(ids, k=2)
    b = outs.keys(ids)
    messages.append(outs.parties[0].share_keys(b))
    assert {type(m) for m in messages} == {
        AdvertiseKeys,
        KeyBroadcast,
        EncryptedShare,
        ShareInbox,
        MaskedInput,
        UnmaskRequest,
        UnmaskResponse,
        ShareKeys,
    }
    for message in messages:
        data = message.to_bytes()
        assert type(message).from_bytes(data) == message


@pytest.mark.parametrize("cut", [0, 1, 9, 40, -1])
def test_malformed_bytes_are_refused(cut):
    ids = [0, 1, 2]
    r = Round(ids, k=2)
    broadcast = r.keys(ids)
    data = broadcast.to_bytes()
    with pytest.raises(ProtocolError, match="malformed key-broadcast message"):
        KeyBroadcast.from_bytes(data[:cut])
    with pytest.raises(ProtocolError, match="malformed"):
        KeyBroadcast.from_bytes(data + b"\0")
    with pytest.raises(ProtocolError, match="class 'KeyBroadcast' where ShareInbox is expected"):
        ShareInbox.from_bytes(data)


def test_well_formed_bytes_with_impossible_values_are_refused():
    bad_key = AdvertiseKeys.__new__(AdvertiseKeys)
    for name, value in dict(
        participant=0,
        round=0,
        c_public=b"x" * 31,
        s_public=b"y" * 32,
        sign_public=b"z" * 32,
        seed_commitment=b"c" * 32,
    ).items():
        object.__setattr__(bad_key, name, value)
    from uldp.crypto.channel import encode

    with pytest.raises(ProtocolError, match="not 32 bytes"):
        AdvertiseKeys.from_bytes(encode(bad_key))
    partial = MaskedInput.__new__(MaskedInput)
    for name, value in dict(
        participant=0, round=0, session=b"s" * 16, masked=b"w" * 12, signature=b"g" * 64
    ).items():
        object.__setattr__(partial, name, value)
    with pytest.raises(ProtocolError, match="not a whole number of 8-byte words"):
        MaskedInput.from_bytes(encode(partial))


@pytest.mark.parametrize("restore_after", ["advertise", "share_keys", "masked_input"])
def test_state_export_and_import_mid_protocol(restore_after):
    ids = [0, 1, 2, 3]
    vectors = vectors_for(ids)
    r = Round(ids, k=3)

    def restored(i):
        p = SecAggParticipant.from_state(r.parties[i].export_state())
        r.parties[i] = p
        return p

    r.keys(ids)
    if restore_after == "advertise":
        for i in ids:
            restored(i)
    r.shares(ids)
    if restore_after == "share_keys":
        for i in ids:
            restored(i)
    r.upload([0, 1, 2], vectors)
    if restore_after == "masked_input":
        for i in ids:
            restored(i)
    encoded = r.unmask([0, 1, 2])
    assert (encoded == r.expected(vectors, [0, 1, 2])).all()
    assert SecAggParticipant.from_state(r.parties[0].export_state()).phase == "done"


def test_state_keeps_only_the_secrets_still_needed_and_refuses_garbage():
    ids = [0, 1, 2]
    r = Round(ids, k=2)
    r.keys(ids)
    before = r.parties[0].export_state()
    r.shares(ids)
    r.upload(ids, vectors_for(ids))
    after = r.parties[0].export_state()
    from uldp.crypto.secagg.participant import ParticipantState
    from uldp.crypto.wire import decode

    early, late = decode(before, ParticipantState, what="s"), decode(after, ParticipantState, what="s")
    assert len(early.c_private) == len(early.s_private) == len(early.seed) == 32
    assert late.c_private == late.s_private == late.seed == b"" and late.open_keys == ()
    assert "c_private" not in repr(late) and "seed=" not in repr(late)
    with pytest.raises(ProtocolError, match="malformed secure-aggregation participant state"):
        SecAggParticipant.from_state(after[:-3])
    inconsistent = dataclasses.replace(late, seed=b"s" * 32)
    from uldp.crypto.channel import encode

    with pytest.raises(ProtocolError, match="s_i\\^SK or b_i does not fit phase 'masked'"):
        SecAggParticipant.from_state(encode(inconsistent))
    with pytest.raises(ProtocolError, match="unknown phase"):
        SecAggParticipant.from_state(encode(dataclasses.replace(late, phase="other")))


def test_the_example_of_docs_secagg_md_prints_what_it_shows():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "secagg.md").read_text()
    example = doc[doc.index("## Example") :]
    code, shown = re.findall(r"```(?:python)?\n(.*?)```", example, re.S)[:2]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == shown
