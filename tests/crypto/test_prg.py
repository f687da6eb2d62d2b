"""The PRG: deterministic per (seed, label, index), uniform on [0, n), units when asked."""

from __future__ import annotations

import secrets

import gmpy2
import numpy as np
import pytest
from scipy import stats

from uldp.crypto import prg
from uldp.crypto.prg import field_element, field_elements, unit_elements


def test_deterministic_and_separated_by_seed_label_index():
    seed = secrets.token_bytes(32)
    n = 2**255 + 95
    assert field_elements(seed, "a", 5, n) == field_elements(seed, "a", 5, n)
    assert field_elements(seed, "a", 5, n) != field_elements(seed, "b", 5, n)
    assert field_elements(seed, "a", 5, n) != field_elements(secrets.token_bytes(32), "a", 5, n)
    assert field_element(seed, "a", 3, n) == field_elements(seed, "a", 5, n)[3]


def test_values_below_modulus_and_uniform():
    # A modulus just above a power of two: `x mod n` would put half the mass on [0, 2^k - n).
    n = 2**64 + 2**63 + 1
    values = np.array([int(v) for v in field_elements(b"s" * 32, "u", 4000, n)], dtype=float)
    assert values.max() < n and values.min() >= 0
    assert stats.kstest(values / n, "uniform").pvalue > 1e-4


def test_small_modulus_hits_every_value_evenly():
    counts = np.bincount([int(v) for v in field_elements(b"k" * 32, "c", 6000, 6)], minlength=6)
    assert stats.chisquare(counts).pvalue > 1e-4


def test_units_are_coprime_and_nonzero():
    n = 3 * 5 * 7 * 11  # many non-units, so the rejection is exercised
    units = unit_elements(b"z" * 32, "m", 200, n)
    assert len(units) == 200
    assert all(u != 0 and gmpy2.gcd(u, n) == 1 for u in units)


def test_no_python_random_module():
    assert "random" not in vars(prg)


def test_short_seed_refused():
    with pytest.raises(ValueError, match="seed"):
        field_element(b"short", "x", 0, 97)
