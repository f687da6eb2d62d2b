"""Budgets -> sampling rates: exact never overspends and is within 0.1% of the best rate; SCF's
overspending is counted; infeasible budgets are handled as asked."""

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import uldp.accountants.personalized.rate_search as sampling_rates
from uldp.accountants.personalized.budgets import sample_budgets
from uldp.accountants.personalized.rate_search import (
    GRID_RATIO,
    SCF_EXACT_CHECK_LIMIT,
    epsilon_table,
    feasible_range,
    fit_scf,
    rate_grid,
)
from uldp.accountants.personalized.record_rates import (
    CAPPED,
    EXCLUDED_HIGH,
    EXCLUDED_LOW,
    OK,
    OVERSPENT,
    POSSIBLY_OVERSPENT,
    check_budgets,
    personalize,
)
from uldp.accountants.personalized.record_spend import EpsilonCurve, RecordSampledFL

RUNS = {
    "calibrated": RecordSampledFL(12.02, 10, 50, 1.0),  # largest budget 10 at q = 1
    "noisy-clients": RecordSampledFL(1.0, 50, 50, 0.5, "untrusted"),  # epsilon*(1e-6) > 0
    "server": RecordSampledFL(2.0, 10, 50, 0.5, "server"),
}
CURVES = {name: EpsilonCurve(run, 1e-5) for name, run in RUNS.items()}
FEASIBLE = {name: feasible_range(curve, 1e-6, 1.0) for name, curve in CURVES.items()}


def _budgets_near_the_range(draw, name):
    f = FEASIBLE[name]
    low = max(f.epsilon_min, 1e-3)
    tiny = draw(st.lists(st.floats(0, 1e-3), max_size=5))  # just above the feasible minimum
    spread = draw(st.lists(st.floats(np.log(low), np.log(f.epsilon_max * 1.2)), min_size=1, max_size=40))
    return np.array([low * (1 + t) for t in tiny] + list(np.exp(spread)))


@st.composite
def cases(draw):
    name = draw(st.sampled_from(sorted(RUNS)))
    return name, _budgets_near_the_range(draw, name)


# Each example runs a 1e-9 bisection (tens of curve evaluations whatever the number of budgets):
# 10 examples of up to 45 budgets each, over the three runs, keep the suite's time in bounds.
@settings(max_examples=10)
@given(cases())
def test_exact_never_overspends_and_is_within_a_tenth_of_a_percent_of_bisection(case):
    name, budgets = case
    curve = CURVES[name]
    exact = personalize(budgets, curve, method="exact")
    bisect = personalize(budgets, curve, method="bisect", tolerance=1e-9)
    assert np.all(exact.spent <= budgets)
    # The reported epsilon is the exact epsilon of the rate handed out.
    used = exact.q > 0
    np.testing.assert_array_equal(curve(exact.q[used]), exact.spent[used])
    ok = exact.status == OK
    # Bisection's rate is within 1e-9 below the best q*; exact is within 0.1% below q*.
    assert np.all(exact.q[ok] <= bisect.q[ok] + 1e-9)
    assert np.all(exact.q[ok] >= bisect.q[ok] * (1 - 1e-3) - 1e-9)
    # Maximal on its grid: the next grid rate would overspend.
    nxt = exact.q[ok] * GRID_RATIO
    assert np.all(curve(np.minimum(nxt, 1.0)) > budgets[ok])


def test_budgets_a_hair_above_the_feasible_minimum():
    curve = CURVES["noisy-clients"]
    f = FEASIBLE["noisy-clients"]
    assert f.epsilon_min > 0  # this run has a real floor: epsilon*(1e-6) > 0
    budgets = f.epsilon_min * (1 + np.array([0.0, 1e-15, 1e-12, 1e-9, 1e-6, 1e-3]))
    result = personalize(budgets, curve)
    assert np.all(result.status == OK) and np.all(result.spent <= budgets)
    assert result.q[0] == 1e-6 and result.spent[0] == f.epsilon_min
    below = personalize(np.array([f.epsilon_min * (1 - 1e-12)]), curve)
    assert below.status[0] == EXCLUDED_LOW and below.q[0] == 0 and below.spent[0] == 0


