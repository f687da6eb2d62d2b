"""The rPDP-FL budget presets: seeded, clipped, and shaped as the experiments describe."""

import numpy as np
import pytest

from uldp.accountants.personalized.budgets import BUDGET_RANGE, DISTRIBUTIONS, describe, sample_budgets


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_presets_are_seeded_and_clipped(name):
    a, b = sample_budgets(name, 5000, seed=3), sample_budgets(name, 5000, seed=3)
    assert np.array_equal(a, b) and a.shape == (5000,)
    assert a.min() >= BUDGET_RANGE[0] and a.max() <= BUDGET_RANGE[1]
    assert not np.array_equal(a, sample_budgets(name, 5000, seed=4))
    assert "clipped to [0.1, 10]" in describe(name)


@pytest.mark.parametrize(
    "name,levels,shares",
    [
        ("three-levels", [0.1, 1.0, 5.0], [0.7, 0.2, 0.1]),
        ("group-3", [1.0, 2.0, 3.0], [0.54, 0.37, 0.09]),
    ],
)
def test_levels_have_their_shares(name, levels, shares):
    budgets = sample_budgets(name, 40_000, seed=0)
    values, counts = np.unique(budgets, return_counts=True)
    assert values.tolist() == levels
    np.testing.assert_allclose(counts / budgets.size, shares, atol=0.01)


def test_group_100_is_one_hundred_even_groups():
    budgets = sample_budgets("group-100", 1000, seed=0)
    values, counts = np.unique(budgets, return_counts=True)
    np.testing.assert_allclose(values, np.linspace(1.0, 5.95, 100))
    assert set(counts.tolist()) == {10}
    assert not np.all(np.diff(budgets) >= 0)  # shuffled, not sorted by group


@pytest.mark.parametrize(
    "name,means,stds",
    [
        ("individual-1000", [1.0, 2.0, 5.0], [0.1, 0.2, 0.5]),
        ("bounded-mix-gauss", [0.1, 1.0, 5.0], [0.05, 0.1, 0.5]),
    ],
)
def test_mixtures_have_their_components(name, means, stds):
    budgets = sample_budgets(name, 100_000, seed=1)
    assert np.unique(budgets).size > 90_000 or name == "bounded-mix-gauss"  # clipping at 0.1 ties some
    # Each component keeps 99.7% of its records within 3 standard deviations of its mean
    # (windows that do not overlap for these means).
    near = [np.abs(budgets - m) < 3 * s for m, s in zip(means, stds)]
    shares = [n.mean() for n in near]
    np.testing.assert_allclose(shares, [0.7, 0.2, 0.1], atol=0.01)
    for m, s, n in zip(means, stds, near):
        inside = budgets[n]
        if m - 3 * s > BUDGET_RANGE[0]:  # unclipped components: mean and spread as specified
            assert inside.mean() == pytest.approx(m, abs=0.02 * m)
            assert inside.std() == pytest.approx(s, rel=0.05)


def test_bounded_pareto_is_pareto_4_plus_a_tenth():
    budgets = sample_budgets("bounded-pareto", 200_000, seed=2)
    # Lomax(4) + 0.1 has mean 1/3 + 0.1 and median 2^(1/4) - 1 + 0.1.
    assert budgets.mean() == pytest.approx(1 / 3 + 0.1, rel=0.02)
    assert np.median(budgets) == pytest.approx(2**0.25 - 1 + 0.1, rel=0.02)


def test_bad_requests():
    with pytest.raises(ValueError, match="distribution must be one of"):
        sample_budgets("uniform", 10)
    with pytest.raises(ValueError, match="records"):
        sample_budgets("group-3", 0)
