"""Algorithm 5 Encode/Decode: round trips within P / 2, and refusals instead of wrapping."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from uldp.crypto.encoding import DEFAULT_N_MAX, Encoding, largest_n_max, lcm_up_to

N = 2**521 - 1  # a stand-in odd modulus, far larger than the values used here
FINITE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


def test_lcm_up_to():
    assert [lcm_up_to(k) for k in (1, 2, 3, 4, 10)] == [1, 2, 6, 12, 2520]
    c = lcm_up_to(60)
    assert all(c % k == 0 for k in range(1, 61)) and c % 61 != 0
    with pytest.raises(ValueError):
        lcm_up_to(0)


@given(x=FINITE)
def test_round_trip_within_half_precision(x):
    enc = Encoding(precision=1e-6, n_max=10, value_bound=1e6)
    (y,) = enc.encode([x], N)
    assert 0 <= y < N
    one = enc.max_fixed  # the largest |round(x / P)| of one value
    assert abs(enc.decode(y, N, scaled=False, bound=one) - x) <= 0.5e-6 + 1e-12 * abs(x)
    # the aggregate carries the C_LCM factor: Decode divides it out
    assert enc.decode(y * enc.c_lcm % N, N, bound=one * enc.c_lcm) == pytest.approx(
        enc.decode(y, N, scaled=False, bound=one)
    )


@given(
    values=st.lists(FINITE, min_size=1, max_size=6),
    totals=st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=6),
)
def test_weighted_sum_with_c_lcm_decodes_exactly(values, totals):
    # sum_u E_u * C_LCM / N_u is an integer because every N_u <= N_max divides C_LCM (D.4 (1)).
    enc = Encoding(precision=1e-6, n_max=12, value_bound=1e6)
    pairs = list(zip(values, totals))
    fixed = enc.fixed_point([v for v, _ in pairs])
    field_sum = sum(e % N * (enc.c_lcm // t) for e, (_, t) in zip(fixed, pairs)) % N
    exact = sum(e / t for e, (_, t) in zip(fixed, pairs)) * 1e-6
    bound = enc.aggregate_bound(users=len(pairs), silos=0)
    assert enc.decode(field_sum, N, bound=bound) == pytest.approx(exact, rel=1e-12, abs=1e-15)


def test_negative_values_live_in_the_upper_half():
    enc = Encoding(precision=0.5, n_max=1, value_bound=10)
    assert enc.encode([-1.0, 1.0, 0.0], 101) == [99, 2, 0]
    assert enc.decode(99, 101, bound=enc.max_fixed) == -1.0


@pytest.mark.parametrize("bad", [[math.nan], [math.inf], [-math.inf], [2e6]])
def test_values_outside_the_bound_are_refused(bad):
    enc = Encoding(precision=1e-6, n_max=10, value_bound=1e6)
    with pytest.raises(ValueError, match="non-finite|exceeds"):
        enc.encode(bad, N)


def test_capacity_check():
    enc = Encoding(precision=1e-10, n_max=2000, value_bound=1e10)
    # Appendix D.4 example: 3072-bit n, P = 1e-10, N_max = 2000, values in [-1e10, 1e10].
    enc.check_capacity(2**3071 + 1, users=1000, silos=100)
    with pytest.raises(ValueError, match="too small"):
        enc.check_capacity(2**1023 + 1, users=10, silos=3)
    assert enc.c_lcm < 10**867


def test_count_above_n_max_refused():
    enc = Encoding(n_max=50)
    enc.check_count(50)
    with pytest.raises(ValueError, match="exceeds N_max = 50"):
        enc.check_count(51)
    with pytest.raises(ValueError, match=">= 0"):
        enc.check_count(-1)


def test_decode_refuses_wrapped_values():
    enc = Encoding(precision=1e-3, n_max=4, value_bound=1.0)
    bound = enc.aggregate_bound(users=2, silos=1)
    assert enc.decode(bound, N, bound=bound) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="outside the decodable range"):
        enc.decode(N // 3, N, bound=bound)


def test_decode_requires_a_bound():
    # Without a bound a wrapped value (here N // 2 + 5, i.e. -(N // 2 - 4)) would decode to garbage.
    enc = Encoding(precision=1e-3, n_max=4, value_bound=1.0)
    wrapped = N // 2 + 5
    with pytest.raises(TypeError, match="bound"):
        enc.decode(wrapped, N, scaled=False)
    with pytest.raises(TypeError, match="bound"):
        enc.decode_all([wrapped], N)
    with pytest.raises(ValueError, match="bound"):
        enc.decode(wrapped, N, bound=None)
    with pytest.raises(ValueError, match="outside the decodable range"):
        enc.decode_all([1, wrapped], N, bound=enc.aggregate_bound(users=3, silos=2))
    assert enc.decode_all(
        [enc.c_lcm, N - 2 * enc.c_lcm], N, bound=enc.aggregate_bound(users=3, silos=2)
    ).tolist() == pytest.approx([1e-3, -2e-3])


@pytest.mark.parametrize("bits,users,silos", [(512, 10, 3), (1024, 100, 3), (2048, 40, 5)])
def test_largest_n_max_is_the_largest_that_fits(bits, users, silos):
    n = 2**bits - 1
    k = largest_n_max(n, users, silos)
    assert 0 < k < DEFAULT_N_MAX
    Encoding(n_max=k).check_capacity(n, users, silos)
    with pytest.raises(ValueError):
        Encoding(n_max=k + 1).check_capacity(n, users, silos)


def test_bad_parameters():
    with pytest.raises(ValueError, match="precision"):
        Encoding(precision=0)
    with pytest.raises(ValueError, match="value bound"):
        Encoding(value_bound=math.inf)
    assert np.array_equal(Encoding(precision=1.0, n_max=1, value_bound=5).fixed_point([[1.4, -2.6]]), [1, -3])