# The grid starts at 1e-2, not the default 1e-6: these budgets (0.63 and up) need rates far above
# it (epsilon*(0.01) = 0.061), and each strategy still searches the whole grid, now of 4,609
# rates instead of 13,824, and each takes the strategy it takes on the default grid (`SEARCH`).
TABLE_Q_MIN = 1e-2


@pytest.fixture(scope="module")
def calibrated_table():
    """The whole exact grid of the calibrated run (most of the cost): tabulated once for every
    search strategy compared with it."""
    return epsilon_table(CURVES["calibrated"], TABLE_Q_MIN, 1.0)


@pytest.mark.parametrize("name,records", [("group-3", 500), ("group-100", 2000), ("individual-1000", 30_000)])
def test_all_exact_search_strategies_agree_with_the_whole_table(calibrated_table, name, records):
    curve = CURVES["calibrated"]
    budgets = sample_budgets(name, records, seed=5)
    table = calibrated_table
    assert table.monotone
    searched = personalize(budgets, curve, q_min=TABLE_Q_MIN)
    tabulated = personalize(budgets, curve, q_min=TABLE_Q_MIN, table=table)
    assert np.all(searched.status == OK)
    np.testing.assert_array_equal(searched.q, tabulated.q)
    np.testing.assert_array_equal(searched.spent, tabulated.spent)
    assert searched.evaluations < table.qs.size  # cheaper than tabulating everything
    assert searched.details["search"] == SEARCH[name]


SEARCH = {
    "group-3": "bisection on the grid index",
    "group-100": "guided probes on the grid index",
    "individual-1000": "the grid between the budgets' brackets, tabulated",
}


class BumpyCurve:
    """A curve that dips after q = 0.3 (as float rounding could make a computed curve do)."""

    def __init__(self):
        self.evaluations = 0

    def __call__(self, qs):
        qs = np.atleast_1d(np.asarray(qs, dtype=float))
        self.evaluations += qs.size
        return 10 * qs - np.where((qs > 0.3) & (qs < 0.31), 0.5, 0.0)


@pytest.mark.parametrize("extra", [0, 150, 3000])  # each exact search strategy in turn
def test_a_non_monotone_curve_only_moves_answers_down(extra):
    curve = BumpyCurve()
    spread = np.random.default_rng(extra).uniform(1e-5, 9.9, extra)
    budgets = np.r_[[2.7, 2.85, 3.0, 3.05, 5.0], spread]
    table = epsilon_table(curve, 1e-6, 1.0)
    assert not table.monotone
    for kwargs in ({}, {"table": table}):
        result = personalize(budgets, curve, **kwargs)
        assert np.all(result.spent <= budgets)
        np.testing.assert_array_equal(result.spent, curve(result.q))
        # still within 0.1% of the best rate away from the dip
        clear = (budgets < 2.9) | (budgets > 3.2)
        assert np.all(result.q[clear] >= budgets[clear] / 10 / GRID_RATIO * (1 - 1e-12))
    # 2.7 is met on the dip (q ~ 0.3), but the running maximum keeps the answer below the rise
    # before it, so the rate stays where the budget holds for every smaller q as well.
    assert personalize(budgets, curve, table=table).q[0] <= 0.27


def test_scf_reports_its_fit_and_counts_its_overspending_exactly():
    curve = EpsilonCurve(RecordSampledFL(3.0, 10, 50), 1e-5)
    budgets = sample_budgets("bounded-mix-gauss", 1000, seed=0)  # 660 distinct; 904 overspend
    scf = personalize(budgets, curve, method="scf")
    summary = scf.summary()
    assert 0.99 < summary["r2"] <= 1.0
    truth = curve(scf.q)  # re-account every rate independently
    over = truth > budgets
    assert summary["overspent"] == over.sum() > 0  # a fitted inverse does overspend here
    assert summary["overspend_max"] == pytest.approx((truth - budgets)[over].max())
    # most at small budgets, where e^{aq+b}+c bends away from epsilon*(q)
    assert np.median(budgets[over]) < np.median(budgets)
    exact = personalize(budgets, curve)
    assert exact.summary()["overspent"] == 0 and np.all(exact.spent <= budgets)


