"""Privacy-relevant invariants of every algorithm's silo update and aggregation (ULDP-FL §3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from uldp.trainers.algorithms import TrainConfig, make_algorithm
from uldp.trainers.algorithms.base import Context, SiloDelta
from uldp.trainers.algorithms.group import contribution_flags, resolve_group_k
from uldp.trainers.algorithms.naive import naive_noise_std
from uldp.trainers.algorithms.weighting import plaintext_weighted_sum, record_count_weights, uniform_weights
from uldp.trainers.models import build_model, loss_for, parameter_count
from uldp.trainers.round_rngs import round_rngs
from uldp.trainers.runner import build_silos

from .synthetic import make_data, without_user

CLIP = 0.05  # small against the deltas a large local learning rate gives: clipping binds


def _round_sum(data, cfg: TrainConfig, *, round: int = 1):
    """sum_s Delta_t^s as the server receives it (before eta_g scaling), and the round's plan."""
    torch.manual_seed(0)
    model = build_model("mlp", task=data.task, feature_shape=data.x_train.shape[1:], n_classes=2)
    params = {k: v.detach() for k, v in model.named_parameters()}
    silos = build_silos(data)
    counts = np.stack([np.bincount(s.users, minlength=data.n_users) for s in silos])
    ctx = Context(model, loss_for(data.task), data.n_users, data.n_silos, parameter_count(model), counts)
    algo = make_algorithm(cfg, silos, data.task)
    server_rng, silo_rngs = round_rngs(cfg.seed, round, data.n_silos)
    plan = algo.plan_round(round, ctx, cfg, server_rng)
    messages = [algo.silo_update(s, params, plan, ctx, cfg, r) for s, r in zip(silos, silo_rngs)]
    if isinstance(messages[0], SiloDelta):
        total = torch.stack([m.delta for m in messages]).sum(0)
    else:
        total = plaintext_weighted_sum(messages, counts, plan.sampled)
    return total, plan, messages, algo


def _spread_users(data, count=3):
    """Users with records in the most silos (their contribution is split over silos)."""
    silos_per_user = [len(set(data.silo_train[data.user_train == u])) for u in range(data.n_users)]
    return list(np.argsort(silos_per_user)[::-1][:count])


@pytest.mark.parametrize("algo", ["uldp-avg", "uldp-avg-w", "uldp-sgd", "uldp-sgd-w"])
def test_one_user_moves_the_sum_by_at_most_c(algo):
    data = make_data("binary", n=150, users=10, silos=3)
    cfg = TrainConfig(algo=algo, rounds=1, sigma=1.0, clip=CLIP, lr=2.0, local_epochs=2)
    full, _, _, _ = _round_sum(data, cfg)
    moved = []
    for user in _spread_users(data):
        neighbour, _, _, _ = _round_sum(without_user(data, user), cfg)
        moved.append(float((full - neighbour).norm()))
    assert max(moved) <= CLIP * (1 + 1e-4)
    assert max(moved) >= 0.5 * CLIP  # clipping binds: the test could fail


def test_naive_silo_deltas_are_clipped_and_a_user_moves_the_sum_by_at_most_2_s_c():
    data = make_data("binary", n=150, users=10, silos=3)
    cfg = TrainConfig(algo="uldp-naive", rounds=1, sigma=1e-9, clip=CLIP, lr=2.0, batch_size=16)
    full, _, messages, _ = _round_sum(data, cfg)
    assert all(float(m.delta.norm()) <= CLIP * (1 + 1e-4) for m in messages)
    assert full.norm() <= data.n_silos * CLIP * (1 + 1e-4)  # |S| C: one C per silo
    for user in _spread_users(data, 2):
        neighbour, _, _, _ = _round_sum(without_user(data, user), cfg)
        assert float((full - neighbour).norm()) <= 2 * data.n_silos * CLIP * (1 + 1e-4)


def test_naive_noise_is_calibrated_to_sensitivity_2_s_c():
    data = make_data("binary", n=60, users=6, silos=4)
    cfg = TrainConfig(algo="uldp-naive", rounds=1, sigma=1e4, clip=1.0)
    total, _, _, _ = _round_sum(data, cfg)
    d = total.numel()
    expected_std = naive_noise_std(cfg, 4) * math.sqrt(4)  # sum of 4 silos' noise
    assert expected_std == pytest.approx(cfg.sigma * 2 * 4 * cfg.clip)
    assert float(total.norm()) / math.sqrt(d) == pytest.approx(expected_std, rel=0.05)


@pytest.mark.parametrize("algo", ["uldp-avg", "uldp-sgd"])
def test_per_user_noise_on_the_sum_has_std_sigma_c(algo):
    data = make_data("binary", n=60, users=6, silos=4)
    cfg = TrainConfig(algo=algo, rounds=1, sigma=1e4, clip=1.0)
    total, _, _, _ = _round_sum(data, cfg)
    assert float(total.norm()) / math.sqrt(total.numel()) == pytest.approx(1e4, rel=0.05)


