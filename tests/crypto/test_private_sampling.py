"""Private user-level sub-sampling in Protocol 1 (ULDP-FL §4.1; issue 36, item 5, the crypto half).

Correctness (the aggregate is the plaintext sum over the realised sample), the sampling rates over
many rounds, a cheating server caught by the silos' audit, a man in the middle refused on receipt,
out-of-order steps, the silo's state between messages and the wire format of the new messages.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Callable
from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from scipy import stats

from uldp.crypto import ot
from uldp.crypto.channel import SERVER, Envelope, TamperedMessage, encode
from uldp.crypto.encoding import Encoding
from uldp.crypto.paillier import PrivateKey
from uldp.crypto.protocol import (
    Federation,
    ProtocolParams,
    Silo,
    SiloState,
    WeightingSession,
    plaintext_weighted_sum,
    rounding_tolerance,
    sampling,
    setup,
)
from uldp.crypto.protocol.messages import (
    EncryptedWeightsMessage,
    SamplingAuditMessage,
    SamplingChoiceMessage,
    SamplingDigestMessage,
    SamplingOfferMessage,
    SamplingOpeningMessage,
    SamplingTransferMessage,
    SlotBoxes,
    SlotOpening,
)
from uldp.crypto.protocol.run import SAMPLING_PHASES, private_weighting_round, realized_sample
from uldp.crypto.protocol.sampling import SamplingCheat, SamplingParams
from uldp.crypto.protocol.silo import params_digest
from uldp.crypto.sealing import open_sealed, seal
from uldp.crypto.wire import MESSAGE_TYPES, decode, dumps, loads
from uldp.errors import InvalidParameter, ProtocolError

SMALL = Encoding(precision=1e-8, n_max=60, value_bound=100.0)
SILOS, USERS, D = 3, 6, 2
SAMPLING = SamplingParams(slots=4, real=2, audit_rate=0.3)
# An audit rate close to 1: every user of the round is audited except with probability 1e-3 each,
# so a server that cheats on every user escapes only with probability 1e-3^6 = 1e-18.
AUDIT_ALL = SamplingParams(slots=4, real=2, audit_rate=0.999)
SAMPLING_KINDS = {
    "sampling-offer",
    "sampling-choice",
    "sampling-transfer",
    "sampling-audit",
    "sampling-digest",
    "sampling-opening",
}


def params(sampling_params: SamplingParams | None = SAMPLING, **changes) -> ProtocolParams:
    fields = dict(
        silos=SILOS,
        users=USERS,
        dimension=D,
        key_bits=1024,
        encoding=SMALL,
        test_keys=True,
        sampling=sampling_params,
    )
    return ProtocolParams(**{**fields, **changes})


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 5, size=(SILOS, USERS))
    counts[0] += 1  # every user has a record: B_inv(N_u) != 0, so a real weight is never Enc(0)
    deltas = [rng.normal(scale=0.5, size=(USERS, D)) for _ in range(SILOS)]
    noise = [rng.normal(size=D) for _ in range(SILOS)]
    return counts, deltas, noise


_SET_UP: dict[tuple, Federation] = {}


def federation(keypair, sampling_params: SamplingParams | None = SAMPLING, network=None, seed: int = 0):
    """A federation after setup, and its inputs: a private copy of one set up once per parameters
    (setup's 3072-bit DH keys cost about a second; every test gets its own channels and state)."""
    counts, deltas, noise = inputs(seed)
    key = (sampling_params, seed, int(keypair[0].n))
    if key not in _SET_UP:
        _SET_UP[key] = setup(counts, params(sampling_params), keypair=keypair)
    fed = copy.deepcopy(_SET_UP[key])
    if network is not None:
        fed.network = network
    return fed, counts, deltas, noise


def exact(deltas, counts, sample, noise) -> np.ndarray:
    """What the protocol computes: fixed-point values weighted exactly (Appendix D.4)."""
    totals = counts.sum(axis=0)
    out = []
    for j in range(D):
        acc = Fraction(0)
        for s in range(SILOS):
            for u, e in enumerate(SMALL.fixed_point(deltas[s][:, j])):
                if sample[u]:
                    acc += Fraction(e * int(counts[s, u]), int(totals[u]))
            acc += SMALL.fixed_point(noise[s][j : j + 1])[0]
        out.append(float(acc) * SMALL.precision)
    return np.array(out)


def own_sample(fed, t: int) -> np.ndarray:
    """c_u in S_u and u not audited, recomputed here (not by `realized_sample`)."""
    subsets = fed.server.sampling_secrets(t).subsets
    seed = fed.silos[0]._seed
    choices = sampling.slot_choices(seed, t, USERS, fed.server.params.sampling.slots)
    audited = set(sampling.audited_users(seed, t, USERS, fed.server.params.sampling.audit_rate))
    return np.array([choices[u] in subsets[u] and u not in audited for u in range(USERS)])


def round_where(fed, predicate: Callable[[set[int]], bool], start: int = 0) -> int:
    """The first round index >= start whose audited set (from R, known to the test) satisfies predicate."""
    for t in range(start, start + 500):
        if predicate(set(fed.silos[0].sampling_draws(t)[1])):
            return t
    raise AssertionError("no round index with the wanted audit")


def step_by_step(fed, t, deltas, noise, hook: Callable[[str], None] = lambda step: None):
    """`private_weighting_round`, one message at a time; `hook(step)` runs between the steps.

    The silos are looked up in `fed.silos` afresh at every step, so a hook may replace them.
    """
    server, net = fed.server, fed.network
    offers = server.sampling_offer(t)
    hook("offer")
    for s, envelope in enumerate(offers):
        reply = fed.silos[s].sampling_choice(net(envelope))
        hook(f"choice {s}")
        server.receive_sampling_choice(net(reply))
    transfers = server.sampling_transfer(t)
    hook("transfer")
    relayed = []
    for s, envelope in enumerate(transfers):
        request, *digests = fed.silos[s].sampling_audit(net(envelope))
        hook(f"retrieved {s}")
        server.receive_sampling_audit(net(request))
        relayed += [net(server.relay(net(d))) for d in digests]
    for envelope in relayed:
        fed.silos[int(envelope.receiver.split()[1])].receive_sampling_digest(envelope)
        hook(f"digest to {envelope.receiver}")
    openings = server.sampling_openings(t)
    hook("openings")
    for s, envelope in enumerate(openings):
        server.receive_masked_sum(net(fed.silos[s].masked_sum(net(envelope), deltas[s], noise[s], workers=1)))
        hook(f"masked sum {s}")
    return server.aggregate(t)


def assert_matches_plaintext(aggregate, counts, deltas, noise, sample):
    plain = plaintext_weighted_sum(deltas, counts, sample, noise)
    assert np.max(np.abs(aggregate - plain)) <= rounding_tolerance(SMALL, USERS, SILOS)
    np.testing.assert_allclose(aggregate, exact(deltas, counts, sample, noise), rtol=1e-14, atol=1e-15)


# --- correctness --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sampling_params",
    [SamplingParams(2, 1, 0.0), SamplingParams(4, 3, 0.3), SamplingParams(5, 1, 0.5)],
    ids=["P2-m1-a0", "P4-m3-a0.3", "P5-m1-a0.5"],
)
def test_aggregate_equals_the_plaintext_sum_over_the_realised_sample(keypair_1024, sampling_params):
    fed, counts, deltas, noise = federation(keypair_1024, sampling_params)
    samples = []
    for t in range(2):
        result = private_weighting_round(fed, t, deltas, noise, workers=1)
        sample = realized_sample(fed, t)
        np.testing.assert_array_equal(sample, own_sample(fed, t))
        assert_matches_plaintext(result.aggregate, counts, deltas, noise, sample)
        assert set(SAMPLING_PHASES) <= set(result.seconds)
        samples.append(sample)
    # The check bites: with the sample of the other round (or everyone) the sum would differ,
    # unless the two samples agree.
    if not np.array_equal(samples[0], samples[1]):
        plain = plaintext_weighted_sum(deltas, counts, samples[1], noise)
        assert np.max(np.abs(exact(deltas, counts, samples[0], noise) - plain)) > rounding_tolerance(
            SMALL, USERS, SILOS
        )


