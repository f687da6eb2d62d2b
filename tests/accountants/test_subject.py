"""Subject-level accounting (Marathe & Kanani §2-3): holdings, horizontal composition, LocalGroupDP."""

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.accountants.account import record_level
from uldp.accountants.events import SubsampledGaussian
from uldp.accountants.subject.holdings import (
    allocate_items,
    holdings_from_pairs,
    read_holdings,
    subject_sampling_rate,
)
from uldp.accountants.subject.horizontal import (
    MECHANISMS,
    FederationRun,
    account_subjects,
    composed_epsilon,
    federation_composition,
    group_noise,
    local_composition,
    max_rounds,
    rule_of_thumb,
    subject_guarantee,
    subject_sensitivity,
    user_ldp_epsilon,
    worst_held,
)

dp_accounting = pytest.importorskip("dp_accounting")

DELTA = 1e-5
RUN = FederationRun(members=16, per_round=16, rounds=100, local_steps=10, q=0.01, sigma=1.0)
INTEGER_ORDERS = [2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 128, 256]


def test_allocation_adds_up_and_follows_the_distribution():
    assert allocate_items(200, 16) == [13] * 8 + [12] * 8
    assert allocate_items(3, 16) == [1, 1, 1]
    assert allocate_items(100, 16, "power", 1.0) == allocate_items(100, 16, "uniform")
    skewed = allocate_items(100, 16, "power", 8.0)
    assert sum(skewed) == 100 and skewed[0] == 40 and len(skewed) < 16  # 1 - (15/16)^8 = 0.40
    with pytest.raises(ValueError):
        allocate_items(10, 4, "zipf")


def test_holdings_count_items_per_member(tmp_path):
    assert holdings_from_pairs([("a", "m1"), ("a", "m2"), ("a", "m2"), ("b", "m1")]) == {
        "a": [2, 1],
        "b": [1],
    }
    path = tmp_path / "h.csv"
    path.write_text("subject,member\na,m1\na,m2\nb,m3\n")
    assert read_holdings(path) == {"a": [1, 1], "b": [1]}
    path.write_text("\ufeffsubject,member\nc,m1\n", encoding="utf-8")  # with a byte-order mark
    assert read_holdings(path) == {"c": [1]}
    path.write_text("subject,member\na,m1\nb\n")
    with pytest.raises(ValueError, match="row 2"):
        read_holdings(path)


@pytest.mark.parametrize(
    "text",
    [
        "subject,member\na,m1\na,m2\na,m2\nb,m1\n",
        "member,subject\nm1,a\nm2,a\nm2,a\nm1,b\n",  # columns the other way round
        "note,Member,Subject\nx,m1,a\ny,m2,a\nz,m2,a\nw,m1,b\n",  # any position, any case
        "subject,member,extra\na,m1,1\na,m2,2\na,m2,3\nb,m1,4\n",
    ],
)
def test_holdings_header_names_the_columns(tmp_path, text):
    path = tmp_path / "h.csv"
    path.write_text(text)
    assert read_holdings(path) == {"a": [2, 1], "b": [1]}