@functools.cache
def _crossing() -> tuple[EpsilonCurve, float]:
    """The curve of the reviewer's run and the epsilon where the SCF fit first crosses it: the
    first sign change of fit - curve on a coarse grid, narrowed by bisection on q (the same
    crossing a 20,000-rate scan finds, for a few hundred evaluations)."""
    run = RecordSampledFL(21.34, 10, 50)
    curve = EpsilonCurve(run, 1e-5)
    fit = fit_scf(curve, 1.0)
    qs = np.linspace(0.01, 1, 200)
    side = np.sign(fit(qs) - curve(qs))
    i = np.flatnonzero(np.diff(side))[0]
    lo, hi = qs[i], qs[i + 1]
    for _ in range(40):
        mid = (lo + hi) / 2
        if np.sign(fit(mid) - curve(mid))[0] == side[i]:
            lo = mid
        else:
            hi = mid
    return curve, float(curve(lo)[0])


def _budgets_around_a_crossing(n):
    """n distinct budgets packed within 0.02% of where the SCF fit crosses epsilon*(q): the
    fit's error there is far below the exact grid's resolution, so brackets cannot settle them
    (the reviewer's case)."""
    curve, e = _crossing()
    return curve, np.unique(np.linspace(e * (1 - 2e-4), e * (1 + 2e-4), n))


def test_scf_counts_overspending_exactly_past_twenty_thousand_budgets():
    # Up to SCF_EXACT_CHECK_LIMIT distinct rates (it was 20,000) every one is re-accounted, in one
    # pass whatever their number: 25,000 budgets take the path 2,500 take here.
    assert SCF_EXACT_CHECK_LIMIT >= 25_000
    curve, budgets = _budgets_around_a_crossing(2500)
    scf = personalize(budgets, curve, method="scf")
    assert scf.details["check"] == f"each of the {budgets.size} distinct rates re-accounted exactly"
    truth = EpsilonCurve(curve.run, 1e-5)(scf.q)  # an independent curve, every rate
    over = truth > budgets
    assert 1000 < over.sum() < budgets.size
    assert scf.summary()["overspent"] == scf.summary()["overspent_up_to"] == over.sum()
    assert np.array_equal(scf.status == OVERSPENT, over) and np.all(scf.status[~over] == OK)
    np.testing.assert_array_equal(scf.spent, truth)


# The two tests below bracket the rates on the exact grid. At its default ratio (1.001) the grid
# holds 13,824 rates and costs most of the test; a 1.01 grid (1,390 rates) takes the same path,
# its brackets still hold and still settle most budgets, and the overspending is still counted.
COARSE_GRID = 1.01


def test_scf_beyond_the_exact_limit_brackets_then_re_accounts_the_straddlers(monkeypatch):
    monkeypatch.setattr(sampling_rates, "SCF_EXACT_CHECK_LIMIT", 500)
    curve = EpsilonCurve(RecordSampledFL(3.0, 10, 50), 1e-5)
    budgets = sample_budgets("individual-1000", 3000, seed=1)
    scf = personalize(budgets, curve, method="scf", grid_ratio=COARSE_GRID)
    assert "bracketed" in scf.details["check"] and "limit" not in scf.details["check"]
    truth = curve(scf.q)
    assert np.all(scf.spent_lower <= truth) and np.all(truth <= scf.spent)  # brackets hold
    over = truth > budgets
    summary = scf.summary()
    assert summary["overspent"] == summary["overspent_up_to"] == over.sum() > 0
    assert np.array_equal(scf.status == OVERSPENT, over)


def test_scf_past_the_limit_says_at_least_and_up_to(monkeypatch):
    monkeypatch.setattr(sampling_rates, "SCF_EXACT_CHECK_LIMIT", 200)
    curve, budgets = _budgets_around_a_crossing(300)  # 300 straddlers > 200
    scf = personalize(budgets, curve, method="scf", grid_ratio=COARSE_GRID)
    assert "limit 200" in scf.details["check"]
    truth = curve(scf.q)
    over = truth > budgets
    summary = scf.summary()
    assert summary["overspent"] <= over.sum() <= summary["overspent_up_to"]
    assert summary["overspent"] < summary["overspent_up_to"]
    maybe = scf.status == POSSIBLY_OVERSPENT
    assert maybe.sum() == summary["overspent_up_to"] - summary["overspent"]
    assert np.all(over[scf.status == OVERSPENT]) and not np.any(over[scf.status == OK])