def test_weighting_session_with_private_sampling_reports_its_sample(keypair_1024):
    counts, deltas, noise = inputs(3)
    session = WeightingSession(
        counts, D, key_bits=1024, test_keys=True, precision=1e-8, workers=1, sampling=SAMPLING
    )
    for _ in range(2):
        aggregate = session.round(deltas, None, noise)
        assert session.last_sample is not None and session.last_sample.shape == (USERS,)
        plain = plaintext_weighted_sum(deltas, counts, session.last_sample, noise)
        assert np.max(np.abs(aggregate - plain)) <= (USERS + SILOS) * 1e-8 / 2 + 1e-12
    with pytest.raises(InvalidParameter, match="pass sampled=None"):
        session.round(deltas, np.ones(USERS, dtype=bool), noise)


def test_every_silo_opens_the_same_entry_for_each_user(keypair_1024):
    """The silos derive one c_u from R: each silo's opened ciphertext decrypts to B_inv(N_u) iff c_u
    is one of the server's real slots, and to 0 otherwise; audited users hold 1 (Enc(0), r = 1)."""
    fed, _, deltas, noise = federation(keypair_1024)
    private = keypair_1024[1]
    t = round_where(fed, lambda audited: 0 < len(audited) < USERS)
    held: dict[int, tuple[int, ...]] = {}

    def inspect(step: str) -> None:
        if step.startswith("retrieved"):
            s = int(step.split()[1])
            held[s] = fed.silos[s]._sampling.weights

    step_by_step(fed, t, deltas, noise, inspect)
    draws = [silo.sampling_draws(t) for silo in fed.silos]
    assert all(d == draws[0] for d in draws)  # the same c_u and audited set at every silo
    choices, audited = draws[0]
    subsets = fed.server.sampling_secrets(t).subsets
    inverses = fed.server._blinded_inverses
    for u in range(USERS):
        if u in audited:
            assert {held[s][u] for s in range(SILOS)} == {1}
            continue
        values = {int(private.decrypt(held[s][u])) for s in range(SILOS)}
        assert values == ({int(inverses[u])} if choices[u] in subsets[u] else {0})
    # one transfer, one ciphertext per user: the silos hold the very same ciphertext
    assert held[0] == held[1] == held[2]


def test_weights_are_fresh_ciphertexts_every_round(keypair_1024):
    fed, _, deltas, noise = federation(keypair_1024, SamplingParams(4, 2, 0.0))
    held = []
    for t in range(2):
        step_by_step(
            fed,
            t,
            deltas,
            noise,
            lambda step: held.append(fed.silos[0]._sampling.weights) if step == "retrieved 0" else None,
        )
    assert all(a != b for a, b in zip(*held))  # no ciphertext of round 0 comes back in round 1


def test_an_audited_user_never_counts_even_when_its_slot_is_real(keypair_1024, monkeypatch):
    """A test-only server that puts every audited user's c_u among its real slots (it cannot know
    c_u; the test can): the audited users still contribute nothing, whatever their deltas."""
    fed, counts, deltas, noise = federation(keypair_1024, SamplingParams(4, 2, 0.5))
    t = round_where(fed, lambda audited: 0 < len(audited) < USERS)
    choices, audited = fed.silos[0].sampling_draws(t)
    original = sampling.server_round

    def server_round(round_index, users, p):
        state, publics, commitments = original(round_index, users, p)
        for u in audited:
            others = [i for i in range(p.slots) if i != choices[u]]
            state.subsets[u] = tuple(sorted([choices[u], *others[: p.real - 1]]))
            commitments[u] = sampling.commitment(round_index, u, state.subsets[u], state.nonces[u])
        return state, publics, commitments

    monkeypatch.setattr(sampling, "server_round", server_round)
    loud = [x.copy() for x in deltas]
    for x in loud:
        x[list(audited)] = 90.0  # within the value bound 100: the silos accept it
    aggregate = step_by_step(fed, t, loud, noise)
    sample = realized_sample(fed, t)
    assert not sample[list(audited)].any()
    assert_matches_plaintext(aggregate, counts, loud, noise, sample)
    with_audited = sample.copy()
    with_audited[list(audited)] = True
    assert np.max(np.abs(aggregate - plaintext_weighted_sum(loud, counts, with_audited, noise))) > 1.0


# --- rates over many rounds (the pure functions; the OT offers are irrelevant to them) ----------

FALSE_ALARM = 1e-6
"""Per test: the probability that a correct implementation fails the test's random checks (S_u is
drawn with `secrets`), split evenly over them (Bonferroni). Exact binomial tails, no normal
approximation: at P = 100 a slot is real in about 200 of 20,000 draws, a skewed count."""