def test_holdings_without_a_recognised_header(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("17,3\n17,4\n18,3\n")  # numeric ids: no header needed, read as subject, member
    assert read_holdings(path) == {"17": [1, 1], "18": [1]}
    for text in ("subject_id,member_id\na,m1\n", "alice,shop1\nalice,shop2\n", "subject\na\n"):
        path.write_text(text)
        with pytest.raises(ValueError, match="--holdings.*subject and member") as err:
            read_holdings(path)
        assert "\n" not in str(err.value)


def test_subject_sampling_rate():
    assert subject_sampling_rate(0.01, 1) == pytest.approx(0.01)
    assert subject_sampling_rate(0.01, 13) == pytest.approx(1 - 0.99**13)
    assert subject_sampling_rate(1.0, 3) == 1.0


def test_one_member_federation_is_the_local_guarantee():
    g = subject_guarantee(RUN, [1], DELTA)
    assert g.federation_epsilon == g.local_epsilon
    assert g.local_epsilon == record_level(SubsampledGaussian(1.0, 0.01, 1000), DELTA).epsilon


def test_horizontal_composition_matches_dp_accounting():
    holding = [3, 2, 1, 1]
    run = FederationRun(16, 3, 50, 10, 0.01, 1.2)
    composition = federation_composition(run, holding)  # the 3 holders with most items each round
    assert sorted(steps for _, steps in composition) == [500, 500, 500]
    ref = dp_accounting.rdp.RdpAccountant(orders=INTEGER_ORDERS)
    ref.compose(
        dp_accounting.ComposedDpEvent(
            [
                dp_accounting.SelfComposedDpEvent(
                    dp_accounting.PoissonSampledDpEvent(1 - 0.99**m, dp_accounting.GaussianDpEvent(1.2)), 500
                )
                for m in (3, 2, 1)
            ]
        )
    )
    ours = composed_epsilon(composition, 1.2, DELTA, orders=",".join(map(str, INTEGER_ORDERS)))
    assert ours == pytest.approx(ref.get_epsilon(DELTA), rel=1e-6)


@pytest.mark.parametrize("holding", [[1] * 4, [3, 2, 1, 1]])  # one mechanism; three composed
def test_pld_composition_is_tighter_than_rdp_and_close(holding):
    composition = federation_composition(FederationRun(16, 4, 50, 10, 0.01, 1.0), holding)
    rdp = composed_epsilon(composition, 1.0, DELTA)
    pld = composed_epsilon(composition, 1.0, DELTA, accountant="pld")
    assert 0.7 * rdp < pld <= rdp


def test_worst_case_composition_is_linear_in_members():
    # s holders every round for R rounds compose like one member for s R rounds
    g = subject_guarantee(RUN, [1] * 16, DELTA)
    assert g.federation_epsilon == pytest.approx(
        record_level(SubsampledGaussian(1.0, 0.01, 16 * 1000), DELTA).epsilon, rel=1e-12
    )


def test_rule_of_thumb_rounds_are_the_papers_and_not_a_bound():
    # §4: 100 rounds (FEMNIST) and 200 (Shakespeare) over 16 members become 25 and 50 rounds
    assert rule_of_thumb(RUN, [1] * 16, DELTA).rounds == 25
    thumb = rule_of_thumb(RUN.with_rounds(200), [1] * 16, DELTA)
    assert thumb.rounds == 50
    assert not thumb.holds and thumb.federation_epsilon > thumb.local_epsilon
    assert thumb.matching_rounds == 200 // 16  # exact: R/s rounds keep the local RDP curve


def test_max_rounds_respects_the_budget():
    rounds = max_rounds(RUN, [1] * 16, 4.0, DELTA)
    steps = lambda r: composed_epsilon(federation_composition(RUN.with_rounds(r), [1] * 16), 1.0, DELTA)
    assert steps(rounds) <= 4.0 < steps(rounds + 1)
    assert max_rounds(RUN, [1] * 16, 4.0, DELTA, federation=False) > rounds


def test_local_group_noise_meets_corollary_3_5():
    previous = 0.0
    for z in (1, 2, 3, 4):
        g = group_noise(z, 4.0, DELTA, 0.01, 1000)
        assert g.item_epsilon == pytest.approx(4.0 / z)
        assert g.item_delta == pytest.approx(DELTA / (z * math.exp((z - 1) * 4.0 / z)))
        eps = record_level(SubsampledGaussian(g.sigma, 0.01, 1000), g.item_delta).epsilon
        assert eps <= g.item_epsilon
        # Theorem 3.4 forwards: the group guarantee is within (E, Delta)
        assert z * eps <= 4.0 + 1e-12 and z * math.exp((z - 1) * eps) * g.item_delta <= DELTA * (1 + 1e-12)
        tighter = record_level(SubsampledGaussian(g.sigma * 0.995, 0.01, 1000), g.item_delta).epsilon
        assert tighter > g.item_epsilon  # sigma_Z is (nearly) the smallest
        assert g.sigma > previous
        previous = g.sigma


def test_bad_runs_are_rejected():
    with pytest.raises(ValueError, match="members per round"):
        FederationRun(4, 5, 10, 1, 0.1, 1.0)
    with pytest.raises(ValueError, match="more than N"):
        local_composition(FederationRun(4, 2, 10, 1, 0.1, 1.0), [1] * 5)


@settings(max_examples=20)
@given(st.integers(1, 16), st.integers(1, 16), st.integers(1, 16), st.integers(1, 3), st.integers(1, 300))
def test_more_members_per_subject_never_lowers_epsilon(k1, k2, s, items, rounds):
    run = FederationRun(16, s, rounds, 5, 0.02, 1.0)
    lo, hi = sorted((k1, k2))
    e_lo = subject_guarantee(run, [items] * lo, DELTA).federation_epsilon
    e_hi = subject_guarantee(run, [items] * hi, DELTA).federation_epsilon
    assert e_hi >= e_lo - 1e-12


@settings(max_examples=20)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=8), st.integers(1, 8), st.integers(1, 200))
def test_federation_never_below_local_and_more_items_never_help(holding, s, rounds):
    run = FederationRun(8, s, rounds, 3, 0.02, 1.5)
    g = subject_guarantee(run, holding, DELTA)
    assert g.federation_epsilon >= g.local_epsilon - 1e-12
    more = subject_guarantee(run, [m + 1 for m in holding], DELTA)
    assert more.federation_epsilon >= g.federation_epsilon - 1e-12


