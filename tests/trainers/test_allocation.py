"""Record allocation to users and silos (ULDP-FL §5.1, and the power allocation of subject-level
DP-FL §4.2): counts, skew, shares, determinism."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from uldp.accountants.subject.holdings import allocate_items
from uldp.errors import DataError
from uldp.trainers.data import allocation as al

#: The alpha each method takes: only power has one.
ALPHA = {"power": 4.0}


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
    users, silos = al.allocate_free(
        n_records, n_users=n_users, n_silos=n_silos, method=method, rng=rng(seed), alpha=ALPHA.get(method)
    )
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
        alpha=ALPHA.get(method),
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

    def draw(seed):
        return al.allocate_free(
            1_000,
            n_users=50,
            n_silos=5,
            method=method,
            rng=rng(seed),
            labels=labels,
            labels_per_user=2,
            alpha=ALPHA.get(method),
        )

    first, again, other = draw(11), draw(11), draw(12)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not np.array_equal(first[0], other[0])
    assert not np.array_equal(first[1], other[1])


# --- power allocation (subject-level DP-FL §4.2: subjects = users, members = silos) ------------


def user_silo_table(users: np.ndarray, silos: np.ndarray, n_users: int, n_silos: int) -> np.ndarray:
    table = np.zeros((n_users, n_silos), dtype=np.int64)
    np.add.at(table, (users, silos), 1)
    return table


def expected_power_shares(n_silos: int, alpha: float) -> np.ndarray:
    """Rank j's probability F((j+1)/N) - F(j/N), F(x) = x^alpha."""
    return np.diff((np.arange(n_silos + 1) / n_silos) ** alpha)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 4.0, 16.0])
def test_power_ranks_follow_the_power_distribution(alpha):
    n, n_silos = 400_000, 8
    ranks = al.power_ranks(n, n_silos, alpha, rng(4))
    assert ranks.dtype == np.int64 and ranks.min() >= 0 and ranks.max() < n_silos
    shares = np.bincount(ranks, minlength=n_silos) / n
    expected = expected_power_shares(n_silos, alpha)
    # within 5 standard deviations of a multinomial share
    np.testing.assert_array_less(np.abs(shares - expected), 5 * np.sqrt(expected * (1 - expected) / n) + 1e-9)


@pytest.mark.parametrize("alpha", [0.5, 4.0, 16.0])
def test_power_shares_of_one_big_user_match_allocate_items(alpha):
    # accountants.subject.holdings.allocate_items gives the expected counts, largest first
    n, n_silos = 200_000, 8
    users, silos = al.allocate_free(n, n_users=1, n_silos=n_silos, method="power", rng=rng(9), alpha=alpha)
    assert np.all(users == 0)
    shares = np.sort(np.bincount(silos, minlength=n_silos))[::-1] / n
    expected = np.zeros(n_silos)
    counts = allocate_items(n, n_silos, "power", alpha)
    expected[: len(counts)] = np.array(counts) / n
    np.testing.assert_array_less(
        np.abs(shares - expected), 5 * np.sqrt(expected * (1 - expected) / n) + 2 / n
    )


def test_power_with_alpha_one_spreads_each_user_evenly():
    n_users, per_user, n_silos = 200, 40, 16
    users, silos = al.allocate_free(
        n_users * per_user, n_users=n_users, n_silos=n_silos, method="power", rng=rng(2), alpha=1.0
    )
    table = user_silo_table(users, silos, n_users, n_silos)
    u_users, u_silos = al.allocate_free(
        n_users * per_user, n_users=n_users, n_silos=n_silos, method="uniform", rng=rng(2)
    )
    uniform = user_silo_table(u_users, u_silos, n_users, n_silos)
    # a user's records hit the silos as often as under the uniform allocation (silo of each
    # record equally likely): the same largest share and the same number of silos used
    largest = (table.max(axis=1) / per_user).mean()
    assert largest == pytest.approx((uniform.max(axis=1) / per_user).mean(), abs=0.02)
    assert largest < 0.2
    assert (table > 0).sum(axis=1).mean() == pytest.approx((uniform > 0).sum(axis=1).mean(), abs=0.5)
    # every silo gets about a 16th of the records
    assert np.abs(table.sum(axis=0) / table.sum() - 1 / n_silos).max() < 0.02


def test_power_concentrates_each_users_records_as_alpha_grows():
    n_users, per_user, n_silos = 200, 40, 16
    largest = {}
    for alpha in (1.0, 4.0, 16.0):
        users, silos = al.allocate_free(
            n_users * per_user, n_users=n_users, n_silos=n_silos, method="power", rng=rng(8), alpha=alpha
        )
        table = user_silo_table(users, silos, n_users, n_silos)
        assert np.array_equal(table.sum(axis=1), np.full(n_users, per_user))
        largest[alpha] = (table.max(axis=1) / per_user).mean()
        # the last rank's expected share, 1 - (15/16)^alpha, is a floor for the largest share
        assert largest[alpha] > expected_power_shares(n_silos, alpha)[-1] - 0.02
    assert largest[1.0] + 0.05 < largest[4.0] and largest[4.0] + 0.2 < largest[16.0]
    assert largest[16.0] > 0.6
    # each user has its own order of silos: the favourite silos are not all the same
    assert len(set(table.argmax(axis=1).tolist())) > n_silos // 2