def within_binomial(hits: int, trials: int, p: float, checks: int) -> bool:
    """Two-sided exact binomial test of hits ~ Bin(trials, p) at level FALSE_ALARM / checks."""
    tail = min(stats.binom.cdf(hits, trials, p), stats.binom.sf(hits - 1, trials, p))
    return 2 * tail > FALSE_ALARM / checks


@pytest.mark.parametrize(
    "slots,real,audit_rate",
    [(10, 3, 0.2), (2, 1, 0.05), (7, 6, 0.5), (100, 1, 0.1)],
)
def test_sampling_rates_over_many_rounds(monkeypatch, slots, real, audit_rate):
    # S_u is drawn with `secrets`; c_u and the audit come from a fixed R here (deterministic).
    monkeypatch.setattr(ot, "public_of", lambda a: 4)  # skip 20,000 exponentiations g^a
    p = SamplingParams(slots, real, audit_rate)
    seed = hashlib.sha256(f"uldp/test/R/{slots}/{real}".encode()).digest()
    rounds, users = 100, 200
    trials = rounds * users
    chosen = np.zeros(slots, dtype=int)
    real_slot = np.zeros(slots, dtype=int)
    hits = audits = taken = 0
    for t in range(rounds):
        state, publics, commitments = sampling.server_round(t, users, p)
        assert len(publics) == len(commitments) == users and len(set(commitments)) == users
        choices = sampling.slot_choices(seed, t, users, slots)
        audited = set(sampling.audited_users(seed, t, users, audit_rate))
        for u in range(users):
            subset = state.subsets[u]
            assert len(subset) == real and len(set(subset)) == real and all(0 <= i < slots for i in subset)
            real_slot[list(subset)] += 1
            chosen[choices[u]] += 1
            inside = choices[u] in subset
            hits += inside
            audits += u in audited
            taken += inside and u not in audited
    checks = 2 + slots  # the checks that depend on S_u; those on c_u and the audit are deterministic
    assert within_binomial(hits, trials, real / slots, checks), (hits / trials, real / slots)
    assert within_binomial(audits, trials, audit_rate, checks), (audits / trials, audit_rate)
    assert within_binomial(taken, trials, (1 - audit_rate) * real / slots, checks), (taken / trials,)
    for i in range(slots):  # c_u uniform on [0, P); each slot real with probability m / P
        assert within_binomial(int(chosen[i]), trials, 1 / slots, checks), (i, chosen[i])
        assert within_binomial(int(real_slot[i]), trials, real / slots, checks), (i, real_slot[i])
    # the checks can fail: a server with m + 1 real slots would be far outside
    assert not within_binomial(hits, trials, (real + 1) / slots, checks) or real + 1 == slots


def test_choices_and_audits_depend_on_r_round_and_user():
    first, second = bytes(32), b"\x01" * 32
    assert sampling.slot_choices(first, 0, 50, 10) == sampling.slot_choices(first, 0, 50, 10)
    assert sampling.slot_choices(first, 0, 50, 10) != sampling.slot_choices(second, 0, 50, 10)
    assert sampling.slot_choices(first, 0, 50, 10) != sampling.slot_choices(first, 1, 50, 10)
    assert len(set(sampling.slot_choices(first, 0, 50, 10))) > 1
    assert sampling.audited_users(first, 0, 200, 0.5) != sampling.audited_users(first, 1, 200, 0.5)
    assert sampling.audited_users(first, 0, 200, 0.0) == ()
    assert sampling.audited_users(first, 3, 200, 0.5) == tuple(
        sorted(sampling.audited_users(first, 3, 200, 0.5))
    )


# --- a cheating server is caught by the audit ---------------------------------------------------


def add_slot(subset: tuple[int, ...], slots: int) -> tuple[int, ...]:
    return tuple(sorted({*subset, next(i for i in range(slots) if i not in subset)}))


def assert_caught(fed, deltas, noise, match: str, t: int = 0):
    decrypted = []
    real = PrivateKey.decrypt
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PrivateKey, "decrypt", lambda self, c: decrypted.append(c) or real(self, c))
        with pytest.raises(SamplingCheat, match=match) as caught:
            private_weighting_round(fed, t, deltas, noise, workers=1)
    assert "\n" not in str(caught.value)
    assert decrypted == []  # stopped before any masked sum was decrypted
    assert not any(t in silo._rounds_used for silo in fed.silos)


def test_server_committing_to_more_real_slots_is_caught(keypair_1024, monkeypatch):
    fed, _, deltas, noise = federation(keypair_1024, AUDIT_ALL)
    original = sampling.server_round
    more = SamplingParams(AUDIT_ALL.slots, AUDIT_ALL.real + 1, AUDIT_ALL.audit_rate)
    monkeypatch.setattr(sampling, "server_round", lambda t, users, p: original(t, users, more))
    assert_caught(
        fed, deltas, noise, r"committed 3 real slots of 4, not the agreed m = 2 \(it would sample at q = 0.75"
    )


@pytest.mark.parametrize(
    "how,match",
    [
        ("extra-slot", "the slots do not carry one key on the 2 committed real slots"),
        ("moved-slot", "the slots do not carry one key on the 2 committed real slots"),
        ("all-slots", "the slots do not carry one key on the 2 committed real slots"),
        # K1 on exactly the other m = P - m slots: one key on each side, but the key of the
        # "other" slots opens Enc(weight)
        ("complement", r"the box of the other slots does not hold Enc\(0\)"),
    ],
)
def test_server_putting_the_real_key_in_other_slots_than_committed_is_caught(
    keypair_1024, monkeypatch, how, match
):
    fed, _, deltas, noise = federation(keypair_1024, AUDIT_ALL)
    original = sampling.slot_pads
    slots = AUDIT_ALL.slots

    def cheat(subset):
        if how == "extra-slot":
            return add_slot(subset, slots)
        if how == "moved-slot":
            outside = next(i for i in range(slots) if i not in subset)
            return tuple(sorted((*subset[:-1], outside)))  # one real slot moved elsewhere
        if how == "complement":
            return tuple(i for i in range(slots) if i not in subset)
        return tuple(range(slots))

    def slot_pads(state, round_index, choices, n_slots):
        committed = state.subsets
        state.subsets = [cheat(s) for s in committed]  # the pads follow other slots...
        try:
            return original(state, round_index, choices, n_slots)
        finally:
            state.subsets = committed  # ...the openings reveal the committed ones

    monkeypatch.setattr(sampling, "slot_pads", slot_pads)
    assert_caught(fed, deltas, noise, match)


