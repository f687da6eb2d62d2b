"""Secure aggregation's building blocks: Shamir over F_p, fixed point in Z_{2^64}, the PRG, the keys."""

from __future__ import annotations

import itertools
import math
import secrets
from fractions import Fraction

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.crypto.secagg import FixedPoint, SecAggParams
from uldp.crypto.secagg.keys import agree, generate_keypair, load_private_key, mask_seed, share_key
from uldp.crypto.secagg.masks import MaskGenerator, mask
from uldp.crypto.secagg.shamir import PRIME, reconstruct_secret, share_secret
from uldp.errors import InvalidParameter, ProtocolError

# -- Shamir -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", range(2, 7))
def test_shamir_any_k_shares_rebuild_and_fewer_are_refused(k):
    n = 6
    secret = secrets.token_bytes(32)
    shares = share_secret(secret, k, range(1, n + 1))
    assert sorted(shares) == list(range(1, n + 1)) and all(0 <= y < PRIME for y in shares.values())
    for size in range(1, n + 1):
        for subset in itertools.combinations(shares, size):
            some = {x: shares[x] for x in subset}
            if size >= k:
                assert reconstruct_secret(some, k) == secret
            else:
                with pytest.raises(ProtocolError, match=f"at least k are needed.*k = {k}|k = {k}"):
                    reconstruct_secret(some, k)


def test_shamir_fewer_than_k_shares_fit_every_secret():
    # Perfect secrecy, concretely: for any candidate secret there is a polynomial of degree k - 1
    # through the k - 1 shares seen and that secret, so the shares rule nothing out.
    k, secret = 3, secrets.token_bytes(32)
    shares = share_secret(secret, k, [1, 2, 3, 4])
    seen = {1: shares[1], 2: shares[2]}
    candidate = secrets.token_bytes(32)
    # The polynomial through (0, candidate), (1, y1), (2, y2) gives a value at 3; with it, the
    # reconstruction returns the candidate: the two seen shares are consistent with both secrets.
    x_values, y_values = [0, 1, 2], [int.from_bytes(candidate, "big"), seen[1], seen[2]]
    y3 = 0
    for m, (xm, ym) in enumerate(zip(x_values, y_values)):
        term = Fraction(ym)
        for l, xl in enumerate(x_values):  # noqa: E741
            if l != m:
                term *= Fraction(3 - xl, xm - xl)
        y3 += term
    forged = {**seen, 3: int(y3.numerator * pow(y3.denominator, -1, PRIME) % PRIME)}
    assert reconstruct_secret(forged, k) == candidate


def test_shamir_corrupted_share_is_caught_when_more_than_k_arrived():
    k, secret = 3, secrets.token_bytes(32)
    shares = share_secret(secret, k, range(1, 8))
    for size in range(k + 1, 8):
        some = {x: shares[x] for x in range(1, size + 1)}
        assert reconstruct_secret(some, k) == secret
        for x in some:
            with pytest.raises(ProtocolError, match="do not lie on one polynomial"):
                reconstruct_secret({**some, x: (some[x] + 1) % PRIME}, k)
    # Exactly k shares carry no redundancy: any k values are some sharing (here of secret + 1).
    shifted = reconstruct_secret({1: shares[1], 2: shares[2], 3: (shares[3] + 1) % PRIME}, k)
    assert int.from_bytes(shifted, "big") == int.from_bytes(secret, "big") + 1


def test_shamir_fresh_randomness_and_refusals():
    secret = secrets.token_bytes(32)
    assert share_secret(secret, 2, [1, 2]) != share_secret(secret, 2, [1, 2])
    with pytest.raises(InvalidParameter, match="distinct"):
        share_secret(secret, 2, [1, 1, 2])
    with pytest.raises(InvalidParameter, match="0 is the secret"):
        share_secret(secret, 2, [0, 1, 2])
    with pytest.raises(InvalidParameter, match="threshold"):
        share_secret(secret, 4, [1, 2, 3])
    with pytest.raises(InvalidParameter, match="32 bytes"):
        share_secret(b"short", 2, [1, 2])
    with pytest.raises(ProtocolError, match="not an element"):
        reconstruct_secret({1: PRIME, 2: 5}, 2)
    # Shares of two different sharings do not interpolate to a 32-byte secret (with overwhelming odds).
    a, b = share_secret(secret, 2, [1, 2]), share_secret(secrets.token_bytes(32), 2, [1, 2])
    with pytest.raises(ProtocolError, match="inconsistent"):
        reconstruct_secret({1: a[1], 2: b[2]}, 2)


# -- fixed point --------------------------------------------------------------------------------------


def test_fixed_point_sum_is_exact_in_the_ring_and_within_the_stated_error():
    rng = np.random.default_rng(1)
    fp = FixedPoint(bound=4.0, frac_bits=24)
    xs = rng.uniform(-4, 4, size=(50, 1000))
    codes = [fp.encode(x) for x in xs]
    ring = np.zeros(1000, dtype=np.uint64)
    for c in codes:
        ring += c  # wraps modulo 2^64, as the masks do
    exact_codes = np.sum([c.view(np.int64).astype(object) for c in codes], axis=0)
    assert (ring.view(np.int64).astype(object) == exact_codes).all()  # the ring sum is the integer sum
    total = fp.decode(ring)
    exact = [math.fsum(col) for col in xs.T]
    error = np.abs(total - np.array(exact)).max()
    assert error <= fp.rounding_error_bound(50) == 50 * 2.0**-25
    assert fp.resolution == 2.0**-24