def test_weights_sum_to_one_per_user():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 5, size=(4, 30))
    counts[:, 0] = 0  # a user without records
    w = record_count_weights(counts)
    present = counts.sum(0) > 0
    np.testing.assert_allclose(w.sum(0)[present], 1.0)
    assert np.all(w[:, ~present] == 0)
    np.testing.assert_allclose(
        w[counts > 0], (counts / np.maximum(counts.sum(0, keepdims=True), 1))[counts > 0]
    )
    np.testing.assert_allclose(uniform_weights(4, 30).sum(0), 1.0)


@pytest.mark.parametrize("algo", ["uldp-avg", "uldp-avg-w", "uldp-sgd", "uldp-naive", "uldp-group"])
def test_users_not_sampled_contribute_nothing(algo):
    data = make_data("binary", n=150, users=12, silos=3)
    cfg = TrainConfig(
        algo=algo, rounds=1, sigma=1.0, clip=CLIP, lr=1.0, user_q=0.5, group_k="max", batch_size=16
    )
    full, plan, _, _ = _round_sum(data, cfg)
    if algo.startswith("uldp-avg") or algo == "uldp-sgd":
        assert plan.weights is None or np.all(plan.weights[:, ~plan.sampled] == 0)
    left_out = np.flatnonzero(~plan.sampled)
    assert 0 < len(left_out) < data.n_users
    # Changing the records of users not sampled changes nothing.
    altered = make_data("binary", n=150, users=12, silos=3)
    x = data.x_train.copy()
    mine = np.isin(data.user_train, left_out)
    x[mine] = altered.x_train[mine] * 10
    changed = type(data)(**{**data.__dict__, "x_train": x})
    other, _, _, _ = _round_sum(changed, cfg)
    torch.testing.assert_close(other, full, atol=1e-6, rtol=0)


def test_group_flags_keep_at_most_k_records_per_user_across_silos():
    rng = np.random.default_rng(3)
    owners = rng.integers(0, 20, size=500)
    for k in (1, 3, 40):
        kept = contribution_flags(owners, k, rng)
        per_user = np.bincount(owners[kept], minlength=20)
        np.testing.assert_array_equal(per_user, np.minimum(np.bincount(owners, minlength=20), k))


def test_group_k_choices():
    per_user = np.array([0, 1, 2, 2, 9])
    assert resolve_group_k("max", per_user) == 9
    assert resolve_group_k("median", per_user) == 2
    assert resolve_group_k(4, per_user) == 4
    with pytest.raises(ValueError, match="group-k"):
        resolve_group_k(0, per_user)
    with pytest.raises(ValueError, match="group-k"):
        TrainConfig(algo="uldp-group", rounds=1, group_k=0)


def test_group_kept_records_follow_the_flags():
    data = make_data("binary", n=200, users=8, silos=3)
    cfg = TrainConfig(algo="uldp-group", rounds=1, group_k=5)
    _, _, _, algo = _round_sum(data, cfg)
    assert algo.k == 5
    owners = np.concatenate([s.users for s in build_silos(data)])
    kept = np.concatenate([algo.kept[s] for s in sorted(algo.kept)])
    assert np.bincount(owners[kept], minlength=8).max() <= 5
    assert sum(algo.kept_sizes()) == np.minimum(np.bincount(owners, minlength=8), 5).sum()


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="user-q"):
        TrainConfig(algo="uldp-avg", rounds=1, user_q=1.5)
    with pytest.raises(ValueError, match="secure"):
        TrainConfig(algo="uldp-avg", rounds=1, secure=True)
    with pytest.raises(ValueError, match="Cox"):
        make_algorithm(TrainConfig(algo="uldp-group", rounds=1), [], "survival")


def test_secure_weighting_equals_plaintext():
    from uldp.trainers.algorithms.weighting import SecureWeighting

    data = make_data("binary", n=40, users=5, silos=2, features=2)
    keep = data.user_train != 4  # user 4 has no records: N_u = 0
    data = type(data)(
        **{
            **data.__dict__,
            "x_train": data.x_train[keep],
            "y_train": data.y_train[keep],
            "user_train": data.user_train[keep],
            "silo_train": data.silo_train[keep],
        }
    )
    cfg = TrainConfig(
        algo="uldp-avg-w",
        rounds=1,
        sigma=1.0,
        clip=CLIP,
        lr=1.0,
        user_q=0.6,
        secure=True,
        key_bits=512,
        test_keys=True,
    )
    plain, plan, messages, _ = _round_sum(data, cfg)
    counts = np.stack([np.bincount(data.user_train[data.silo_train == s], minlength=5) for s in range(2)])
    secure = SecureWeighting(counts, plain.numel(), key_bits=512, test_keys=True)(messages, plan.sampled)
    torch.testing.assert_close(secure, plain, atol=1e-6, rtol=0)