def test_server_putting_a_real_weight_in_the_zero_box_is_caught(keypair_1024, monkeypatch):
    """The box of the m - P other slots holds Enc(B_inv(N_u); r) instead of Enc(0; r): every user
    would be sampled. The opened r gives r^n, which is not that box's ciphertext."""
    fed, _, deltas, noise = federation(keypair_1024, AUDIT_ALL)
    original = sampling.seal_weights

    def seal_weights(state, round_index, weights, private_key):
        original(state, round_index, weights, private_key)
        n = int(private_key.public_key.n)
        width = ((n * n).bit_length() + 7) // 8
        boxes = []
        for u, (weight, pair) in enumerate(zip(weights, state.boxes)):
            zero_key, _ = state.keys[u]
            context = sampling._box_context(round_index, u)
            r = int(state.zero_randomness[u])  # what the opening will claim
            forged = seal(
                zero_key, ((1 + n * int(weight)) * pow(r, n, n * n) % (n * n)).to_bytes(width, "big"), context
            )
            try:
                open_sealed(zero_key, pair.first, context)
                boxes.append(SlotBoxes(forged, pair.second))
            except ProtocolError:
                boxes.append(SlotBoxes(pair.first, forged))
        state.boxes = tuple(boxes)

    monkeypatch.setattr(sampling, "seal_weights", seal_weights)
    assert_caught(
        fed, deltas, noise, "the box of the other slots does not hold Enc\\(0\\): it is a real weight"
    )


@pytest.mark.parametrize(
    "randomness,match",
    [
        ("another-unit", "does not hold Enc\\(0\\)"),
        ("zero", "not a unit modulo n"),
        ("n", "not a unit modulo n"),
    ],
)
def test_server_opening_other_randomness_for_the_zero_box_is_caught(keypair_1024, randomness, match):
    fed, _, deltas, noise = federation(keypair_1024, AUDIT_ALL)
    public = keypair_1024[0]

    def tamper(step: str) -> None:
        if step == "transfer":
            state = fed.server.sampling_secrets(0)
            value = {"another-unit": public.random_unit(), "zero": gmpy2.mpz(0), "n": public.n}[randomness]
            state.zero_randomness[:] = [value] * USERS

    with pytest.raises(SamplingCheat, match=match):
        step_by_step(fed, 0, deltas, noise, tamper)


def patch_server_sends(monkeypatch, fed, kind: str, receiver: str, change: Callable):
    """The server itself sends `receiver` another `kind` payload: authentic, so only the protocol's
    checks can find it (the channel cannot)."""
    channels = fed.server.channels
    wrap = channels.wrap

    def cheating_wrap(to, message_kind, round_index, payload):
        if (message_kind, to) == (kind, receiver):
            payload = change(payload)
        return wrap(to, message_kind, round_index, payload)

    monkeypatch.setattr(channels, "wrap", cheating_wrap)


@pytest.mark.parametrize("what", ["commitment", "swapped-boxes", "other-box"])
def test_server_sending_silos_different_offers_or_boxes_is_caught_by_the_digests(
    keypair_1024, monkeypatch, what
):
    fed, _, deltas, noise = federation(keypair_1024)
    if what == "commitment":
        kind = "sampling-offer"

        def change(offer):
            return dataclasses.replace(offer, commitments=(bytes(32), *offer.commitments[1:]))
    else:
        kind = "sampling-transfer"

        def change(transfer):
            first = transfer.boxes[0]
            if what == "swapped-boxes":
                boxes = SlotBoxes(first.second, first.first)
            else:  # a box of another user: the key opens neither, so give it to a user audited or not
                boxes = SlotBoxes(transfer.boxes[1].first, first.second)
            return dataclasses.replace(transfer, boxes=(boxes, *transfer.boxes[1:]))

    patch_server_sends(monkeypatch, fed, kind, "silo 1", change)
    # user 0 audited: the other-box variant is not refused at retrieval (audited users are not opened)
    t = round_where(fed, lambda audited: 0 in audited)
    with pytest.raises(
        SamplingCheat, match="received another sampling offer or other boxes than silo"
    ) as caught:
        step_by_step(fed, t, deltas, noise)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("how", ["drop", "add", "duplicate"])
def test_server_opening_other_users_than_audited_is_caught(keypair_1024, monkeypatch, how):
    fed, _, deltas, noise = federation(keypair_1024, SamplingParams(4, 2, 0.5))
    t = round_where(fed, lambda audited: 0 < len(audited) < USERS)
    _, audited = fed.silos[0].sampling_draws(t)
    outsider = next(u for u in range(USERS) if u not in audited)

    def change(message):
        openings = message.openings
        if how == "drop":
            openings = openings[1:]
        elif how == "add":
            openings = (*openings, sampling.opening(fed.server.sampling_secrets(t), outsider))
        else:
            openings = (*openings, openings[0])
        return dataclasses.replace(message, openings=openings)

    patch_server_sends(monkeypatch, fed, "sampling-opening", "silo 2", change)
    with pytest.raises(SamplingCheat, match="the server opened users .* not the audited"):
        step_by_step(fed, t, deltas, noise)


@pytest.mark.parametrize(
    "field,match",
    [
        ("secret", "opened OT secret does not match the offer"),
        ("nonce", "do not match the server's commitment"),
        ("subset", "do not match the server's commitment"),
    ],
)
def test_server_opening_false_secrets_is_caught(keypair_1024, monkeypatch, field, match):
    fed, _, deltas, noise = federation(keypair_1024, AUDIT_ALL)

    def change(message):
        first = message.openings[0]
        value = {
            "secret": first.secret + 1,
            "nonce": bytes(32),
            "subset": tuple(sorted((i + 1) % AUDIT_ALL.slots for i in first.subset)),
        }[field]
        return dataclasses.replace(
            message, openings=(dataclasses.replace(first, **{field: value}), *message.openings[1:])
        )

    patch_server_sends(monkeypatch, fed, "sampling-opening", "silo 0", change)
    with pytest.raises(SamplingCheat, match=match):
        step_by_step(fed, 0, deltas, noise)