def test_fixed_point_extremes_and_negative_values_round_trip():
    fp = FixedPoint(bound=3.0, frac_bits=10)
    x = np.array([-3.0, 3.0, 0.0, -1.5, 2.0**-11, -(2.0**-12)])
    assert fp.decode(fp.encode(x)).tolist() == [-3.0, 3.0, 0.0, -1.5, 0.0, 0.0]  # rint: ties to even


def test_fixed_point_refuses_inputs_beyond_the_bound():
    fp = FixedPoint(bound=1.0, frac_bits=24)
    for bad in (1.0000001, -2.0, np.nan, np.inf):
        with pytest.raises(InvalidParameter, match=r"coordinate 1 .*bound \|x\| <= 1.0"):
            fp.encode(np.array([0.0, bad]))


def test_fixed_point_refuses_parameters_whose_sum_could_wrap():
    fp = FixedPoint(bound=2.0**20, frac_bits=24)  # one code up to 2^44: 2^19 - 1 inputs fit below 2^63
    assert fp.max_participants() == (2**63 - 1) // 2**44
    fp.check_capacity(fp.max_participants())
    with pytest.raises(InvalidParameter, match=r"bound=1048576.0 .*wrap modulo 2\^64"):
        fp.check_capacity(fp.max_participants() + 1)
    with pytest.raises(InvalidParameter, match="bound"):
        SecAggParams(threshold=3, dimension=4, bound=2.0**61, frac_bits=1)  # even k inputs could wrap
    with pytest.raises(InvalidParameter, match="bound"):
        SecAggParams(threshold=3, dimension=4, bound=2.0**20).check_participants(2**19 + 1)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(InvalidParameter, match="bound"):
            FixedPoint(bound=bad)
    with pytest.raises(InvalidParameter, match="frac_bits"):
        FixedPoint(bound=1.0, frac_bits=63)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-8.0, 8.0, allow_nan=False), min_size=1, max_size=20),
    st.integers(0, 40),
)
def test_fixed_point_error_bound_holds_for_any_input(values, frac_bits):
    fp = FixedPoint(bound=8.0, frac_bits=frac_bits)
    n = len(values)
    total = fp.decode(np.sum([fp.encode(np.array([v])) for v in values], axis=0, dtype=np.uint64))[0]
    assert abs(Fraction(total) - sum(map(Fraction, values))) <= Fraction(n, 2 ** (frac_bits + 1))


# -- the PRG ------------------------------------------------------------------------------------------


def test_mask_is_the_aes_ctr_keystream_read_as_uint64():
    seed = secrets.token_bytes(32)
    stream = Cipher(algorithms.AES(seed), modes.CTR(bytes(16))).encryptor().update(bytes(80))
    assert mask(seed, 10).tolist() == [int.from_bytes(stream[8 * i : 8 * i + 8], "little") for i in range(10)]
    assert (mask(seed, 10) == mask(seed, 10)).all() and (
        mask(seed, 10) != mask(secrets.token_bytes(32), 10)
    ).any()
    assert (mask(seed, 25)[:10] == mask(seed, 10)).all()


def test_masks_cancel_and_look_uniform():
    d = 200_000
    gen = MaskGenerator(d)
    seed, other = secrets.token_bytes(32), secrets.token_bytes(32)
    total = np.arange(d, dtype=np.uint64)
    gen.apply(total, add=[seed, other], subtract=[other])
    gen.apply(total, subtract=[seed])
    assert (total == np.arange(d, dtype=np.uint64)).all()
    words = mask(seed, d)
    bits = np.unpackbits(words.view(np.uint8))
    assert abs(bits.mean() - 0.5) < 5 * 0.5 / math.sqrt(bits.size)  # each bit is fair
    top_bytes = np.bincount((words >> np.uint64(56)).astype(np.int64), minlength=256)
    assert top_bytes.min() > 0.7 * d / 256 and top_bytes.max() < 1.3 * d / 256


def test_mask_refuses_bad_seeds_and_shapes():
    with pytest.raises(InvalidParameter, match="32 bytes"):
        mask(b"short", 4)
    with pytest.raises(InvalidParameter, match="uint64"):
        MaskGenerator(4).apply(np.zeros(4, dtype=np.int64), add=[secrets.token_bytes(32)])


# -- keys ---------------------------------------------------------------------------------------------


def test_pairwise_seeds_agree_share_keys_are_per_direction_and_round():
    a, b = generate_keypair(), generate_keypair()
    ab = agree(load_private_key(a.private), b.public, peer=2)
    ba = agree(load_private_key(b.private), a.public, peer=1)
    assert ab == ba
    session = secrets.token_bytes(16)
    assert mask_seed(ab, session=session, round_number=3, i=1, j=2) == mask_seed(
        ba, session=session, round_number=3, i=2, j=1
    )
    keys = {
        share_key(ab, session=session, round_number=3, sender=1, receiver=2),
        share_key(ab, session=session, round_number=3, sender=2, receiver=1),
        share_key(ab, session=session, round_number=4, sender=1, receiver=2),
        share_key(ab, session=secrets.token_bytes(16), round_number=3, sender=1, receiver=2),
        mask_seed(ab, session=session, round_number=3, i=1, j=2),
    }
    assert len(keys) == 5  # directions, rounds, sessions and purposes never share a key
    assert repr(a.private) not in repr(a)  # a private key never shows in a repr or a traceback


def test_small_order_public_key_is_refused_naming_the_peer():
    own = load_private_key(generate_keypair().private)
    with pytest.raises(ProtocolError, match="participant 7's X25519 public key"):
        agree(own, bytes(32), peer=7)  # the point of order 1: the shared secret would be all zeros
    with pytest.raises(ProtocolError, match="participant 7"):
        agree(own, bytes(31), peer=7)
