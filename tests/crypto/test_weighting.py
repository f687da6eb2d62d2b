"""The silo's encrypted weighted sum: the fast path equals the straightforward reference."""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.crypto.weighting import (
    encrypted_weighted_sum,
    fast_products,
    straightforward_products,
    user_factors,
    window_size,
)


def problem(public, rng, users, d, bits):
    weights_plain = [int(rng.integers(0, 2**40)) for _ in range(users)]
    weights = [public.encrypt(w) for w in weights_plain]
    factors = [gmpy2.mpz(int(rng.integers(0, 2**62))) ** 20 % public.n for _ in range(users)]
    # Python ints built from random bytes: exponents up to 70 bits do not fit numpy's int64.
    fixed = [
        [int.from_bytes(rng.bytes(9), "big") % (2 ** (bits + 1)) - 2**bits for _ in range(d)]
        for _ in range(users)
    ]
    fixed[0][0] = 0  # zero exponents are skipped by the fast path
    return weights_plain, weights, factors, fixed


def expected(public, weights_plain, factors, fixed, offsets):
    n = public.n
    d = len(fixed[0])
    return [
        (sum(w * k * row[j] for w, k, row in zip(weights_plain, factors, fixed)) + offsets[j]) % n
        for j in range(d)
    ]


@pytest.mark.parametrize("users,d,bits", [(1, 1, 3), (3, 5, 34), (7, 4, 70), (5, 9, 1)])
def test_fast_equals_straightforward_equals_plaintext(keypair_512, users, d, bits):
    public, private = keypair_512
    rng = np.random.default_rng(users * 100 + d)
    weights_plain, weights, factors, fixed = problem(public, rng, users, d, bits)
    factors[-1] = gmpy2.mpz(0)  # a user with no records in this silo
    offsets = [int(rng.integers(0, 2**50)) for _ in range(d)]
    want = expected(public, weights_plain, factors, fixed, offsets)
    for method in ("fast", "straightforward"):
        out = encrypted_weighted_sum(public, weights, factors, fixed, offsets, method=method, workers=1)
        assert [private.decrypt(c) for c in out] == want
    products = straightforward_products(public, weights, factors, fixed)
    fast, _ = fast_products(public, weights, factors, fixed, workers=1)
    assert [private.decrypt(c) for c in products] == [private.decrypt(c) for c in fast]


def test_two_processes_give_the_same_plaintexts(keypair_512):
    public, private = keypair_512
    rng = np.random.default_rng(7)
    weights_plain, weights, factors, fixed = problem(public, rng, 9, 6, 30)
    offsets = [0] * 6
    out = encrypted_weighted_sum(public, weights, factors, fixed, offsets, workers=2)
    assert [private.decrypt(c) for c in out] == expected(public, weights_plain, factors, fixed, offsets)


def test_outputs_are_freshly_randomized(keypair_512):
    public, _ = keypair_512
    rng = np.random.default_rng(3)
    _, weights, factors, fixed = problem(public, rng, 2, 3, 10)
    a = encrypted_weighted_sum(public, weights, factors, fixed, [0] * 3, workers=1)
    b = encrypted_weighted_sum(public, weights, factors, fixed, [0] * 3, workers=1)
    assert all(x != y for x, y in zip(a, b))


def test_user_factors():
    assert user_factors([2, 0, 5], [3, 4, 6], 12, 1000) == [72, 0, 360]


def test_window_size_grows_with_reuse():
    assert window_size(0, 10) == 1
    assert window_size(34, 1) <= window_size(34, 100) <= window_size(34, 10000)


def test_bad_method_and_shapes(keypair_512):
    public, _ = keypair_512
    with pytest.raises(ValueError, match="method"):
        encrypted_weighted_sum(public, [1], [1], [[1]], [0], method="quick")
    with pytest.raises(ValueError, match="weights"):
        encrypted_weighted_sum(public, [1, 2], [1], [[1]], [0])
    with pytest.raises(ValueError, match="workers"):
        fast_products(public, [1], [1], [[1]], workers=0)


@settings(max_examples=15)
@given(
    shape=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    seed=st.integers(0, 2**32 - 1),
    bits=st.integers(0, 80),
)
def test_fast_equals_straightforward_property(keypair_512, shape, seed, bits):
    public, private = keypair_512
    users, d = shape
    rng = np.random.default_rng(seed)
    _, weights, factors, fixed = problem(public, rng, users, d, bits)
    fast, _ = fast_products(public, weights, factors, fixed, workers=1)
    slow = straightforward_products(public, weights, factors, fixed)
    assert [private.decrypt(c) for c in fast] == [private.decrypt(c) for c in slow]