def test_a_cheat_is_caught_exactly_when_its_user_is_audited(keypair_1024, monkeypatch):
    """The limit the threat model states: the audit is a sample. A server that raises one user's
    rate escapes in a round that does not audit that user (probability 1 - a each round)."""
    fed, counts, deltas, noise = federation(keypair_1024, SamplingParams(4, 1, 0.5))
    original = sampling.server_round

    def server_round(round_index, users, p):  # user 0 gets 2 real slots of 4, committed honestly
        state, publics, commitments = original(round_index, users, p)
        state.subsets[0] = add_slot(state.subsets[0], p.slots)
        commitments[0] = sampling.commitment(round_index, 0, state.subsets[0], state.nonces[0])
        return state, publics, commitments

    monkeypatch.setattr(sampling, "server_round", server_round)
    escaped = round_where(fed, lambda audited: 0 not in audited)
    aggregate = step_by_step(fed, escaped, deltas, noise)
    assert len(fed.server.sampling_secrets(escaped).subsets[0]) == 2  # it cheated, unseen
    assert_matches_plaintext(aggregate, counts, deltas, noise, realized_sample(fed, escaped))
    caught = round_where(fed, lambda audited: 0 in audited, start=escaped + 1)
    with pytest.raises(SamplingCheat, match="user 0: the server committed 2 real slots of 4"):
        step_by_step(fed, caught, deltas, noise)


def test_silos_asking_for_different_audits_are_refused_by_the_server(keypair_1024):
    fed, _, _, _ = federation(keypair_1024)
    server = fed.server
    for s, envelope in enumerate(server.sampling_offer(0)):
        server.receive_sampling_choice(fed.silos[s].sampling_choice(envelope))
    for s, envelope in enumerate(server.sampling_transfer(0)):
        request, *_ = fed.silos[s].sampling_audit(envelope)
        if s == 2:  # silo 2 asks for another set, under its own (authentic) tag
            channels = fed.silos[2].channels
            channels._sent[SERVER] -= 1
            other = SamplingAuditMessage(
                2, 0, tuple(u for u in range(USERS) if u not in request.payload.audited)
            )
            request = channels.wrap(SERVER, other.KIND, 0, other)
        server.receive_sampling_audit(request)
    with pytest.raises(ProtocolError, match="the silos asked to audit different users"):
        server.sampling_openings(0)


# --- a man in the middle ------------------------------------------------------------------------


class Attacker:
    """The wire: passes every envelope on, except the first that `target` picks, which `alter` changes."""

    def __init__(self, target=None, alter=None):
        self.target, self.alter = target, alter
        self.seen: list[Envelope] = []
        self.done = False

    def __call__(self, envelope: Envelope) -> Envelope:
        self.seen.append(envelope)
        if self.target is not None and not self.done and self.target(envelope):
            self.done = True
            return self.alter(envelope)
        return envelope


def flip(value: bytes) -> bytes:
    return bytes([value[0] ^ 1, *value[1:]])


def other_element(value: int) -> int:
    return value * ot.public_of(5) % ot.MODP_3072_PRIME  # still in the subgroup: only the tag tells


def payload_change(kind: str, what: str):
    def change(p):
        if kind == "sampling-offer" and what == "offer":
            return dataclasses.replace(p, offers=(other_element(p.offers[0]), *p.offers[1:]))
        if kind == "sampling-offer":
            return dataclasses.replace(p, commitments=(flip(p.commitments[0]), *p.commitments[1:]))
        if kind == "sampling-choice":
            return dataclasses.replace(p, choices=(*p.choices[:-1], other_element(p.choices[-1])))
        if kind == "sampling-transfer" and what == "slots":
            return dataclasses.replace(p, slots=(flip(p.slots[0]), *p.slots[1:]))
        if kind == "sampling-transfer":
            first = p.boxes[0]
            return dataclasses.replace(p, boxes=(SlotBoxes(first.second, first.first), *p.boxes[1:]))
        if kind == "sampling-audit":
            return dataclasses.replace(p, audited=tuple(u for u in range(USERS) if u not in p.audited))
        if kind == "sampling-digest":
            return dataclasses.replace(p, digest=flip(p.digest))
        if kind == "sampling-opening" and what == "drop":
            return dataclasses.replace(p, openings=())
        first = p.openings[0]
        return dataclasses.replace(
            p, openings=(dataclasses.replace(first, secret=first.secret + 1), *p.openings[1:])
        )

    return change


TAMPERED = [
    ("sampling-offer", "offer", "server", "silo 1"),
    ("sampling-offer", "commitment", "server", "silo 0"),
    ("sampling-choice", "choice", "silo 2", "server"),
    ("sampling-transfer", "slots", "server", "silo 0"),
    ("sampling-transfer", "boxes", "server", "silo 2"),
    ("sampling-audit", "audited", "silo 1", "server"),
    ("sampling-digest", "digest", "silo 0", "silo 2"),
    ("sampling-opening", "drop", "server", "silo 1"),
    ("sampling-opening", "secret", "server", "silo 2"),
]


@pytest.mark.parametrize("kind,what,sender,receiver", TAMPERED, ids=[f"{k}-{w}" for k, w, _, _ in TAMPERED])
def test_a_man_in_the_middle_is_refused_before_anything_is_used(
    keypair_1024, monkeypatch, kind, what, sender, receiver
):
    decrypted = []
    real = PrivateKey.decrypt
    monkeypatch.setattr(PrivateKey, "decrypt", lambda self, c: decrypted.append(c) or real(self, c))
    # audit rate near 1: the audited set and the openings are not empty, so altering them is possible
    fed, _, deltas, noise = federation(keypair_1024, AUDIT_ALL)
    before = {s: silo._sampling for s, silo in enumerate(fed.silos)}
    wire = Attacker(
        lambda e: (e.kind, e.sender, e.receiver) == (kind, sender, receiver),
        lambda e: dataclasses.replace(e, payload=payload_change(kind, what)(e.payload)),
    )
    fed.network = wire
    seen: dict[str, object] = {}

    def snapshot(step: str) -> None:
        seen[step] = {s: silo._sampling for s, silo in enumerate(fed.silos)}

    with pytest.raises(TamperedMessage) as caught:
        step_by_step(fed, 0, deltas, noise, snapshot)
    message = str(caught.value)
    assert wire.done
    assert message.startswith(f"tampered message: {kind} from {sender} to {receiver} (round 0, ")
    assert "failed authentication" in message and "\n" not in message
    state = fed.server.sampling_secrets(0)
    if kind == "sampling-choice":
        assert 2 not in state.choices and not state.boxes  # nothing stored, nothing sent
    if kind == "sampling-audit":
        assert 1 not in state.audits and state.audited is None
    if receiver.startswith("silo"):  # the receiving silo's state is what it was before the message
        s = int(receiver.split()[1])
        last = list(seen.values())[-1] if seen else before
        assert fed.silos[s]._sampling == last[s]
        assert 0 not in fed.silos[s]._rounds_used
    assert decrypted == []  # nothing was decrypted