def test_account_subjects_picks_the_worst_and_reuses_alike_holdings():
    run = FederationRun(8, 2, 40, 5, 0.02, 1.0)
    holdings = {"a": [1], "b": [2, 1, 1], "c": [1, 2, 1], "d": [3]}
    report = account_subjects(run, holdings, DELTA, budget=3.0, group_sizes=[2])
    assert report.subjects["b"] == report.subjects["c"]  # same holders once sorted
    for name, holding in holdings.items():
        g = subject_guarantee(run, holding, DELTA)
        assert report.subjects[name].federation_epsilon == g.federation_epsilon
    assert report.worst_subject == max(holdings, key=lambda s: report.subjects[s].federation_epsilon)
    assert report.local_epsilon == subject_guarantee(run, [3], DELTA).local_epsilon  # d's 3 items
    assert report.limits.federation <= report.limits.local and [g.z for g in report.group_noise] == [2]
    with pytest.raises(ValueError, match="budget"):
        account_subjects(run, holdings, DELTA, group_sizes=[2])


def _epsilon(run, holding, rounds, federation=True):
    compose = federation_composition if federation else local_composition
    return composed_epsilon(compose(run.with_rounds(rounds), holding), run.sigma, DELTA)


@pytest.mark.parametrize(
    "rounds, holdings",
    [
        (100, {"wide": [1] * 16, "deep": [3]}),  # deep binds the local limit, wide the federation one
        (1000, {"wide": [1] * 16, "deep": [4]}),  # wide is worst at R, but deep crosses it below 24 rounds
    ],
)
def test_round_limits_hold_for_every_subject(rounds, holdings):
    run = RUN.with_rounds(rounds)
    report = account_subjects(run, holdings, DELTA, budget=4.0)
    limits = report.limits
    for federation, limit in ((False, limits.local), (True, limits.federation)):
        own = {s: max_rounds(run, h, 4.0, delta=DELTA, federation=federation) for s, h in holdings.items()}
        assert limit == min(own.values())
        assert all(_epsilon(run, h, limit, federation) <= 4.0 for h in holdings.values())
        binding = limits.federation_subject if federation else limits.local_subject
        assert own[binding] == limit and _epsilon(run, holdings[binding], limit + 1, federation) > 4.0
    assert report.local_subject == "deep" and report.local_epsilon == report.subjects["deep"].local_epsilon


def test_rule_of_thumb_is_read_for_the_subject_it_binds():
    # deep has the larger federation epsilon but composes with nobody; the pair halves its rounds
    run = FederationRun(16, 2, 100, 10, 0.01, 1.0)
    holdings = {"deep": [4], "pair": [1, 1]}
    report = account_subjects(run, holdings, DELTA)
    assert report.worst_subject == "deep"
    thumb = report.rule_of_thumb
    assert thumb.subject == "pair"
    own = {
        s: max_rounds(run, h, subject_guarantee(run, h, DELTA).local_epsilon, DELTA)
        for s, h in holdings.items()
    }
    assert thumb.matching_rounds == min(own.values()) == own["pair"] < run.rounds
    assert thumb.local_epsilon == report.subjects["pair"].local_epsilon
    assert replace(thumb, subject=None) == rule_of_thumb(run, holdings["pair"], DELTA)
    assert thumb.holds == all(
        _epsilon(run, h, thumb.rounds) <= report.subjects[s].local_epsilon for s, h in holdings.items()
    )


@settings(max_examples=8, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from("abcdef"), st.lists(st.integers(1, 4), min_size=1, max_size=6), min_size=1, max_size=4
    ),
    st.integers(1, 6),
    st.integers(5, 300),
)
def test_limits_are_the_least_over_subjects(holdings, s, rounds):
    run = FederationRun(6, s, rounds, 3, 0.02, 1.0)
    report = account_subjects(run, holdings, DELTA, budget=3.0)
    for federation, limit in ((False, report.limits.local), (True, report.limits.federation)):
        assert limit == min(max_rounds(run, h, 3.0, DELTA, federation=federation) for h in holdings.values())
    assert report.rule_of_thumb.matching_rounds == min(
        max_rounds(run, h, g.local_epsilon, DELTA)
        for h, g in ((holdings[n], report.subjects[n]) for n in holdings)
    )


