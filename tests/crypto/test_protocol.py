"""Protocol 1 end to end: correctness (Theorem 4), what each party sees (Theorem 5), refusals."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from scipy import stats

from uldp.crypto import secure_weighted_sum
from uldp.crypto.channel import SERVER, SETUP_ROUND, Channels, silo_name
from uldp.crypto.dh import generate_dh_keypair
from uldp.crypto.encoding import Encoding, largest_n_max
from uldp.crypto.paillier import check_modulus
from uldp.crypto.protocol import (
    AggregationServer,
    PaillierKeyMessage,
    ProtocolParams,
    Silo,
    WeightingSession,
    largest_value,
    plaintext_weighted_sum,
    rounding_tolerance,
    setup,
    weighting_round,
)
from uldp.crypto.sealing import SealedBox
from uldp.errors import ProtocolError

SMALL = Encoding(precision=1e-8, n_max=60, value_bound=100.0)


def make_inputs(rng, silos, users, d, *, zero_fraction=0.3, n_high=8):
    counts = rng.integers(1, n_high, size=(silos, users))
    counts[rng.random((silos, users)) < zero_fraction] = 0
    counts[0, counts.sum(axis=0) == 0] = 1  # every user has a record somewhere
    deltas = [rng.normal(scale=0.5, size=(users, d)) for _ in range(silos)]
    noise = [rng.normal(scale=2.0, size=d) for _ in range(silos)]
    return counts, deltas, noise


def fixed_point_expectation(encoding, deltas, counts, sampled, noise):
    """The exact value Protocol 1 computes: sum of rounded values, weighted exactly (D.4)."""
    totals = counts.sum(axis=0)
    d = noise[0].shape[0]
    out = []
    for j in range(d):
        acc = Fraction(0)
        for s, silo_deltas in enumerate(deltas):
            fixed = encoding.fixed_point(silo_deltas[:, j])
            for u, e in enumerate(fixed):
                if sampled[u] and counts[s, u]:
                    acc += Fraction(e * int(counts[s, u]), int(totals[u]))
            acc += encoding.fixed_point(noise[s][j : j + 1])[0]
        out.append(float(acc) * encoding.precision)
    return np.array(out)


def run(counts, deltas, noise, sampled, encoding=SMALL, rounds=1, method="fast", key=None):
    silos, users = counts.shape
    params = ProtocolParams(
        silos=silos,
        users=users,
        dimension=noise[0].shape[0],
        key_bits=1024,
        encoding=encoding,
        test_keys=True,
    )
    federation = setup(counts, params, keypair=key)
    results = [
        weighting_round(federation, t, deltas, noise, sampled, method=method, workers=1)
        for t in range(rounds)
    ]
    return federation, results


@pytest.mark.parametrize("silos,users,d", [(2, 1, 1), (3, 5, 4), (4, 9, 3), (1, 4, 2)])
@pytest.mark.parametrize("subsample", [False, True])
def test_aggregate_matches_plaintext_within_precision(keypair_1024, silos, users, d, subsample):
    rng = np.random.default_rng(silos * 1000 + users * 10 + d + subsample)
    counts, deltas, noise = make_inputs(rng, silos, users, d)
    sampled = rng.random(users) < 0.5 if subsample else np.ones(users, dtype=bool)
    _, (result,) = run(counts, deltas, noise, sampled, key=keypair_1024)
    plain = plaintext_weighted_sum(deltas, counts, sampled, noise)
    assert np.max(np.abs(result.aggregate - plain)) <= rounding_tolerance(SMALL, users, silos)
    # Decoding is exact: the protocol returns the fixed-point computation itself (Theorem 4).
    np.testing.assert_allclose(
        result.aggregate,
        fixed_point_expectation(SMALL, deltas, counts, sampled, noise),
        rtol=1e-14,
        atol=1e-15,
    )


def test_unsampled_users_do_not_count(keypair_1024):
    rng = np.random.default_rng(5)
    counts, deltas, noise = make_inputs(rng, 3, 6, 2)
    sampled = np.array([True, False, True, False, True, True])
    _, (a,) = run(counts, deltas, noise, sampled, key=keypair_1024)
    changed = [x.copy() for x in deltas]
    for x in changed:
        x[~sampled] = rng.normal(size=(int((~sampled).sum()), 2)) * 50
    _, (b,) = run(counts, changed, noise, sampled, key=keypair_1024)
    np.testing.assert_array_equal(a.aggregate, b.aggregate)


def test_user_without_records_gets_weight_zero(keypair_1024):
    rng = np.random.default_rng(4)
    counts, deltas, noise = make_inputs(rng, 3, 5, 2)
    counts[:, 3] = 0  # user 3 has no records anywhere: B(N_3) = 0 has no inverse
    sampled = np.ones(5, dtype=bool)
    federation, (result,) = run(counts, deltas, noise, sampled, key=keypair_1024)
    assert federation.server.blinded_totals()[3] == 0
    plain = plaintext_weighted_sum(deltas, counts, sampled, noise)
    assert np.max(np.abs(result.aggregate - plain)) <= rounding_tolerance(SMALL, 5, 3)


def test_secure_weighted_sum_entry_point():
    rng = np.random.default_rng(11)
    counts, deltas, noise = make_inputs(rng, 3, 7, 5)
    sampled = rng.random(7) < 0.6
    result = secure_weighted_sum(
        deltas, counts, sampled, noise, key_bits=1024, test_keys=True, precision=1e-9
    )
    plain = plaintext_weighted_sum(deltas, counts, sampled, noise)
    assert result.shape == (5,)
    assert np.max(np.abs(result - plain)) <= (7 + 3) * 1e-9 / 2


def test_weighting_session_runs_several_rounds_on_one_setup():
    rng = np.random.default_rng(12)
    counts, deltas, noise = make_inputs(rng, 2, 4, 3)
    session = WeightingSession(counts, 3, key_bits=1024, test_keys=True, precision=1e-9, workers=1)
    for t in range(2):
        sampled = rng.random(4) < 0.7
        round_deltas = [d * (t + 1) for d in deltas]
        result = session.round(round_deltas, sampled, noise)
        plain = plaintext_weighted_sum(round_deltas, counts, sampled, noise)
        assert np.max(np.abs(result - plain)) <= (4 + 2) * 1e-9 / 2
    assert session.rounds_done == 2
    with pytest.raises(ValueError, match="deltas must be"):
        session.round([d[:, :2] for d in deltas], np.ones(4, dtype=bool), noise)


def test_fast_and_straightforward_rounds_agree(keypair_1024):
    rng = np.random.default_rng(2)
    counts, deltas, noise = make_inputs(rng, 3, 4, 3)
    sampled = np.ones(4, dtype=bool)
    _, (fast,) = run(counts, deltas, noise, sampled, key=keypair_1024)
    _, (slow,) = run(counts, deltas, noise, sampled, key=keypair_1024, method="straightforward")
    np.testing.assert_array_equal(fast.aggregate, slow.aggregate)


def test_several_rounds_use_fresh_masks(keypair_1024):
    rng = np.random.default_rng(9)
    counts, deltas, noise = make_inputs(rng, 3, 3, 2)
    sampled = np.ones(3, dtype=bool)
    federation, results = run(counts, deltas, noise, sampled, rounds=2, key=keypair_1024)
    np.testing.assert_array_equal(results[0].aggregate, results[1].aggregate)
    sums = [e.payload for e in federation.server.inbox if type(e.payload).__name__ == "MaskedSumMessage"]
    by_round = {(m.silo, m.round): m.ciphertexts for m in sums}
    _, private = keypair_1024
    # The same silo's masked plaintext differs between rounds: the masks are per round.
    first = [private.decrypt(c) for c in by_round[(0, 0)]]
    second = [private.decrypt(c) for c in by_round[(0, 1)]]
    assert first != second
    for key in ("key_exchange", "blinded_histograms"):
        assert federation.seconds[key] >= 0
    assert set(results[0].seconds) == {"server_weights", "silo_weighting", "aggregation"}


def test_server_view_of_blinded_totals_is_independent_of_n_u(keypair_1024):
    """B(N_u) = r_u N_u mod n is uniform whatever N_u (Appendix D.5): compare two populations."""
    users = 800
    counts = np.zeros((3, users), dtype=int)
    counts[0, :400] = 1  # N_u = 1
    counts[:, 400:] = [[20], [20], [19]]  # N_u = 59
    params = ProtocolParams(silos=3, users=users, dimension=1, key_bits=1024, encoding=SMALL, test_keys=True)
    federation = setup(counts, params, keypair=keypair_1024)
    n = float(keypair_1024[0].n)
    seen = np.array([float(b) for b in federation.server.blinded_totals()]) / n
    assert stats.ks_2samp(seen[:400], seen[400:]).pvalue > 1e-3
    assert stats.kstest(seen[:400], "uniform").pvalue > 1e-3
    assert stats.kstest(seen[400:], "uniform").pvalue > 1e-3
    # each silo's doubly blinded histogram alone is uniform too (r_u and pairwise masks)
    first = next(
        e.payload for e in federation.server.inbox if type(e.payload).__name__ == "BlindedHistogramMessage"
    )
    assert stats.kstest(np.array([float(v) for v in first.values]) / n, "uniform").pvalue > 1e-3


def _ints_and_bytes(obj):
    if isinstance(obj, bool):
        return
    if isinstance(obj, (int, bytes)):
        yield obj
    elif isinstance(obj, SealedBox) or dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            yield from _ints_and_bytes(getattr(obj, f.name))
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _ints_and_bytes(item)


def test_no_party_receives_another_partys_counts_in_the_clear(keypair_1024):
    counts = np.array([[101, 113, 127, 131, 137], [139, 149, 151, 157, 163], [167, 173, 179, 181, 191]])
    encoding = Encoding(precision=1e-6, n_max=600, value_bound=10.0)
    rng = np.random.default_rng(1)
    deltas = [rng.normal(size=(5, 3)) for _ in range(3)]
    noise = [rng.normal(size=3) for _ in range(3)]
    federation, _ = run(counts, deltas, noise, np.ones(5, dtype=bool), encoding=encoding, key=keypair_1024)
    totals = set(counts.sum(axis=0).tolist())
    server_seen = [v for m in federation.server.inbox for v in _ints_and_bytes(m)]
    assert server_seen and not (set(server_seen) & (set(counts.ravel().tolist()) | totals))
    seed = federation.silos[0]._seed
    assert all(seed not in v for v in server_seen if isinstance(v, bytes))
    for silo in federation.silos:
        others = {int(c) for s, row in enumerate(counts) if s != silo.id for c in row} | totals
        seen = [v for m in silo.inbox for v in _ints_and_bytes(m)]
        assert seen and not (set(seen) & others)
        assert silo._seed == seed  # every silo got R


def test_count_above_n_max_is_refused(keypair_1024):
    rng = np.random.default_rng(0)
    counts, deltas, noise = make_inputs(rng, 2, 3, 2)
    counts[1, 2] = 61
    with pytest.raises(ValueError, match="exceeds N_max = 60"):
        run(counts, deltas, noise, np.ones(3, dtype=bool), key=keypair_1024)
    counts[1, 2] = 30
    counts[0, 2] = 31  # each silo within N_max, the total N_u = 61 is not
    with pytest.raises(ValueError, match="exceeds N_max"):
        secure_weighted_sum(
            deltas, counts, np.ones(3, dtype=bool), noise, key_bits=1024, test_keys=True, n_max=60
        )


def test_total_above_n_max_is_caught_at_decoding(keypair_1024):
    # No party knows N_u, so a total above N_max shows only as an aggregate out of range.
    counts = np.array([[40, 1], [21, 1]])  # N_0 = 61, a prime: 61 does not divide C_LCM
    deltas = [np.full((2, 2), 0.5), np.full((2, 2), -0.25)]
    noise = [np.zeros(2), np.zeros(2)]
    with pytest.raises(ValueError, match="outside the decodable range"):
        run(counts, deltas, noise, np.ones(2, dtype=bool), key=keypair_1024)


def test_values_that_could_overflow_are_refused(keypair_1024):
    rng = np.random.default_rng(0)
    counts, deltas, noise = make_inputs(rng, 2, 3, 2)
    deltas[0][1, 1] = 1e3  # above the value bound 100
    with pytest.raises(ValueError, match="exceeds the encoding's value bound"):
        run(counts, deltas, noise, np.ones(3, dtype=bool), key=keypair_1024)
    with pytest.raises(ValueError, match="plaintext space is too small"):
        run(
            counts,
            [d * 0 for d in deltas],
            noise,
            np.ones(3, dtype=bool),
            encoding=Encoding(precision=1e-10, n_max=2000),
            key=keypair_1024,
        )


def test_secure_defaults():
    import inspect

    assert inspect.signature(secure_weighted_sum).parameters["key_bits"].default == 3072
    assert ProtocolParams(silos=2, users=1, dimension=1).key_bits == 3072
    with pytest.raises(ValueError, match="insecure"):
        ProtocolParams(silos=2, users=1, dimension=1, key_bits=1024)


def test_bad_inputs():
    rng = np.random.default_rng(0)
    counts, deltas, noise = make_inputs(rng, 2, 3, 2)
    with pytest.raises(ValueError, match="insecure"):
        secure_weighted_sum(deltas, counts, np.ones(3, dtype=bool), noise, key_bits=1024)
    with pytest.raises(ValueError, match="silos"):
        secure_weighted_sum(deltas[:1], counts, np.ones(3, dtype=bool), noise, key_bits=1024, test_keys=True)
    with pytest.raises(ValueError, match="integer"):
        secure_weighted_sum(
            deltas, counts.astype(float), np.ones(3, dtype=bool), noise, key_bits=1024, test_keys=True
        )


# --- Paillier modulus size: the same rule at the silo and the server as at key generation ---


def silo_with_server(params, silo_id=0, counts=(1, 2)):
    """A silo, and the server end of its channel: `send(message)` tags a message as the server would."""
    server_dh = generate_dh_keypair()
    silo = Silo(silo_id, list(counts), params, server_key=server_dh.public)
    server = Channels(SERVER)
    server.connect_dh(server_dh, silo_name(silo_id), silo.dh_key().payload.public)
    return silo, lambda message: server.wrap(silo_name(silo_id), message.KIND, SETUP_ROUND, message)


def test_silo_refuses_a_modulus_below_2048_bits_without_test_keys(keypair_512):
    params = ProtocolParams(silos=2, users=2, dimension=1, encoding=Encoding(n_max=10))
    silo, send = silo_with_server(params)
    with pytest.raises(ValueError, match="512-bit Paillier modulus is insecure"):
        silo.receive_paillier_key(send(PaillierKeyMessage(int(keypair_512[0].n))))
    with pytest.raises(ProtocolError, match="no Paillier key"):
        silo.blinded_histogram()  # nothing was stored


def test_silo_refuses_a_modulus_smaller_than_the_agreed_key_size(keypair_512, keypair_1024):
    params = ProtocolParams(silos=2, users=2, dimension=1, key_bits=1024, encoding=SMALL, test_keys=True)
    silo, send = silo_with_server(params)
    with pytest.raises(ValueError, match="512 bits, but the agreed key size is 1024"):
        silo.receive_paillier_key(send(PaillierKeyMessage(int(keypair_512[0].n))))
    silo, send = silo_with_server(params)
    silo.receive_paillier_key(send(PaillierKeyMessage(int(keypair_1024[0].n))))


def test_server_and_setup_refuse_a_small_supplied_keypair(keypair_512, keypair_1024):
    counts = np.array([[1, 2], [3, 4]])
    secure = ProtocolParams(silos=2, users=2, dimension=1, encoding=Encoding(n_max=10))
    with pytest.raises(ValueError, match="insecure"):
        AggregationServer(secure, keypair=keypair_512)
    with pytest.raises(ValueError, match="insecure"):
        setup(counts, secure, keypair=keypair_512)
    test = ProtocolParams(silos=2, users=2, dimension=1, key_bits=1024, encoding=SMALL, test_keys=True)
    with pytest.raises(ValueError, match="agreed key size is 1024"):
        setup(counts, test, keypair=keypair_512)
    with pytest.raises(ValueError, match="does not belong"):
        setup(counts, test, keypair=(keypair_1024[0], keypair_512[1]))
    assert setup(counts, test, keypair=keypair_1024).server.public_key.bits == 1024


def semiprime(bits: int, offset: int = 0) -> int:
    """p q with p != q primes of about bits / 2 bits each, the product having `bits` bits."""
    half = bits // 2
    p = int(gmpy2.next_prime(3 * 2 ** (half - 2) + offset))
    q = int(gmpy2.next_prime(3 * 2 ** (half - 2) + 2 ** (half // 2) + offset))
    return p * q


N_2048 = semiprime(2048)
P_512 = int(gmpy2.next_prime(2**511 + 2**300))


@pytest.mark.parametrize(
    "modulus,key_bits,test_keys,error",
    [
        (N_2048, 2048, False, None),  # a 2048-bit n
        (semiprime(3072), 2048, False, None),  # larger than agreed is fine
        (semiprime(2046), 2048, False, "insecure"),  # 2047 bits: below 2048 without test_keys
        (P_512 * int(gmpy2.next_prime(P_512)), 1024, True, None),  # p q can have key_bits - 1 bits
        (2**1021 + 1, 1024, True, "agreed key size"),
        (2**1023 + 2, 1024, True, "odd"),
        (1, 1024, True, "odd"),
        (float(2**1023), 1024, True, "integer"),
        # beyond size and parity (issue 12): what a silo can check without the factors
        pytest.param(3 * int(gmpy2.next_prime(2**2046)), 2048, False, "small prime factor 3;", id="factor-3"),
        pytest.param(
            65521 * int(gmpy2.next_prime(2**2033)), 2048, False, "small prime factor 65521", id="factor-65521"
        ),
        pytest.param(int(gmpy2.next_prime(2**1024)) ** 2, 2048, False, "perfect power", id="square"),
        pytest.param(int(gmpy2.next_prime(2**683)) ** 3, 2048, False, "perfect power", id="cube"),
        pytest.param(int(gmpy2.next_prime(2**2047)), 2048, False, "is a prime", id="prime"),
    ],
)
def test_check_modulus(modulus, key_bits, test_keys, error):
    if error is None:
        assert check_modulus(modulus, key_bits, test_keys=test_keys) == modulus
    else:
        with pytest.raises(ValueError, match=error):
            check_modulus(modulus, key_bits, test_keys=test_keys)


# --- a round index is used once per silo: reused masks would leak a difference ---


def test_silo_refuses_a_reused_round_index(keypair_1024):
    rng = np.random.default_rng(4)
    counts, deltas, noise = make_inputs(rng, 2, 3, 2)
    sampled = np.ones(3, dtype=bool)
    federation, _ = run(counts, deltas, noise, sampled, rounds=1, key=keypair_1024)
    again = federation.server.encrypted_weights(0, sampled)[0]
    with pytest.raises(ValueError, match="round 0 was already used"):
        federation.silos[0].masked_sum(again, deltas[0], noise[0], workers=1)
    fresh = federation.server.encrypted_weights(1, sampled)[0]
    federation.silos[0].masked_sum(fresh, deltas[0], noise[0], workers=1)


def test_a_refused_round_does_not_use_up_its_index(keypair_1024):
    rng = np.random.default_rng(5)
    counts, deltas, noise = make_inputs(rng, 2, 3, 2)
    sampled = np.ones(3, dtype=bool)
    federation, _ = run(counts, deltas, noise, sampled, rounds=0, key=keypair_1024)
    message = federation.server.encrypted_weights(0, sampled)[0]
    with pytest.raises(ValueError, match="shape"):
        federation.silos[0].masked_sum(message, deltas[0][:, :1], noise[0], workers=1)
    with pytest.raises(ValueError, match="value bound"):
        federation.silos[0].masked_sum(message, deltas[0], noise[0] * 1e9, workers=1)
    federation.silos[0].masked_sum(message, deltas[0], noise[0], workers=1)


# --- the verification tolerance covers float64 error, not only the fixed-point rounding ---


def test_tolerance_covers_float64_error_near_the_value_bound(keypair_1024):
    silos, users, d = 3, 6, 4
    public = keypair_1024[0]
    encoding = Encoding(n_max=largest_n_max(public.n, users, silos))  # P = 1e-10, |x| <= 1e10
    rng = np.random.default_rng(5)
    counts = rng.integers(1, encoding.n_max // silos + 1, size=(silos, users))
    deltas = [
        rng.choice([-1.0, 1.0], size=(users, d)) * rng.uniform(0.5e10, 1e10, size=(users, d))
        for _ in range(silos)
    ]
    noise = [rng.uniform(-1e10, 1e10, size=d) for _ in range(silos)]
    sampled = np.ones(users, dtype=bool)
    params = ProtocolParams(
        silos=silos, users=users, dimension=d, key_bits=1024, encoding=encoding, test_keys=True
    )
    result = weighting_round(
        setup(counts, params, keypair=keypair_1024), 0, deltas, noise, sampled, workers=1
    )
    error = float(np.max(np.abs(result.aggregate - plaintext_weighted_sum(deltas, counts, sampled, noise))))
    fixed_point_only = (users + silos) * encoding.precision / 2
    assert error > fixed_point_only  # float64 error is what matters at this scale
    assert error <= rounding_tolerance(encoding, users, silos)  # default: the value bound
    assert error <= rounding_tolerance(encoding, users, silos, largest_value(deltas, noise))


def test_tolerance_for_small_values_stays_the_fixed_point_one():
    encoding = Encoding()  # P = 1e-10
    fixed_point_only = (100 + 3) * encoding.precision / 2
    tight = rounding_tolerance(encoding, 100, 3, max_abs=1.0)
    assert fixed_point_only < tight < 1.001 * fixed_point_only
    assert rounding_tolerance(encoding, 100, 3) > rounding_tolerance(encoding, 100, 3, 1e9) > tight
    assert largest_value([np.array([[0.5, -2.0]])], [np.array([1.5])]) == 2.0
    with pytest.raises(ValueError, match="max_abs"):
        rounding_tolerance(encoding, 1, 1, max_abs=float("nan"))
