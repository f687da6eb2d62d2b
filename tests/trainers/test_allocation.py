"""Record allocation to users and silos (ULDP-FL §5.1): counts, skew, shares, determinism."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from uldp.trainers.data import allocation as al


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_zipf_weights_follow_the_power_law():
    weights = al.zipf_weights(100, 0.5)
    assert weights.sum() == pytest.approx(1.0)
    assert np.all(np.diff(weights) < 0)
    # p_1 / p_r = r^alpha
    assert weights[0] / weights[99] == pytest.approx(100**0.5)
    assert al.zipf_weights(5, 2.0)[0] == pytest.approx(1 / sum(r**-2.0 for r in range(1, 6)))


@given(
    total=st.integers(0, 10_000),
    weights=st.lists(st.floats(0.0, 100.0), min_size=1, max_size=50),
    seed=st.integers(0, 2**32 - 1),
)
def test_proportional_split_adds_up_and_stays_within_one(total, weights, seed):
    shares = al.proportional_split(total, np.array(weights), rng(seed))
    assert shares.sum() == total
    w = np.array(weights) if sum(weights) > 0 else np.ones(len(weights))
    exact = total * w / w.sum()
    assert np.all(shares >= np.floor(exact)) and np.all(shares <= np.ceil(exact) + 1e-9)


@given(n_records=st.integers(0, 5_000), n_users=st.integers(1, 300), seed=st.integers(0, 2**32 - 1))
def test_uniform_counts_are_even(n_records, n_users, seed):
    counts = al.uniform_counts(n_records, n_users, rng(seed))
    assert counts.sum() == n_records
    assert counts.max() - counts.min() <= 1


@given(
    n_records=st.integers(1, 3_000),
    n_users=st.integers(1, 200),
    n_silos=st.integers(1, 8),
    method=st.sampled_from(al.ALLOCATIONS),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_record_gets_a_user_and_a_silo(n_records, n_users, n_silos, method, seed):
    users, silos = al.allocate_free(n_records, n_users=n_users, n_silos=n_silos, method=method, rng=rng(seed))
    assert users.shape == silos.shape == (n_records,)
    assert users.dtype == silos.dtype == np.int64
    assert users.min() >= 0 and users.max() < n_users
    assert silos.min() >= 0 and silos.max() < n_silos
    if n_records >= n_users:  # no user is left without records
        assert np.bincount(users, minlength=n_users).min() >= 1


def test_uniform_spreads_users_and_silos_evenly():
    users, silos = al.allocate_free(5_000, n_users=100, n_silos=5, method="uniform", rng=rng())
    per_user = np.bincount(users, minlength=100)
    per_silo = np.bincount(silos, minlength=5)
    assert per_user.max() - per_user.min() <= 1 and per_user.sum() == 5_000
    assert per_silo.max() - per_silo.min() <= 1
    # silos are drawn independently of users: a user's records hit ~ every silo equally
    counts = np.zeros((100, 5))
    np.add.at(counts, (users, silos), 1)
    assert counts.max(axis=1).sum() / 5_000 < 0.4


def test_zipf_records_per_user_are_skewed_as_the_law_says():
    n, users = 40_000, 100
    counts = al.zipf_counts(n, users, al.ALPHA_RECORDS, rng(3))
    assert counts.sum() == n and counts.min() >= 1
    expected = 1 + (n - users) * al.zipf_weights(users, al.ALPHA_RECORDS)
    # the 10 heaviest users (ranks 1-10) hold what the law predicts, within 2 points
    assert counts[:10].sum() / n == pytest.approx(expected[:10].sum() / n, abs=0.02)
    uniform = al.uniform_counts(n, users, rng(3))
    assert np.sort(counts)[-10:].sum() > 2 * np.sort(uniform)[-10:].sum()


def test_zipf_silos_put_each_users_records_by_rank():
    n, users, silos_n = 50_000, 50, 5
    users_of, silos_of = al.allocate_free(n, n_users=users, n_silos=silos_n, method="zipf", rng=rng(1))
    counts = np.zeros((users, silos_n))
    np.add.at(counts, (users_of, silos_of), 1)
    shares = np.sort(counts, axis=1)[:, ::-1].sum(axis=0) / n
    np.testing.assert_allclose(shares, al.zipf_weights(silos_n, al.ALPHA_SILOS), atol=0.02)
    # each user has its own order of silos: the main silos are not all the same
    assert len(set(counts.argmax(axis=1).tolist())) > 1


def test_fixed_silos_keep_main_share_and_capacities():
    # HeartDisease's training records per hospital at test_fraction 0.2
    capacity = np.array([242, 208, 37, 104])
    silos = np.repeat(np.arange(4), capacity)
    generator = rng(7)
    users = al.allocate_fixed(silos, n_users=100, n_silos=4, method="zipf", rng=generator)
    counts = np.zeros((100, 4), dtype=int)
    np.add.at(counts, (users, silos), 1)
    assert counts.sum() == capacity.sum() and np.all(counts.sum(axis=0) == capacity)
    per_user = counts.sum(axis=1)
    assert per_user.min() >= 1
    share = counts.max(axis=1).sum() / per_user.sum()
    assert share == pytest.approx(al.MAIN_SILO_SHARE, abs=0.05)


def test_fixed_silos_with_room_give_every_user_exactly_its_main_share():
    silos = np.repeat(np.arange(4), 2_000)
    counts = np.array([400, 150, 90, 40, 20, 10, 5])
    counts = np.concatenate([counts, np.ones(8_000 - counts.sum(), dtype=int)])
    users = al.users_in_fixed_silos(silos, counts, 4, 0.8, rng(2))
    table = np.zeros((len(counts), 4), dtype=int)
    np.add.at(table, (users, silos), 1)
    assert np.array_equal(table.sum(axis=1), counts)
    for user in range(7):
        assert table[user].max() == round(0.8 * counts[user])


def test_uniform_on_fixed_silos_ignores_silos():
    silos = np.repeat(np.arange(4), [300, 260, 40, 130])
    users = al.allocate_fixed(silos, n_users=10, n_silos=4, method="uniform", rng=rng())
    per_user = np.bincount(users, minlength=10)
    assert per_user.max() - per_user.min() <= 1


@pytest.mark.parametrize("method", al.ALLOCATIONS)
@pytest.mark.parametrize("labels_per_user", [1, 2, 3])
def test_labels_per_user_is_respected_and_no_record_is_lost(method, labels_per_user):
    labels = np.repeat(np.arange(10), 500)
    users, silos = al.allocate_free(
        len(labels),
        n_users=100,
        n_silos=5,
        method=method,
        rng=rng(5),
        labels=labels,
        labels_per_user=labels_per_user,
    )
    assert users.shape == labels.shape and users.min() >= 0 and users.max() < 100
    held = np.zeros((100, 10), dtype=bool)
    held[users, labels] = True
    assert held.sum(axis=1).max() <= labels_per_user
    per_user = np.bincount(users, minlength=100)
    if method == "zipf":  # the skew of records per user survives the label constraint
        assert per_user[:10].sum() > 1.5 * per_user[-10:].sum()


def test_labels_per_user_needs_enough_users_to_cover_every_label():
    labels = np.repeat(np.arange(10), 20)
    with pytest.raises(ValueError, match="--labels-per-user"):
        al.allocate_free(
            len(labels), n_users=4, n_silos=2, method="uniform", rng=rng(), labels=labels, labels_per_user=2
        )


def test_unknown_method_names_the_option():
    with pytest.raises(ValueError, match="^--allocation must be one of uniform, zipf"):
        al.record_counts("pareto", 10, 2, 0.5, rng())


@pytest.mark.parametrize("method", al.ALLOCATIONS)
def test_same_seed_same_allocation_other_seed_other(method):
    labels = np.repeat(np.arange(10), 100)
    first = al.allocate_free(
        1_000, n_users=50, n_silos=5, method=method, rng=rng(11), labels=labels, labels_per_user=2
    )
    again = al.allocate_free(
        1_000, n_users=50, n_silos=5, method=method, rng=rng(11), labels=labels, labels_per_user=2
    )
    other = al.allocate_free(
        1_000, n_users=50, n_silos=5, method=method, rng=rng(12), labels=labels, labels_per_user=2
    )
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not np.array_equal(first[0], other[0])