def test_group_noise_with_a_large_budget_is_computed_in_logs():
    g = group_noise(2, 1000.0, DELTA, 0.01, 100)  # e^((Z-1)E/Z) = e^500: fine in logs
    assert g.item_delta == pytest.approx(math.exp(math.log(DELTA) - math.log(2) - 500.0), rel=1e-12)
    assert 0 < g.item_delta and g.achieved_epsilon <= g.item_epsilon
    with pytest.raises(ValueError, match="--epsilon 2000 with --k 2"):
        group_noise(2, 2000.0, DELTA, 0.01, 100)  # the item delta underflows a float


# --- the other subject-level algorithms (`FederationRun.mechanism`) ---

#: A subject's per-mini-batch sensitivity in units of C at a member holding m of its items,
#: written down here apart from the library: HiGradAvgDP averages the subject's clipped
#: gradients (C), UserLDP clips the whole batch gradient (two such differ by up to 2C),
#: LocalGroupDP and LocalItemDP sum per-item clipped gradients (m C).
SENSITIVITY = {
    "higradavgdp": lambda m: 1.0,
    "userldp": lambda m: 2.0,
    "localgroupdp": lambda m: float(m),
    "localitemdp": lambda m: float(m),
}
ORDERS = ",".join(map(str, INTEGER_ORDERS))


def _reference(parts, delta=DELTA):
    """dp-accounting's RDP epsilon of (rate, multiplier, steps) parts composed."""
    ref = dp_accounting.rdp.RdpAccountant(orders=INTEGER_ORDERS)
    ref.compose(
        dp_accounting.ComposedDpEvent(
            [
                dp_accounting.SelfComposedDpEvent(
                    dp_accounting.PoissonSampledDpEvent(rate, dp_accounting.GaussianDpEvent(multiplier)),
                    steps,
                )
                for rate, multiplier, steps in parts
            ]
        )
    )
    return ref.get_epsilon(delta)


def test_every_mechanism_is_named_with_its_sensitivity():
    assert set(MECHANISMS) == set(SENSITIVITY)
    for mechanism, sensitivity in SENSITIVITY.items():
        assert [subject_sensitivity(mechanism, m) for m in (1, 2, 5)] == [sensitivity(m) for m in (1, 2, 5)]
    with pytest.raises(ValueError, match="mechanism must be one of"):
        FederationRun(4, 2, 10, 1, 0.1, 1.0, "dpsgd")


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_each_mechanisms_composition_matches_dp_accounting(mechanism):
    holding = [3, 2, 2, 1]
    run = FederationRun(16, 3, 50, 10, 0.01, 1.2, mechanism)
    sens = SENSITIVITY[mechanism]
    steps = run.rounds * run.local_steps
    # one member: the busiest holder (3 items); the federation: the 3 busiest each round
    local = _reference([(1 - 0.99**3, 1.2 / sens(3), steps)])
    federation = _reference([(1 - 0.99**m, 1.2 / sens(m), steps) for m in (3, 2, 2)])
    if mechanism in ("localgroupdp", "localitemdp"):
        # the Binomial(m, q) mixture, by RDP m items' own steps at sigma / sqrt(m) (issue 32);
        # the sensitivity-m bound above is kept as the cross-check
        cross_check = (local, federation)
        local = _reference([(0.01, 1.2 / math.sqrt(3), 3 * steps)])
        federation = _reference([(0.01, 1.2 / math.sqrt(m), m * steps) for m in (3, 2, 2)])
    ours_local = composed_epsilon(local_composition(run, holding), run.sigma, DELTA, orders=ORDERS)
    ours_fed = composed_epsilon(federation_composition(run, holding), run.sigma, DELTA, orders=ORDERS)
    assert ours_local == pytest.approx(local, rel=1e-9)
    assert ours_fed == pytest.approx(federation, rel=1e-9)
    g = subject_guarantee(run, holding, DELTA, orders=ORDERS)
    assert (g.local_epsilon, g.federation_epsilon) == (ours_local, ours_fed)
    if mechanism in ("localgroupdp", "localitemdp"):
        assert (g.local_cross_check, g.federation_cross_check) == pytest.approx(cross_check, rel=1e-9)


