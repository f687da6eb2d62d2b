"""Batched per-user training (torch.func + vmap) against the one-user-at-a-time reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.trainers.models import build_model, loss_for
from uldp.trainers.per_user import (
    LocalTraining,
    batched_user_deltas,
    clip_rows,
    loop_user_deltas,
    record_count_groups,
)


def _setup(name, shape, task, n, users, dtype, seed=0):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = build_model(name, task=task, feature_shape=shape, n_classes=4).to(dtype)
    x = torch.randn(n, *shape, dtype=dtype)
    if task == "survival":
        y = torch.stack([torch.rand(n, dtype=dtype) * 5, (torch.rand(n) > 0.3).to(dtype)], 1)
    else:
        y = torch.randint(0, 4 if task == "multiclass" else 2, (n,))
    # Skewed record counts, so groups and padding are exercised (several users share counts).
    owners = np.minimum(rng.zipf(1.6, size=n), users) - 1
    params = {k: v.detach() for k, v in model.named_parameters()}
    return model, params, x, y, owners, rng


@pytest.mark.parametrize(
    "name,shape,task,dtype,training",
    [
        ("mlp", (30,), "binary", torch.float32, LocalTraining(1, 0.5)),
        ("mlp", (30,), "binary", torch.float32, LocalTraining(3, 0.2, batch_size=4)),
        ("logistic", (13,), "binary", torch.float32, LocalTraining(2, 0.5, batch_size=3)),
        ("cox", (7,), "survival", torch.float64, LocalTraining(2, 0.3, batch_size=5)),
        ("cnn", (1, 28, 28), "multiclass", torch.float64, LocalTraining(2, 0.1, batch_size=4)),
    ],
)
def test_batched_equals_loop(name, shape, task, dtype, training):
    n = 40 if name == "cnn" else 120
    model, params, x, y, owners, rng = _setup(name, shape, task, n, 12, dtype)
    users = np.array(sorted(set(owners.tolist()) | {30}))  # user 30 has no record here
    keys = rng.random((training.epochs, n))
    loop = loop_user_deltas(model, params, x, y, owners, users, keys, loss_for(task), training)
    batched = batched_user_deltas(model, params, x, y, owners, users, keys, loss_for(task), training)
    assert loop.shape == batched.shape == (len(users), sum(p.numel() for p in params.values()))
    assert loop.abs().max() > 1e-3  # the users did train
    assert torch.all(batched[users == 30] == 0)
    clip = float(loop.norm(dim=1).median())  # some rows clipped, some not
    clipped_loop, _ = clip_rows(loop, clip)
    clipped_batched, _ = clip_rows(batched, clip)
    torch.testing.assert_close(clipped_batched, clipped_loop, atol=1e-6, rtol=0)


def test_small_groups_give_the_same_deltas(monkeypatch):
    # Memory limits split groups further; the result must not depend on how users are grouped.
    model, params, x, y, owners, rng = _setup("mlp", (30,), "binary", 80, 12, torch.float64)
    users = np.unique(owners)
    keys = rng.random((2, 80))
    training = LocalTraining(2, 0.3, batch_size=3)
    whole = batched_user_deltas(model, params, x, y, owners, users, keys, loss_for("binary"), training)
    monkeypatch.setattr("uldp.trainers.per_user.MAX_INPUT_FLOATS", 30 * 12)
    split = batched_user_deltas(model, params, x, y, owners, users, keys, loss_for("binary"), training)
    torch.testing.assert_close(split, whole, atol=1e-12, rtol=0)


def test_clip_rows_bounds_norms_and_keeps_short_rows():
    rows = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0], [float("inf"), 1.0], [float("nan"), 0.0]])
    clipped, norms = clip_rows(rows, 1.0)
    assert torch.allclose(norms[:3], torch.tensor([5.0, 0.5, 0.0]))
    # A diverged row contributes nothing rather than spreading NaN through the sum.
    assert torch.equal(clipped, torch.tensor([[0.6, 0.8], [0.3, 0.4], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]))


@settings(max_examples=50)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=80), st.integers(1, 7))
def test_groups_cover_every_user_once_with_bounded_padding(counts, max_users):
    counts = np.array(counts)
    groups = record_count_groups(counts, max_users=max_users, min_users=3)
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(counts)))
    for g in groups:
        assert 1 <= len(g) <= max_users
        low, high = counts[g].min(), counts[g].max()
        # Padding within 25%; or, for a group merged because it was small, within 2x.
        assert high <= max(low, np.floor(1.25 * low)) or (high <= 2 * low)


def test_local_training_validates():
    with pytest.raises(ValueError, match="local epochs"):
        LocalTraining(0, 0.1)
    with pytest.raises(ValueError, match="batch size"):
        LocalTraining(1, 0.1, batch_size=0)