def test_replaying_a_previous_rounds_offer_is_refused(keypair_1024):
    fed, _, deltas, noise = federation(keypair_1024)
    wire = Attacker()
    fed.network = wire
    private_weighting_round(fed, 0, deltas, noise, workers=1)
    old = next(e for e in wire.seen if e.kind == "sampling-offer" and e.receiver == "silo 1")
    fed.network = Attacker(lambda e: e.kind == "sampling-offer" and e.receiver == "silo 1", lambda e: old)
    with pytest.raises(
        TamperedMessage, match=r"sampling-offer from server to silo 1 \(round 0, message \d+\) is replayed"
    ):
        private_weighting_round(fed, 1, deltas, noise, workers=1)


def test_delivering_an_offer_twice_is_refused(keypair_1024):
    fed, _, _, _ = federation(keypair_1024)
    offers = fed.server.sampling_offer(0)
    fed.silos[0].sampling_choice(offers[0])
    with pytest.raises(TamperedMessage, match="sampling-offer from server to silo 0 .* is replayed"):
        fed.silos[0].sampling_choice(offers[0])


def test_an_authentic_offer_for_a_used_or_mismatched_round_is_refused(keypair_1024):
    """Not the wire but the server: the channel accepts the message, the silo's round checks do not."""
    fed, _, deltas, noise = federation(keypair_1024)
    private_weighting_round(fed, 0, deltas, noise, workers=1)
    stale = SamplingOfferMessage(0, (ot.public_of(7),) * USERS, (bytes(32),) * USERS)
    channels = fed.server.channels
    with pytest.raises(ProtocolError, match="silo 0: round 0 was already used"):
        fed.silos[0].sampling_choice(channels.wrap("silo 0", stale.KIND, 0, stale))
    with pytest.raises(ProtocolError, match="silo 1: a message for round 0 sent as 1"):
        fed.silos[1].sampling_choice(channels.wrap("silo 1", stale.KIND, 1, stale))


# --- steps out of order: one line each ----------------------------------------------------------