@pytest.mark.parametrize("rounds, steps, sigma", [(50, 10, 1.2), (3, 1, 0.8), (200, 5, 4.0)])
def test_user_ldp_is_the_unsampled_gaussian_at_half_the_multiplier(rounds, steps, sigma):
    run = FederationRun(16, 4, rounds, steps, 0.01, sigma, "userldp")
    ref = dp_accounting.rdp.RdpAccountant(orders=INTEGER_ORDERS)
    ref.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma / 2), rounds * steps))
    assert user_ldp_epsilon(run, DELTA, orders=ORDERS) == pytest.approx(ref.get_epsilon(DELTA), rel=1e-9)
    # no sampling amplification: never below the subject's local guarantee at any holding
    assert user_ldp_epsilon(run, DELTA) >= subject_guarantee(run, [5], DELTA).local_epsilon
    with pytest.raises(ValueError, match="UserLDP"):
        user_ldp_epsilon(replace(run, mechanism="higradavgdp"), DELTA)


#: Holdings of a few subjects over five members: each subject's item counts at the members holding it.
HOLDINGS = st.dictionaries(
    st.sampled_from("abcdefg"), st.lists(st.integers(1, 4), min_size=1, max_size=5), min_size=1, max_size=5
)


@settings(max_examples=25, deadline=None)
@given(
    HOLDINGS,
    st.integers(1, 5),
    st.integers(1, 60),
    st.sampled_from(MECHANISMS),
    st.sampled_from([{"orders": ORDERS}, {}]),
)
def test_worst_held_is_the_largest_over_every_subject(holdings, s, rounds, mechanism, accounting):
    """Brute force over every subject, whatever `worst_held` prunes (dominated holdings; with the
    default RDP orders, holdings whose grid-order bound is below the largest exact epsilon)."""
    _check_worst_held(holdings, s, rounds, mechanism, accounting)


# PLD apart, with fewer and smaller examples: each subject composes Binomial(m, q) mixture PLDs
# (issue 32), a second or more apiece where the RDP examples take milliseconds, and the brute force
# accounts every subject. Three subjects still give `worst_held` dominated holdings to prune.
SMALL_HOLDINGS = st.dictionaries(
    st.sampled_from("abc"), st.lists(st.integers(1, 3), min_size=1, max_size=3), min_size=2, max_size=3
)


@settings(max_examples=5, deadline=None)
@given(
    SMALL_HOLDINGS,
    st.integers(1, 5),
    st.integers(1, 20),
    st.sampled_from(MECHANISMS),
)
def test_worst_held_is_the_largest_over_every_subject_by_pld(holdings, s, rounds, mechanism):
    _check_worst_held(holdings, s, rounds, mechanism, {"accountant": "pld"})


def _check_worst_held(holdings, s, rounds, mechanism, accounting):
    run = FederationRun(5, s, rounds, 3, 0.02, 1.5, mechanism)
    worst = worst_held(run, holdings, DELTA, **accounting)
    every = {name: subject_guarantee(run, h, DELTA, **accounting) for name, h in holdings.items()}
    assert worst.local_epsilon == max(g.local_epsilon for g in every.values())
    assert worst.federation_epsilon == max(g.federation_epsilon for g in every.values())
    # the subjects named have those epsilons
    assert every[worst.local_subject].local_epsilon == worst.local_epsilon
    assert every[worst.federation_subject].federation_epsilon == worst.federation_epsilon


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=6),
    st.integers(1, 6),
    st.integers(1, 100),
    st.integers(0, 3),
)
def test_higradavgdp_spends_least(holding, s, rounds, extra):
    run = FederationRun(6, s, rounds, 3, 0.02, 1.5)
    eps = {m: subject_guarantee(replace(run, mechanism=m), holding, DELTA) for m in MECHANISMS}
    for m in MECHANISMS:  # C is the least sensitivity of all
        assert eps["higradavgdp"].local_epsilon <= eps[m].local_epsilon
        assert eps["higradavgdp"].federation_epsilon <= eps[m].federation_epsilon
    assert eps["localgroupdp"] == eps["localitemdp"]  # the same DP-SGD mechanism at the same sigma
    # with two items or more at every holder, per-item clipping's m C is at least UserLDP's 2C: the
    # sensitivity-m cross-check; the Binomial(m, q) mixture accounted (issue 32) is below it
    deep = [m + 1 + extra for m in holding]
    at = {m: subject_guarantee(replace(run, mechanism=m), deep, DELTA) for m in MECHANISMS}
    for kind in ("local", "federation"):
        order = [getattr(at[m], f"{kind}_epsilon") for m in ("higradavgdp", "userldp")]
        order.append(getattr(at["localitemdp"], f"{kind}_cross_check"))
        assert order == sorted(order)
        assert order[0] < order[1]  # sensitivity C against 2C: strictly less
        mixture = getattr(at["localitemdp"], f"{kind}_epsilon")
        assert order[0] <= mixture < order[2]
