"""The subject-level algorithms (Marathe & Kanani, issue 16): each one's privacy invariant, the
accounting a run prints, and LocalGroupDP's Corollary 3.5 noise."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.trainers.synthetic import make_data
from uldp.accountants.events import SubsampledGaussian
from uldp.accountants.registry import account_event
from uldp.accountants.subject.horizontal import FederationRun, group_noise, worst_held
from uldp.errors import InvalidParameter
from uldp.trainers.algorithms import Context, TrainConfig
from uldp.trainers.algorithms.dp_sgd import dp_sgd
from uldp.trainers.algorithms.subject_sgd import batch_signal, item_signal, subject_steps
from uldp.trainers.models import build_model, loss_for, parameter_count
from uldp.trainers.runner import build_silos, train
from uldp.trainers.subject_accounting import (
    ACCOUNTING,
    SubjectAccounting,
    cap_items,
    group_budget,
    holdings_of,
    item_rate,
    prepare_subject_run,
)

SUBJECT_ALGOS = ("userldp", "localgroupdp", "higradavgdp", "localitemdp")


def _batch(seed: int, rows: int, d: int, subjects: int) -> tuple[torch.Tensor, np.ndarray]:
    rng = np.random.default_rng(seed)
    flat = torch.as_tensor(rng.normal(scale=rng.uniform(0.01, 50), size=(rows, d)), dtype=torch.float64)
    owners = rng.integers(0, subjects, size=rows)
    return flat, owners


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    rows=st.integers(1, 40),
    d=st.integers(1, 8),
    subjects=st.integers(1, 6),
    clip=st.floats(0.01, 10.0),
)
def test_higradavgdp_subject_moves_the_sum_by_at_most_c(seed, rows, d, subjects, clip):
    # Lemma 3.7: however many items a subject has in the batch, removing them all moves the sum
    # of per-subject averages by at most C (the sensitivity HiGradAvgDP's noise is scaled to).
    flat, owners = _batch(seed, rows, d, subjects)
    whole = item_signal(flat, clip, owners)
    for subject in np.unique(owners):
        rest = owners != subject
        without = (
            item_signal(flat[rest], clip, owners[rest]) if rest.any() else torch.zeros(d, dtype=flat.dtype)
        )
        assert float(torch.linalg.vector_norm(whole - without)) <= clip * (1 + 1e-9)


def test_dp_sgd_sum_moves_by_m_c_so_subject_sensitivity_is_m_c():
    # The plain sum (LocalItemDP, LocalGroupDP) moves by up to m C for a subject with m items, B C
    # when B of them are drawn: the Binomial(m, q) mixture the subject-level accounting gives them
    # (accountants.subject.horizontal.MixturePart, issue 32).
    flat = torch.ones(5, 3, dtype=torch.float64) * 10.0
    owners = np.array([7, 7, 7, 1, 2])
    moved = item_signal(flat, 1.0) - item_signal(flat[3:], 1.0)
    assert float(torch.linalg.vector_norm(moved)) == pytest.approx(3.0)
    averaged = item_signal(flat, 1.0, owners) - item_signal(flat[3:], 1.0, owners[3:])
    assert float(torch.linalg.vector_norm(averaged)) == pytest.approx(1.0)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(1, 8), clip=st.floats(0.01, 10.0))
def test_userldp_batch_signal_is_clipped_whole(seed, d, clip):
    # Lemma 3.2's clipping: any two batches' signals differ by at most 2C (what is accounted).
    rng = np.random.default_rng(seed)
    a, b = (torch.as_tensor(rng.normal(scale=30, size=d)) for _ in range(2))
    assert float(torch.linalg.vector_norm(batch_signal(a, clip))) <= clip * (1 + 1e-9)
    assert float(torch.linalg.vector_norm(batch_signal(a, clip) - batch_signal(b, clip))) <= 2 * clip * (
        1 + 1e-9
    )


@pytest.fixture(scope="module")
def data():
    return make_data("multiclass", n=320, users=8, silos=4, features=6, n_classes=3)


def _context(data, model_name: str = "mlp") -> tuple[Context, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    model = build_model(
        model_name, task=data.task, feature_shape=data.feature_shape, n_classes=data.n_classes
    )
    params = {k: v.detach() for k, v in model.named_parameters()}
    ctx = Context(model, loss_for(data.task), data.n_users, data.n_silos, parameter_count(model), None)
    return ctx, params


def test_localitemdp_equals_plain_dp_sgd(data):
    # LocalItemDP's member step is DP-SGD (Abadi et al.): the same draws give the same model.
    ctx, params = _context(data)
    silo = build_silos(data)[1]
    cfg = TrainConfig(algo="localitemdp", rounds=1, sigma=1.3, clip=0.7, lr=0.2, item_q=0.2)
    ours = subject_steps(
        ctx, params, silo, combine="item", q=0.2, steps=4, cfg=cfg, rng=np.random.default_rng(5)
    )
    reference = dp_sgd(
        ctx,
        params,
        silo.x,
        silo.y,
        np.arange(silo.size),
        gamma=0.2,
        lot_size=0.2 * silo.size,
        steps=4,
        cfg=cfg,
        rng=np.random.default_rng(5),
    )
    for name in params:
        assert torch.equal(ours[name], reference[name])


def test_userldp_noise_covers_the_whole_batch(data):
    # Algorithm 1: theta <- theta - eta (clip(g(S), C) + N(0, sigma^2 C^2)): the noise is scaled
    # to the whole batch's clipped gradient, not divided by the batch size.
    ctx, params = _context(data)
    silo = build_silos(data)[0]
    cfg = TrainConfig(algo="userldp", rounds=1, sigma=2.0, clip=0.5, lr=0.1, item_q=0.3)
    moved = subject_steps(
        ctx, params, silo, combine="batch", q=0.3, steps=1, cfg=cfg, rng=np.random.default_rng(9)
    )
    rng = np.random.default_rng(9)
    chosen = np.flatnonzero(rng.random(silo.size) < 0.3)
    noise = torch.as_tensor(rng.normal(0.0, 2.0 * 0.5, size=ctx.n_params), dtype=torch.float32)
    from torch.func import functional_call

    current = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    loss = ctx.loss_fn(
        functional_call(ctx.model, current, (silo.x[chosen],)), silo.y[chosen], torch.ones(len(chosen))
    )
    grads = torch.autograd.grad(loss, list(current.values()))
    flat = torch.cat([g.reshape(-1) for g in grads])
    step = batch_signal(flat, 0.5) + noise
    start = 0
    for name, p in params.items():
        n = p.numel()
        expected = p - 0.1 * step[start : start + n].view_as(p)
        torch.testing.assert_close(moved[name], expected, rtol=1e-5, atol=1e-6)
        start += n
    assert float(torch.linalg.vector_norm(noise)) / math.sqrt(ctx.n_params) == pytest.approx(1.0, rel=0.2)


def test_run_accounting_is_worst_held_over_the_datas_holdings(data):
    cfg = TrainConfig(algo="higradavgdp", rounds=3, sigma=2.0, local_steps=5, item_q=0.1, noise_seed=3)
    result = train(data, cfg, model_name="mlp")
    run = FederationRun(data.n_silos, data.n_silos, 3, 5, 0.1, 2.0, "higradavgdp")
    held = worst_held(run, holdings_of(data), cfg.delta, **ACCOUNTING)
    last = result.history[-1]
    assert last["epsilon"] == last["subject_epsilon_federation"] == held.federation_epsilon
    assert last["subject_epsilon_member"] == held.local_epsilon
    eps = [r["epsilon"] for r in result.history]
    assert eps == sorted(eps) and eps[0] > 0


def _prepared(data, algo: str):
    """The data and setup of a 3-round run calibrated to a federation-wide epsilon of 3."""
    return prepare_subject_run(
        data,
        algo,
        epsilon=3.0,
        sigma=None,
        group_k="max",
        batch_size=16,
        local_steps=4,
        rounds=3,
        delta=1e-5,
        seed=0,
    )


@pytest.mark.parametrize("algo", SUBJECT_ALGOS)
def test_calibrated_run_meets_its_target(data, algo):
    prepared, setup = _prepared(data, algo)
    cfg = TrainConfig(
        algo=algo,
        rounds=3,
        sigma=setup.sigma,
        local_steps=4,
        item_q=setup.item_q,
        target_epsilon=3.0,
        noise_seed=1,
    )
    row = SubjectAccounting(cfg, prepared).row(3)
    assert row["epsilon"] <= 3.0
    assert row["epsilon"] > 2.9  # the smallest sigma: little budget left on the table
    if algo == "localitemdp":
        assert row["epsilon"] == row["item_epsilon"] and row["subject_epsilon_federation"] > row["epsilon"]
    else:
        assert row["epsilon"] == row["subject_epsilon_federation"]


def test_localgroupdp_sigma_z_meets_corollary_3_5_by_reaccounting(data):
    prepared, setup = _prepared(data, "localgroupdp")
    group, z = setup.group, setup.z
    assert group is not None and z == max(max(h) for h in holdings_of(data).values())
    budget = group.item_epsilon * z
    assert group.item_delta == pytest.approx(1e-5 / (z * math.exp((z - 1) * budget / z)), rel=1e-12)
    again = account_event(SubsampledGaussian(setup.sigma, setup.item_q, 12), group.item_delta, **ACCOUNTING)
    assert again.epsilon <= group.item_epsilon
    assert again.epsilon >= group.item_epsilon * (1 - 1e-3)  # sigma_Z is the smallest that meets it
    # the code `uldp subject --k Z --epsilon E` runs gives the same sigma_Z
    assert group_noise(z, budget, 1e-5, setup.item_q, 12, **ACCOUNTING).sigma == setup.sigma


def test_localgroupdp_caps_items_at_z(data):
    capped = cap_items(data, 2, seed=0)
    assert capped.user_silo_counts().max() == 2
    assert data.user_silo_counts().max() > 2
    kept = np.minimum(data.user_silo_counts(), 2).sum()
    assert len(capped.y_train) == kept
    again = cap_items(data, 2, seed=0)
    assert np.array_equal(again.record_index, capped.record_index)


def test_group_budget_says_when_no_budget_reaches_the_noise():
    with pytest.raises(InvalidParameter, match="--group-k 3"):
        group_budget(5e5, 3, 1e-5, 0.1, 10)


def test_item_rate_is_batch_over_smallest_member(data):
    sizes = np.bincount(data.silo_train)
    assert item_rate(data, 10) == pytest.approx(10 / sizes.min())
    assert item_rate(data, 10**6) == 1.0


def test_survival_data_is_refused():
    survival = make_data("survival", n=120, users=6, silos=2)
    cfg = TrainConfig(algo="higradavgdp", rounds=1, sigma=1.0, item_q=0.5)
    with pytest.raises(InvalidParameter, match="per-item"):
        train(survival, cfg)


def test_batch_statistics_count_every_mini_batch(data):
    cfg = TrainConfig(algo="localgroupdp", rounds=2, sigma=3.0, local_steps=3, item_q=0.3, noise_seed=2)
    result = train(data, cfg, model_name="mlp")
    z = {int(k): v for k, v in result.summary["batch_z"].items()}
    assert sum(z.values()) <= 2 * 3 * data.n_silos  # an empty batch has no group
    assert sum(result.summary["batch_subjects"].values()) == sum(z.values())
    assert min(z) >= 1


def test_flower_carries_item_q_to_the_members(data):
    # the runner fills item_q from --batch-size before the members get their settings
    cfg = TrainConfig(algo="userldp", rounds=1, sigma=1.0, batch_size=8, noise_seed=1)
    result = train(data, cfg, model_name="mlp")
    assert result.summary["item_q"] == item_rate(data, 8)
    assert dataclasses.replace(cfg, item_q=item_rate(data, 8)).item_q == result.summary["item_q"]