def one_line(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text and text
    return text


def test_server_steps_out_of_order_are_refused(keypair_1024):
    fed, _, _, _ = federation(keypair_1024)
    server = fed.server
    with pytest.raises(ProtocolError, match="round 5 has no private sampling offer") as caught:
        server.sampling_transfer(5)
    one_line(caught)
    with pytest.raises(ProtocolError, match="round 5 has no private sampling offer"):
        server.sampling_openings(5)
    offers = server.sampling_offer(0)
    with pytest.raises(ProtocolError, match="round 0 was already opened by the server"):
        server.sampling_offer(0)
    with pytest.raises(ProtocolError, match=r"round 0: no OT choices from silo\(s\) \[0, 1, 2\]"):
        server.sampling_transfer(0)
    choices = [fed.silos[s].sampling_choice(offers[s]) for s in range(SILOS)]
    for envelope in choices[:2]:
        server.receive_sampling_choice(envelope)
    with pytest.raises(ProtocolError, match=r"no OT choices from silo\(s\) \[2\]"):
        server.sampling_transfer(0)
    server.receive_sampling_choice(choices[2])
    transfers = server.sampling_transfer(0)
    with pytest.raises(
        ProtocolError, match=r"round 0: no audit request from silo\(s\) \[0, 1, 2\]"
    ) as caught:
        server.sampling_openings(0)
    one_line(caught)
    with pytest.raises(ProtocolError, match="round 0 was not opened by the server"):
        server.aggregate(0)  # no masked sum can be taken before the openings
    assert transfers


def test_silo_steps_out_of_order_are_refused(keypair_1024):
    fed, _, deltas, noise = federation(keypair_1024)
    server, silos = fed.server, fed.silos
    offers = server.sampling_offer(0)
    for s in range(SILOS):
        server.receive_sampling_choice(silos[s].sampling_choice(offers[s]))
    transfers = server.sampling_transfer(0)
    # silo 0 has not retrieved yet: a digest now is out of order (refused before it is unwrapped)
    request, *digests = silos[1].sampling_audit(transfers[1])
    with pytest.raises(
        ProtocolError,
        match=r"silo 0: a private-sampling message of round 0 out of order "
        r"\(this silo expected stage 'retrieved'; it holds round 0 at stage 'chosen'\)",
    ) as caught:
        silos[0].receive_sampling_digest(server.relay(digests[0]))
    one_line(caught)
    audits = [
        silos[0].sampling_audit(transfers[0]),
        (request, *digests),
        silos[2].sampling_audit(transfers[2]),
    ]
    with pytest.raises(ProtocolError, match="expected stage 'chosen'; it holds round 0 at stage 'retrieved'"):
        silos[0].sampling_audit(transfers[0])  # the transfer a second time
    for request, *_ in audits:
        server.receive_sampling_audit(request)
    openings = server.sampling_openings(0)
    # the openings before the other silos' digests: the silo cannot tell it got the same slots
    with pytest.raises(
        ProtocolError, match=r"silo 0: round 0: no sampling digest from silo\(s\) \[1, 2\]"
    ) as caught:
        silos[0].masked_sum(openings[0], deltas[0], noise[0], workers=1)
    one_line(caught)
    assert 0 not in silos[0]._rounds_used
    # the openings were checked (and used up, as on a real channel): the round is over for silo 0
    for _, *sent in audits:
        for envelope in sent:
            silos[int(envelope.receiver.split()[1])].receive_sampling_digest(server.relay(envelope))
    with pytest.raises(TamperedMessage, match="sampling-opening from server to silo 0 .* is replayed"):
        silos[0].masked_sum(openings[0], deltas[0], noise[0], workers=1)
    assert 0 not in silos[0]._rounds_used
    # the other silos, which got every digest first, go on
    silos[1].masked_sum(openings[1], deltas[1], noise[1], workers=1)
    assert 0 in silos[1]._rounds_used


def test_a_silo_without_a_pending_round_refuses_sampling_messages(keypair_1024):
    fed, _, deltas, noise = federation(keypair_1024)
    private_weighting_round(fed, 0, deltas, noise, workers=1)
    silo = fed.silos[0]
    assert silo._sampling is None  # a finished round leaves nothing behind
    fake = Envelope(
        "silo 1", "silo 0", "sampling-digest", 1, 0, SamplingDigestMessage(1, 0, 1, bytes(32)), bytes(32)
    )
    with pytest.raises(ProtocolError, match="out of order .* it holds none"):
        silo.receive_sampling_digest(fake)


def test_sampling_steps_without_private_sampling_are_refused(keypair_1024):
    fed, _, _, _ = federation(keypair_1024, None)
    with pytest.raises(ProtocolError, match="private sampling was not agreed") as caught:
        fed.server.sampling_offer(0)
    one_line(caught)
    stale = SamplingOfferMessage(0, (ot.public_of(7),) * USERS, (bytes(32),) * USERS)
    with pytest.raises(ProtocolError, match="silo 0: private sampling was not agreed"):
        fed.silos[0].sampling_choice(fed.server.channels.wrap("silo 0", stale.KIND, 0, stale))


def test_plain_weights_under_private_sampling_are_refused_by_the_silo(keypair_1024):
    """The silos agreed on private sampling: a round (a) in the clear (the server drawing the sample)
    is not accepted in its place."""
    fed, _, deltas, noise = federation(keypair_1024)
    try:
        weights = fed.server.encrypted_weights(0, np.ones(USERS, dtype=bool))
    except ProtocolError:
        return  # the server refuses already: fine too
    with pytest.raises(ProtocolError, match="sampling-opening"):
        fed.silos[0].masked_sum(weights[0], deltas[0], noise[0], workers=1)
    assert not fed.silos[0]._rounds_used


# --- the silo's state between messages, and the wire --------------------------------------------


def test_a_silo_restored_between_every_step_gives_the_same_round(keypair_1024):
    fed, counts, deltas, noise = federation(keypair_1024, SamplingParams(4, 2, 0.5))
    p = fed.server.params
    steps = []

    def restore_all(step: str) -> None:
        restored = [Silo.restore(silo.export_state(), p) for silo in fed.silos]
        for old, new in zip(fed.silos, restored):
            assert new._sampling == old._sampling and new._seed == old._seed
        fed.silos[:] = restored
        steps.append(step)

    for t in range(2):
        aggregate = step_by_step(fed, t, deltas, noise, restore_all)
        sample = realized_sample(fed, t)
        np.testing.assert_array_equal(sample, own_sample(fed, t))
        assert_matches_plaintext(aggregate, counts, deltas, noise, sample)
    # offer, transfer, openings; a choice, a retrieval and a masked sum per silo; the digests
    assert len(steps) == 2 * (3 + 3 * SILOS + SILOS * (SILOS - 1))
    assert all(silo._sampling is None for silo in fed.silos)  # a finished round leaves nothing


def export_mid_round(keypair) -> tuple[bytes, ProtocolParams]:
    fed, _, _, _ = federation(keypair)
    offers = fed.server.sampling_offer(0)
    fed.silos[0].sampling_choice(offers[0])
    return fed.silos[0].export_state(), fed.server.params


def test_a_state_with_private_sampling_in_progress_is_refused_without_sampling(keypair_1024):
    data, with_sampling = export_mid_round(keypair_1024)
    assert Silo.restore(data, with_sampling)._sampling.stage == "chosen"
    without = dataclasses.replace(with_sampling, sampling=None)
    with pytest.raises(
        ProtocolError, match="a private-sampling round in progress, but private sampling is off"
    ) as caught:
        Silo.restore(data, without)
    one_line(caught)
    other_rate = dataclasses.replace(with_sampling, sampling=SamplingParams(4, 2, 0.25))
    with pytest.raises(ProtocolError, match="made under other protocol parameters"):
        Silo.restore(data, other_rate)
    # a state whose digest claims the parameters without sampling is still refused
    state = decode(data, SiloState, what="silo state")
    forged = encode(dataclasses.replace(state, params_digest=params_digest(without)))
    with pytest.raises(
        ProtocolError, match="a private-sampling round in progress, but private sampling is off"
    ):
        Silo.restore(forged, without)


@pytest.mark.parametrize("change", ["unknown-stage", "two-rounds"])
def test_a_malformed_sampling_state_is_refused(keypair_1024, change):
    data, p = export_mid_round(keypair_1024)
    state = decode(data, SiloState, what="silo state")
    (pending,) = state.sampling
    sampling_field = (
        (dataclasses.replace(pending, stage="opened"),) if change == "unknown-stage" else (pending, pending)
    )
    with pytest.raises(
        ProtocolError, match="at most one private-sampling round in progress, at a known stage"
    ):
        Silo.restore(encode(dataclasses.replace(state, sampling=sampling_field)), p)


def test_the_new_messages_cross_the_wire_as_bytes(keypair_1024):
    for cls in (
        SamplingOfferMessage,
        SamplingChoiceMessage,
        SamplingTransferMessage,
        SamplingAuditMessage,
        SamplingDigestMessage,
        SamplingOpeningMessage,
    ):
        assert cls in MESSAGE_TYPES
    seen: list[Envelope] = []

    def as_bytes(envelope: Envelope) -> Envelope:
        back = loads(dumps(envelope))
        assert back == envelope and type(back.payload) is type(envelope.payload)
        seen.append(back)
        return back

    fed, counts, deltas, noise = federation(keypair_1024, AUDIT_ALL, network=as_bytes)
    result = private_weighting_round(fed, 0, deltas, noise, workers=1)
    assert_matches_plaintext(result.aggregate, counts, deltas, noise, realized_sample(fed, 0))
    kinds = {e.kind for e in seen}
    assert SAMPLING_KINDS <= kinds and "encrypted-weights" not in kinds
    opening = next(e for e in seen if e.kind == "sampling-opening").payload
    assert opening.openings and all(isinstance(o, SlotOpening) for o in opening.openings)
    transfer = next(e for e in seen if e.kind == "sampling-transfer").payload
    assert all(isinstance(b, SlotBoxes) for b in transfer.boxes)


def test_the_wire_refuses_a_sampling_message_with_a_wrong_field_type(keypair_1024):
    fed, _, _, _ = federation(keypair_1024)
    envelope = fed.server.sampling_offer(0)[0]
    bad = dataclasses.replace(
        envelope, payload=dataclasses.replace(envelope.payload, commitments=(1,) * USERS)
    )
    with pytest.raises(ProtocolError, match="malformed protocol message"):
        loads(encode(bad))
    assert EncryptedWeightsMessage in MESSAGE_TYPES  # the plain round is still on the wire


# --- parameters ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "slots,real,audit_rate,match",
    [
        (1, 1, 0.0, "P >= 2 slots"),
        (0, 1, 0.0, "P >= 2 slots"),
        (True, 1, 0.0, "P >= 2 slots"),
        (4.0, 1, 0.0, "P >= 2 slots"),
        (4, 0, 0.0, "1 <= m < P"),
        (4, 4, 0.0, "1 <= m < P"),
        (4, 5, 0.0, "1 <= m < P"),
        (4, -1, 0.0, "1 <= m < P"),
        (4, True, 0.0, "1 <= m < P"),
        (4, 2, 1.0, r"audit rate must be in \[0, 1\)"),
        (4, 2, -0.01, r"audit rate must be in \[0, 1\)"),
        (4, 2, float("nan"), r"audit rate must be in \[0, 1\)"),
        (4, 2, float("inf"), r"audit rate must be in \[0, 1\)"),
    ],
)
def test_sampling_params_refusals(slots, real, audit_rate, match):
    with pytest.raises(InvalidParameter, match=match) as caught:
        SamplingParams(slots, real, audit_rate)
    one_line(caught)


