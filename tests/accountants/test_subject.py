"""Subject-level accounting (Marathe & Kanani §2-3): holdings, horizontal composition, LocalGroupDP."""

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.accountants.account import record_level
from uldp.accountants.horizontal import (
    FederationRun,
    account_subjects,
    composed_epsilon,
    federation_composition,
    group_noise,
    local_composition,
    max_rounds,
    rule_of_thumb,
    subject_guarantee,
)
from uldp.accountants.mechanism import SubsampledGaussian
from uldp.accountants.subject import allocate_items, holdings_from_pairs, read_holdings, subject_sampling_rate

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