@pytest.mark.parametrize("alpha", [al.ALPHA_MIN, al.ALPHA_MAX])
def test_power_at_the_ends_of_alpha_puts_a_user_in_one_silo(alpha):
    users, silos = al.allocate_free(4_000, n_users=20, n_silos=8, method="power", rng=rng(1), alpha=alpha)
    table = user_silo_table(users, silos, 20, 8)
    assert table.max(axis=1).sum() / 4_000 > 0.99


@given(
    n_records=st.integers(1, 3_000),
    n_users=st.integers(1, 200),
    n_silos=st.integers(1, 20),
    alpha=st.floats(-3.0, 3.0).map(lambda e: min(max(10.0**e, al.ALPHA_MIN), al.ALPHA_MAX)),
    seed=st.integers(0, 2**32 - 1),
)
def test_power_draws_silos_in_range_and_leaves_the_users_of_uniform(n_records, n_users, n_silos, alpha, seed):
    users, silos = al.allocate_free(
        n_records, n_users=n_users, n_silos=n_silos, method="power", rng=rng(seed), alpha=alpha
    )
    assert users.shape == silos.shape == (n_records,)
    assert silos.dtype == np.int64 and silos.min() >= 0 and silos.max() < n_silos
    # records are dealt to users as uniform deals them: the silo draw changes no user's count
    uniform_users, _ = al.allocate_free(
        n_records, n_users=n_users, n_silos=n_silos, method="uniform", rng=rng(seed)
    )
    assert np.array_equal(users, uniform_users)
    per_user = np.bincount(users, minlength=n_users)
    assert per_user.sum() == n_records and per_user.max() - per_user.min() <= 1


def test_power_keeps_labels_per_user_and_even_counts():
    labels = np.repeat(np.arange(10), 400)
    users, silos = al.allocate_free(
        len(labels),
        n_users=80,
        n_silos=6,
        method="power",
        rng=rng(3),
        labels=labels,
        labels_per_user=2,
        alpha=8.0,
    )
    held = np.zeros((80, 10), dtype=bool)
    held[users, labels] = True
    assert held.sum(axis=1).max() <= 2
    assert silos.min() >= 0 and silos.max() < 6


@pytest.mark.parametrize(
    ("method", "alpha", "message"),
    [
        ("power", None, "^--alpha is required by --allocation power"),
        ("uniform", 2.0, r"^--alpha applies to --allocation power \(got --allocation uniform\)"),
        ("zipf", 2.0, "^--alpha applies to --allocation power"),
        ("power", 0.0, r"^--alpha must be a number in \[0.001, 1000\], got 0.0"),
        ("power", 1e-4, "^--alpha must be a number in"),
        ("power", 1001, "^--alpha must be a number in"),
        ("power", float("nan"), "^--alpha must be a number in"),
        ("power", float("inf"), "^--alpha must be a number in"),
        ("power", True, "^--alpha must be a number in"),
        ("power", "2", "^--alpha must be a number in"),
    ],
)
def test_bad_alpha_is_a_data_error_naming_the_option(method, alpha, message):
    with pytest.raises(DataError, match=message):
        al.allocate_free(100, n_users=10, n_silos=4, method=method, rng=rng(), alpha=alpha)


def test_alpha_at_the_ends_of_its_range_and_as_an_integer_is_accepted():
    assert al.check_alpha("power", al.ALPHA_MIN) == 1e-3
    assert al.check_alpha("power", al.ALPHA_MAX) == 1e3
    assert al.check_alpha("power", np.int64(4)) == 4.0 and isinstance(al.check_alpha("power", 4), float)
    assert al.check_alpha("uniform", None) is None


def test_power_on_fixed_silos_is_refused():
    silos = np.repeat(np.arange(4), 50)
    with pytest.raises(DataError, match="^--allocation power is not available .* fixed by the data"):
        al.allocate_fixed(silos, n_users=10, n_silos=4, method="power", rng=rng())


def test_describe_records_alpha_for_power_only():
    power = al.describe("power", fixed_silos=False, labels_per_user=None, seed=3, alpha=4)
    assert power["method"] == "power" and power["alpha"] == 4.0 and power["silos"] == "allocated"
    assert power["alpha_records"] is power["alpha_silos"] is power["main_silo_share"] is None
    other = al.describe("power", fixed_silos=False, labels_per_user=None, seed=3, alpha=16)
    assert repr(sorted(power.items())) != repr(sorted(other.items()))  # checkpoints keep them apart
    # the other allocations' records are as before (no alpha key), so are checkpoints keyed on them
    assert "alpha" not in al.describe("zipf", fixed_silos=False, labels_per_user=None, seed=3)