def test_sampling_params_accepted():
    assert SamplingParams(2, 1, 0.0).q == 0.5
    assert (
        SamplingParams(100, 3).q == 0.03 and SamplingParams(100, 3).audit_rate == sampling.DEFAULT_AUDIT_RATE
    )
    assert SamplingParams(10, 9, 0.999).q == 0.9


# --- a receiver outside the protocol, and the server's own step order ---------------------------


def test_a_silo_choice_outside_the_subgroup_is_refused_by_the_server(keypair_1024):
    """A malicious receiver's B = p - 1 (order 2) is refused before the server uses its secret a_u."""
    fed, _, _, _ = federation(keypair_1024)
    offers = fed.server.sampling_offer(0)
    for s in range(SILOS):
        envelope = fed.silos[s].sampling_choice(offers[s])
        if s == 2:  # silo 2 replaces its choices, under its own authentic tag
            channels = fed.silos[2].channels
            channels._sent[SERVER] -= 1
            bad = SamplingChoiceMessage(2, 0, (ot.MODP_3072_PRIME - 1,) * USERS)
            envelope = channels.wrap(SERVER, bad.KIND, 0, bad)
        if s == 2:
            with pytest.raises(
                ProtocolError, match="silo 2's OT choice B in round 0 is not in the prime-order"
            ):
                fed.server.receive_sampling_choice(envelope)
        else:
            fed.server.receive_sampling_choice(envelope)
    with pytest.raises(ProtocolError, match=r"no OT choices from silo\(s\) \[2\]"):
        fed.server.sampling_transfer(0)  # nothing was sealed for a round that lacks a silo's choices


def test_the_server_refuses_a_second_transfer_of_a_round(keypair_1024):
    fed, _, _, _ = federation(keypair_1024)
    offers = fed.server.sampling_offer(0)
    for s in range(SILOS):
        fed.server.receive_sampling_choice(fed.silos[s].sampling_choice(offers[s]))
    fed.server.sampling_transfer(0)
    with pytest.raises(ProtocolError, match="the sampling transfer was already made"):
        fed.server.sampling_transfer(0)


# --- what the review of issue 36 found: selective failure, a round offered twice -----------------


def _malformed_real_box(monkeypatch, user: int) -> None:
    """The server seals bytes that are no Paillier ciphertext in `user`'s real box (key K1)."""
    original = sampling.seal_weights

    def seal_weights(state, round_index, weights, private_key):
        original(state, round_index, weights, private_key)
        _, real_key = state.keys[user]
        context = sampling._box_context(round_index, user)
        pair = state.boxes[user]
        garbage = seal(real_key, b"\x00" * 8, context)  # 0: not a unit modulo n^2
        boxes = list(state.boxes)
        try:
            open_sealed(real_key, pair.first, context)
            boxes[user] = SlotBoxes(garbage, pair.second)
        except ProtocolError:
            boxes[user] = SlotBoxes(pair.first, garbage)
        state.boxes = tuple(boxes)

    monkeypatch.setattr(sampling, "seal_weights", seal_weights)


def test_a_malformed_real_box_is_silent_at_the_silo_and_caught_by_the_audit(keypair_1024, monkeypatch):
    """Selective failure: had the silo refused a box its key opens, the refusal would tell the
    server that the silo's slot is real, i.e. that the user was sampled. The silo counts it as
    Enc(0) and says nothing; the audit catches the malformed real box."""
    fed, counts, deltas, noise = federation(keypair_1024, SamplingParams(4, 2, 0.0))
    _malformed_real_box(monkeypatch, 0)
    seen = set()
    for r in range(12):  # rounds where user 0's slot is real and rounds where it is not
        aggregate = private_weighting_round(fed, r, deltas, noise, workers=1).aggregate
        sample = own_sample(fed, r)
        taken = sample.copy()
        taken[0] = False  # the malformed box counts as Enc(0): user 0 never counts
        assert_matches_plaintext(aggregate, counts, deltas, noise, taken)
        assert all(silo.unopened == ((0,) if sample[0] else ()) for silo in fed.silos)
        seen.add(bool(sample[0]))
    assert seen == {True, False}  # both cases met (P = 4, m = 2: each round is a fair coin)
    audited, _, deltas, noise = federation(keypair_1024, AUDIT_ALL)
    t = round_where(audited, lambda users: 0 in users)
    assert_caught(audited, deltas, noise, "the box of the real slots does not hold a Paillier ciphertext", t)


def test_a_round_offered_again_is_refused_by_the_silos(keypair_1024):
    """Offered again after its audit request, a round would draw the same c_u and audited users,
    which the server knows by then: it could put the real key in every slot of the others."""
    fed, _, deltas, noise = federation(keypair_1024)
    server = fed.server
    step_by_step(fed, 0, deltas, noise, hook=lambda step: None)
    offers = server.sampling_offer(1)
    for s, envelope in enumerate(offers):
        server.receive_sampling_choice(fed.silos[s].sampling_choice(envelope))
    # A server that forgets round 1 and offers it afresh (its own check bypassed).
    del server._sampling[1]
    server._last_round = 0
    again = server.sampling_offer(1)
    with pytest.raises(ProtocolError, match="silo 0: round 1 was offered before") as caught:
        fed.silos[0].sampling_choice(again[0])
    one_line(caught)
    # And a silo restored from its state remembers it.
    restored = Silo.restore(fed.silos[1].export_state(), server.params)
    with pytest.raises(ProtocolError, match="silo 1: round 1 was offered before"):
        restored.sampling_choice(again[1])
    with pytest.raises(ProtocolError, match="round 1 was already opened by the server"):
        server.sampling_offer(1)
