"""Personalised budgets in training (issue 14): the rates, the sampling, the accounting, resume.

The CLI side (sources, refusals, the table, equality with `uldp personalize`) is in
tests/cli/test_train_personal.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from scipy import stats

from tests.trainers.synthetic import make_data
from uldp.accountants.personalized.record_rates import personalize
from uldp.accountants.personalized.record_spend import EpsilonCurve, RecordSampledFL
from uldp.errors import InvalidParameter
from uldp.trainers.algorithms import TrainConfig
from uldp.trainers.algorithms import dp_sgd as dp_sgd_module
from uldp.trainers.budget_sources import Budgets
from uldp.trainers.personal_accounting import accounting, tiers
from uldp.trainers.rates import personalize_data, record_rates
from uldp.trainers.runner import train

RUN = dict(sigma=None, local_steps=3, rounds=2, silo_q=1.0, delta=1e-5)


def _personal(algo="rpdp", data=None, **overrides):
    data = data if data is not None else make_data("binary", n=240, users=12, silos=3)
    options = {**RUN, **overrides}
    return personalize_data(
        data,
        algo=algo,
        record_level=algo != "default",
        distribution=options.pop("distribution", "three-levels"),
        seed=0,
        batch_size=options.pop("batch_size", 16),
        **options,
    )


def test_rates_are_the_exact_inverse_of_personalize_and_calibrated_to_the_largest_budget():
    data, sigma = _personal()
    run = RecordSampledFL(sigma, RUN["local_steps"], RUN["rounds"], 1.0)
    expected = personalize(data.record_budget, EpsilonCurve(run, RUN["delta"]), method="exact")
    assert np.array_equal(data.record_q, expected.q)  # one code path: the same q
    top = data.record_budget == data.record_budget.max()
    assert np.all(data.record_q[top] == 1.0)  # the largest budget is reached at q = 1 ...
    spent = EpsilonCurve(run, RUN["delta"])(1.0)[0]
    assert 0.99 * data.record_budget.max() <= spent <= data.record_budget.max()  # ... spent exactly
    # smaller budgets, smaller rates
    order = np.argsort(data.record_budget)
    assert np.all(np.diff(data.record_q[order]) >= 0)


def test_unidp_gives_every_record_one_rate_that_spends_the_smallest_budget():
    data, sigma = _personal("unidp", batch_size=16)
    sizes = np.bincount(data.silo_train)
    assert np.all(data.record_q == min(1.0, 16 / sizes.min()))
    run = RecordSampledFL(sigma, RUN["local_steps"], RUN["rounds"], 1.0)
    spent = EpsilonCurve(run, RUN["delta"])(data.record_q[0])[0]
    assert 0.99 * data.record_budget.min() <= spent <= data.record_budget.min()


def test_a_budget_no_rate_can_meet_is_refused_naming_the_records_and_the_smallest_reachable():
    budgets = Budgets(np.array([1.0, 1e-12, 2.0, 1e-13]), "test")
    with pytest.raises(InvalidParameter) as error:
        record_rates(
            budgets,
            uniform=False,
            sigma=0.8,
            local_steps=5,
            rounds=10,
            silo_q=1.0,
            delta=1e-5,
            ids=np.arange(1, 5),
        )
    text = str(error.value)
    assert "2 budget(s) below the smallest reachable epsilon" in text
    assert "record 2 (1e-12)" in text and "record 4 (1e-13)" in text


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_budgets_must_be_finite_and_positive(bad):
    budgets = Budgets(np.array([1.0, bad]), "test")
    with pytest.raises(InvalidParameter, match="finite numbers > 0: record 2"):
        record_rates(budgets, uniform=False, ids=np.array([1, 2]), **{**RUN, "sigma": 1.0})


def test_each_record_is_sampled_as_often_as_its_rate(monkeypatch):
    """Realised inclusion frequency of every record over 2,000 DP-SGD steps of a real rpdp silo
    update vs its q: a two-sided exact binomial test per record, Bonferroni over the records at a
    family-wise false-alarm rate of 1e-4 (with a random noise seed the test would fail by chance at
    most once in 10,000 runs; the seed here is fixed, so it replays)."""
    data, sigma = _personal(distribution="bounded-mix-gauss", rounds=1, local_steps=2000)
    counts = np.zeros(len(data.y_train), dtype=np.int64)
    real = dp_sgd_module.poisson_sample

    def spy(usable, gamma, rng):
        chosen = real(usable, gamma, rng)
        counts[silo_index[chosen]] += 1
        return chosen[:0]  # counted; no gradient needed for that (the draw is the real one)

    silo = 0
    silo_index = np.flatnonzero(data.silo_train == silo)
    monkeypatch.setattr(dp_sgd_module, "poisson_sample", spy)
    cfg = TrainConfig(algo="rpdp", rounds=1, sigma=sigma, local_steps=2000, noise_seed=5)
    from uldp.trainers.runner import LocalSilos, build_silos

    silos = build_silos(data)
    algorithm, _ = LocalSilos(silos, data.user_silo_counts()).prepare(cfg, data.task, True)
    from uldp.trainers.algorithms.base import Context, RoundPlan
    from uldp.trainers.models import build_model, loss_for, parameter_count

    model = build_model("logistic", task="binary", feature_shape=data.feature_shape, n_classes=2)
    ctx = Context(model, loss_for("binary"), data.n_users, data.n_silos, parameter_count(model), None)
    plan = RoundPlan(1, np.ones(data.n_users, dtype=bool), None, np.ones(data.n_silos, dtype=bool))
    params = {k: v.detach() for k, v in model.named_parameters()}
    algorithm.silo_update(silos[silo], params, plan, ctx, cfg, np.random.default_rng(5))

    q = data.record_q[silo_index]
    k = counts[silo_index]
    assert len(np.unique(q)) > 5  # the rates do differ, so this tests per-record rates
    p_low = stats.binom.cdf(k, 2000, q)
    p_high = stats.binom.sf(k - 1, 2000, q)
    p_values = np.minimum(1.0, 2 * np.minimum(p_low, p_high))
    assert p_values.min() > 1e-4 / len(q), (k[p_values.argmin()], q[p_values.argmin()])
    # The same counts against rates that are not theirs fail the test: it can see a wrong q.
    wrong = np.roll(q, 1)
    p_wrong = np.minimum(
        1.0, 2 * np.minimum(stats.binom.cdf(k, 2000, wrong), stats.binom.sf(k - 1, 2000, wrong))
    )
    assert p_wrong.min() < 1e-4 / len(q)


def test_tiers_one_per_budget_then_quantiles():
    budgets = np.array([0.1, 0.1, 1.0, 5.0])
    q = np.array([0.01, 0.01, 0.2, 1.0])
    assert [(t.label, t.count, t.q) for t in tiers(budgets, q)] == [
        ("0.1", 2, 0.01),
        ("1", 1, 0.2),
        ("5", 1, 1.0),
    ]
    many = np.linspace(0.5, 5.0, 101)
    out = tiers(many, many / 5)
    assert [t.label for t in out] == ["min", "p25", "median", "p75", "max"]
    assert [t.budget for t in out] == pytest.approx([0.5, 1.625, 2.75, 3.875, 5.0])
    assert all(t.count is None for t in out)


def test_every_tier_is_re_accounted_and_an_overspending_rate_is_caught():
    data, sigma = _personal(rounds=4)
    cfg = TrainConfig(algo="rpdp", rounds=4, sigma=sigma, local_steps=3, noise_seed=1)
    result = train(data, cfg, model_name="logistic")
    check = result.summary["budget_check"]
    assert check["over_budget"] == 0 and check["distinct_rates"] == 3 and check["rounds"] == 4
    assert 0.99 < check["largest_spent_over_budget"] <= 1.0
    last = result.history[-1]
    for i, tier in enumerate(result.summary["tiers"], start=1):
        assert last[f"tier{i}_epsilon_untrusted"] <= tier["budget"]
    # epsilon grows round by round in every tier
    assert all(
        a["tier1_epsilon_untrusted"] < b["tier1_epsilon_untrusted"]
        for a, b in zip(result.history, result.history[1:])
    )
    # A rate one grid step too large for its budget is found by the re-accounting.
    greedy = dataclasses.replace(data, record_q=np.minimum(1.0, data.record_q * 1.05))
    assert accounting(cfg, greedy, True).check(4)["over_budget"] > 0


def test_the_two_threat_models_coincide_under_poisson_silo_sampling_and_amplify():
    data, sigma = _personal(silo_q=0.5, rounds=3, sigma=1.5)
    cfg = TrainConfig(algo="rpdp", rounds=3, sigma=sigma, local_steps=3, silo_q=0.5, noise_seed=2)
    personal_acc = accounting(cfg, data, True)
    row = personal_acc.row(3)
    for i in range(1, 4):
        assert row[f"tier{i}_epsilon_untrusted"] == pytest.approx(row[f"tier{i}_epsilon_server"], rel=1e-12)
    # lambda < 1 amplifies: the same rates at lambda = 1 spend more
    full = dataclasses.replace(cfg, silo_q=1.0)
    row_full = accounting(full, data, True).row(3)
    assert row_full["tier1_epsilon_untrusted"] > row["tier1_epsilon_untrusted"]


def test_a_silo_not_sampled_sends_zeros_and_the_server_averages_those_that_took_part():
    data, sigma = _personal(silo_q=0.5, rounds=3, sigma=1.5)
    cfg = TrainConfig(algo="rpdp", rounds=3, sigma=sigma, local_steps=3, silo_q=0.5, noise_seed=2)
    result = train(data, cfg, model_name="logistic")
    assert [r["sampled_silos"] for r in result.history] != [3, 3, 3]  # some rounds skip silos


def test_a_resumed_rpdp_run_equals_the_uninterrupted_one_and_other_budgets_are_refused(tmp_path):
    data, sigma = _personal(rounds=3)
    cfg = TrainConfig(algo="rpdp", rounds=3, sigma=sigma, local_steps=3, noise_seed=4)
    whole = train(data, cfg, model_name="logistic")

    def stop(row):
        if row["round"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(data, cfg, model_name="logistic", checkpoint_dir=tmp_path, on_round=stop)
    resumed = train(data, cfg, model_name="logistic", checkpoint_dir=tmp_path, resume=True)
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in whole.history]
    for key in whole.params:
        assert torch.equal(whole.params[key], resumed.params[key])
    other, _ = _personal(rounds=3, distribution="bounded-mix-gauss", sigma=sigma)
    with pytest.raises(InvalidParameter, match="different run"):
        train(other, cfg, model_name="logistic", checkpoint_dir=tmp_path, resume=True)


def test_rpdp_without_rates_and_user_budgets_elsewhere_are_refused():
    data = make_data("binary", n=120, users=6, silos=3)
    with pytest.raises(InvalidParameter, match="sampling rate"):
        train(data, TrainConfig(algo="rpdp", rounds=1, noise_seed=1))
    with pytest.raises(InvalidParameter, match="needs per-record budgets"):
        personalize_data(data, algo="rpdp", record_level=True, seed=0, **{**RUN, "sigma": 1.0})


def test_default_with_budgets_meets_none():
    data, _ = _personal("default")
    result = train(data, TrainConfig(algo="default", rounds=1, noise_seed=1), model_name="logistic")
    check = result.summary["budget_check"]
    assert check["view"] is None and check["over_budget"] == check["count"]
    assert result.history[0]["tier1_epsilon_untrusted"] == float("inf")


# -- per-user budgets (ULDP-AVG / -SGD, PULDP-AVG) ----------------------------------------------


def _user_personal(algo="uldp-avg", rounds=3, sigma=None, source="group-3"):
    data = make_data("binary", n=240, users=40, silos=3)
    return personalize_data(
        data,
        algo=algo,
        record_level=False,
        user_budgets_from=source,
        seed=0,
        sigma=sigma,
        local_steps=1,
        rounds=rounds,
        silo_q=1.0,
        delta=1e-5,
    )


def test_each_user_is_sampled_by_the_server_at_its_own_rate():
    """Inclusion frequency of every user over 4,000 planned rounds vs its q_u: exact two-sided
    binomial test per user, Bonferroni at a family-wise false-alarm rate of 1e-4."""
    from uldp.trainers.algorithms import make_algorithm
    from uldp.trainers.algorithms.base import Context

    data, sigma = _user_personal()
    assert len(np.unique(data.user_q)) == 3
    cfg = TrainConfig(algo="uldp-avg", rounds=1, sigma=sigma)
    algorithm = make_algorithm(cfg, [], "binary")
    ctx = Context(None, None, data.n_users, data.n_silos, 1, None, data.user_q)
    rng = np.random.default_rng(11)
    rounds = 4000
    counts = sum(algorithm.plan_round(t, ctx, cfg, rng).sampled.astype(int) for t in range(rounds))
    p = np.minimum(
        1,
        2
        * np.minimum(
            stats.binom.cdf(counts, rounds, data.user_q), stats.binom.sf(counts - 1, rounds, data.user_q)
        ),
    )
    assert p.min() > 1e-4 / data.n_users
    wrong = np.roll(data.user_q, 7)
    p_wrong = np.minimum(
        1, 2 * np.minimum(stats.binom.cdf(counts, rounds, wrong), stats.binom.sf(counts - 1, rounds, wrong))
    )
    assert p_wrong.min() < 1e-4 / data.n_users  # the test sees a wrong rate


def test_user_budgets_are_met_in_the_models_view_and_the_server_view_is_uldp_accounts():
    from uldp.accountants.account import account_plan
    from uldp.accountants.tight.gaussian import gaussian_epsilon
    from uldp.trainers.algorithms import plan_algorithm

    data, sigma = _user_personal(rounds=4)
    cfg = TrainConfig(algo="uldp-avg", rounds=4, sigma=sigma, noise_seed=3)
    result = train(data, cfg, model_name="logistic")
    check = result.summary["budget_check"]
    assert check["level"] == "user" and check["over_budget"] == 0
    last = result.history[-1]
    for i, tier in enumerate(result.summary["tiers"], start=1):
        assert last[f"tier{i}_epsilon_model"] <= tier["budget"]
        rows = account_plan(
            plan_algorithm("uldp-avg", sigma=sigma, rounds=4, user_q=tier["q"]), delta=1e-5, server_view=True
        )
        # at q_u = 1 the two views coincide and `uldp account` prints one row
        server = next((r.epsilon for r in rows if r.method == "server view"), rows[0].epsilon)
        # ... or, when smaller, the exact epsilon of the 4 plain Gaussian rounds (a bound whatever q_u)
        plain = gaussian_epsilon(2.0 / sigma, 1e-5)
        assert last[f"tier{i}_epsilon_server"] == pytest.approx(min(server, plain), rel=1e-12)
        assert last[f"tier{i}_epsilon_server"] >= last[f"tier{i}_epsilon_model"]
    assert result.summary["server_epsilon"] == max(last[f"tier{i}_epsilon_server"] for i in (1, 2, 3))


def test_the_server_step_divides_by_the_expected_number_of_sampled_users(monkeypatch):
    """Algorithm 4 line 10 with a rate per user: x + eta_g / (mean(q_u) |U| |S|) sum."""
    from uldp.trainers.algorithms import make_algorithm
    from uldp.trainers.algorithms.base import Context, RoundPlan, SiloDelta

    data, sigma = _user_personal()
    cfg = TrainConfig(algo="uldp-avg", rounds=1, sigma=sigma, global_lr=2.0)
    algorithm = make_algorithm(cfg, [], "binary")
    ctx = Context(None, None, data.n_users, data.n_silos, 2, None, data.user_q)
    params = {"w": torch.zeros(2)}
    plan = RoundPlan(1, np.ones(data.n_users, dtype=bool), np.zeros((3, data.n_users)))
    out = algorithm.aggregate(params, [SiloDelta(s, torch.ones(2)) for s in range(3)], plan, ctx, cfg)
    expected = 2.0 * 3 / (data.user_q.mean() * data.n_users * 3)
    assert out["w"].tolist() == pytest.approx([expected, expected])


def test_user_budgets_from_a_file_and_their_refusals(tmp_path):
    from uldp.errors import DataError

    data = make_data("binary", n=240, users=4, silos=3)

    def from_source(source):
        return personalize_data(
            data,
            algo="uldp-avg",
            record_level=False,
            user_budgets_from=str(source),
            seed=0,
            sigma=None,
            local_steps=1,
            rounds=2,
            silo_q=1.0,
            delta=1e-5,
        )

    good = tmp_path / "u.csv"
    good.write_text("user,epsilon\n0,1\n1,2\n2,2\n3,4\n")
    personal, _ = from_source(good)
    assert personal.user_budget.tolist() == [1, 2, 2, 4] and personal.user_q[3] == 1.0
    short = tmp_path / "s.csv"
    short.write_text("user,epsilon\n0,1\n1,2\n")
    with pytest.raises(DataError, match=r"no budget for 2 user\(s\) \(users 2, 3\)"):
        from_source(short)
    zero = tmp_path / "z.csv"
    zero.write_text("user,epsilon\n0,1\n1,0\n2,1\n3,1\n")
    with pytest.raises(InvalidParameter, match=r"--user-budgets: budgets must be finite numbers > 0: user 1"):
        from_source(zero)
    with pytest.raises(InvalidParameter, match="neither a file nor one of"):
        from_source("nope")