def test_fit_inverse_undoes_the_fit():
    fit = fit_scf(CURVES["calibrated"], 1.0)
    q = np.linspace(0.05, 1, 20)
    np.testing.assert_allclose(fit.inverse(fit(q)), q, rtol=1e-9)


@pytest.mark.parametrize("policy", ["clamp", "exclude"])
def test_infeasible_budgets_are_counted_and_handled(policy):
    curve = CURVES["noisy-clients"]
    f = FEASIBLE["noisy-clients"]
    budgets = np.array(
        [f.epsilon_min / 2, 0.0, (f.epsilon_min + f.epsilon_max) / 2, f.epsilon_max, f.epsilon_max * 3]
    )
    result = personalize(budgets, curve, infeasible=policy)
    assert result.status.tolist()[:4] == [EXCLUDED_LOW, EXCLUDED_LOW, OK, OK]
    assert result.q[3] == 1.0 and result.spent[3] == f.epsilon_max  # exactly epsilon*(1): q = 1
    if policy == "clamp":
        assert result.status[4] == CAPPED and result.q[4] == 1.0
    else:
        assert result.status[4] == EXCLUDED_HIGH and result.q[4] == 0 and result.spent[4] == 0
    assert result.q[0] == result.q[1] == 0 and np.all(result.spent <= budgets)


def test_fail_names_the_counts_and_ranges():
    curve = CURVES["noisy-clients"]
    f = FEASIBLE["noisy-clients"]
    with pytest.raises(ValueError, match=r"2 budget\(s\) in \[.*\] below .*1 budget\(s\) .* above"):
        personalize(np.array([0.0, f.epsilon_min / 2, 1e6]), curve, infeasible="fail")


def test_a_lower_cap_caps_the_rates():
    curve = CURVES["calibrated"]
    budgets = sample_budgets("group-100", 500, seed=0)
    result = personalize(budgets, curve, q_cap=0.2)
    assert result.q.max() == 0.2 and np.all(result.spent <= budgets)
    assert result.feasible.epsilon_max == curve(0.2)[0]


def test_grid_ratio_and_ends():
    qs = rate_grid(1e-6, 0.5)
    assert qs[0] == 1e-6 and qs[-1] == 0.5 and np.all(qs[1:] / qs[:-1] <= GRID_RATIO * (1 + 1e-12))


@pytest.mark.parametrize("budgets", [[1.0, -0.5], [np.nan], [np.inf], []])
def test_bad_budgets(budgets):
    with pytest.raises(ValueError, match="budget"):
        check_budgets(np.array(budgets, dtype=float))


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"q_cap": 0.0}, "q cap"),
        ({"q_cap": 1.5}, "q cap"),
        ({"q_min": 0.5, "q_cap": 0.1}, "q min"),
        ({"method": "guess"}, "method"),
        ({"infeasible": "ignore"}, "infeasible"),
    ],
)
def test_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        personalize(np.array([1.0]), CURVES["calibrated"], **kwargs)


def test_scf_budgets_the_fit_never_reaches_get_the_smallest_rate(monkeypatch):
    import uldp.accountants.personalized.record_rates as rates

    floor_at_5 = rates.ScfFit(a=1.0, b=0.0, c=5.0, r2=0.5, qs=np.zeros(0), epsilons=np.zeros(0))
    monkeypatch.setattr(rates, "fit_scf", lambda curve, q_cap, points: floor_at_5)
    result = personalize(np.array([3.0, 7.0]), CURVES["calibrated"], method="scf")
    assert result.q[0] == 1e-6  # 3 <= c: f^{-1}(3) does not exist
    assert result.q[1] == pytest.approx(np.log(2.0))  # f^{-1}(7) = ln(7 - 5)
    np.testing.assert_array_equal(result.spent, CURVES["calibrated"](result.q))
