"""Pairwise masks cancel in the sum and hide each part; blinding and inverses on F_n."""

from __future__ import annotations

import secrets
from itertools import combinations

import gmpy2
import numpy as np
import pytest
from scipy import stats

from uldp.crypto.masking import add_masks, blind, inverse_mod, pairwise_masks


def pair_seeds(silos: int) -> dict[int, dict[int, bytes]]:
    seeds = {s: {} for s in range(silos)}
    for a, b in combinations(range(silos), 2):
        seeds[a][b] = seeds[b][a] = secrets.token_bytes(32)
    return seeds


@pytest.mark.parametrize("silos", [2, 3, 5])
def test_masks_cancel_in_the_sum(silos):
    n = gmpy2.next_prime(2**127) * gmpy2.next_prime(2**130)
    seeds = pair_seeds(silos)
    values = [[secrets.randbelow(1000) for _ in range(7)] for _ in range(silos)]
    masked = [add_masks(values[s], pairwise_masks(s, seeds[s], "round/3", 7, n), n) for s in range(silos)]
    for j in range(7):
        assert sum(m[j] for m in masked) % n == sum(v[j] for v in values)
    # a single masked value is not the value
    assert any(masked[0][j] != values[0][j] for j in range(7))


def test_one_silo_masks_look_uniform():
    n = 2**61 - 1
    seeds = pair_seeds(3)
    masks = pairwise_masks(1, seeds[1], "histogram", 3000, n)
    assert stats.kstest(np.array([int(m) for m in masks], dtype=float) / n, "uniform").pvalue > 1e-4


def test_labels_give_fresh_masks():
    n = 2**61 - 1
    seeds = pair_seeds(2)
    assert pairwise_masks(0, seeds[0], "round/0", 4, n) != pairwise_masks(0, seeds[0], "round/1", 4, n)


def test_blinding_and_inverse():
    n = 101 * 103
    blinded = blind([5, 7], [3, 9], n)
    assert blinded == [15, 63]
    inv = inverse_mod(blinded[0], n)
    assert inv * blinded[0] % n == 1
    # blinded count times the inverse of the blinded total recovers n_su / N_u in F_n
    r = 4321
    n_su, total = 3, 8
    weight = r * n_su * inverse_mod(r * total, n) % n
    assert weight * total % n == n_su
    for bad in (0, 101, 103 * 5):
        with pytest.raises(ValueError, match="no inverse"):
            inverse_mod(bad, n)


def test_mask_with_self_refused():
    with pytest.raises(ValueError):
        pairwise_masks(0, {0: b"x" * 32}, "l", 1, 97)
