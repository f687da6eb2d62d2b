"""Batched per-user training (torch.func + vmap, and the stacked-weights model of
trainers/stacked.py) against the one-user-at-a-time reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from uldp.trainers.models import build_model, loss_for
from uldp.trainers.per_user import (
    LocalTraining,
    batched_path,
    batched_user_deltas,
    clip_rows,
    loop_user_deltas,
    max_call_records,
    record_count_groups,
    user_deltas,
)
from uldp.trainers.stacked import stackable


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


def _assert_same_clipped(batched, loop, atol=1e-6):
    """The deltas agree after clipping at the median norm (some rows clipped, some not)."""
    clip = float(loop.norm(dim=1).median())
    torch.testing.assert_close(clip_rows(batched, clip)[0], clip_rows(loop, clip)[0], atol=atol, rtol=0)


class _Odd(nn.Module):
    """A convolution with stride, padding, dilation and no bias, then Linear: every geometry
    argument of the stacked convolution exercised."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 3, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2), bias=False)
        self.fc = nn.Linear(3 * 5 * 10, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.tanh(self.conv(x)).flatten(-3))


STACKED_CASES = [
    ("cnn", torch.float64, LocalTraining(1, 0.1)),
    ("cnn", torch.float32, LocalTraining(1, 0.1)),
    ("cnn", torch.float64, LocalTraining(2, 0.1, batch_size=4)),
    ("cnn", torch.float32, LocalTraining(3, 0.1, batch_size=2)),
    ("odd", torch.float64, LocalTraining(2, 0.2, batch_size=3)),
    ("odd", torch.float64, LocalTraining(2, 0.2, batch_size=1)),  # one record a step: other layout
    ("mlp", torch.float64, LocalTraining(2, 0.3, batch_size=3)),  # Dense layers, no convolution
]


def _stacked_setup(name, dtype, n=40):
    if name == "odd":
        model, params, _, y, owners, rng = _setup("mlp", (4,), "multiclass", n, 12, dtype)
        torch.manual_seed(1)
        model = _Odd().to(dtype)
        params = {k: v.detach() for k, v in model.named_parameters()}
        return model, params, torch.randn(n, 2, 9, 8, dtype=dtype), y, owners, rng
    shape = (1, 28, 28) if name == "cnn" else (30,)
    return _setup(name, shape, "multiclass", n, 12, dtype)


@pytest.mark.parametrize("name,dtype,training", STACKED_CASES)
def test_stacked_equals_loop(name, dtype, training):
    """The convolution-as-batched-products path gives the loop's clipped deltas to 1e-6, in
    float32 and float64, one full-batch step or several epochs of mini-batches (issue 19)."""
    model, params, x, y, owners, rng = _stacked_setup(name, dtype)
    users = np.array(sorted(set(owners.tolist()) | {30}))
    keys = rng.random((training.epochs, len(y)))
    loss = loss_for("multiclass")
    loop = loop_user_deltas(model, params, x, y, owners, users, keys, loss, training)
    stacked = batched_user_deltas(model, params, x, y, owners, users, keys, loss, training, "stacked")
    assert loop.abs().max() > 1e-3
    assert torch.all(stacked[users == 30] == 0)
    _assert_same_clipped(stacked, loop)


def test_stacked_equals_loop_on_real_mnist_images():
    """Real digits, whose blank backgrounds make exact ties in max-pooling and zeros at ReLU:
    float64 deltas agree to 1e-6 after clipping (in float32 a rounding difference can flip such
    a tie for a rare user, in either path; docs/train.md)."""
    from uldp.trainers.data.mnist import load

    images = load()
    torch.manual_seed(0)
    model = build_model("cnn", task="multiclass", feature_shape=(1, 28, 28), n_classes=10).to(torch.float64)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.tensor(images.x[:90], dtype=torch.float64)
    y = torch.tensor(images.y[:90], dtype=torch.long)
    rng = np.random.default_rng(0)
    owners = np.minimum(rng.zipf(1.4, size=90), 30) - 1
    users = np.unique(owners)
    training, loss = LocalTraining(3, 0.05, batch_size=4), loss_for("multiclass")
    keys = rng.random((training.epochs, len(y)))
    loop = loop_user_deltas(model, params, x, y, owners, users, keys, loss, training)
    stacked = batched_user_deltas(model, params, x, y, owners, users, keys, loss, training, "stacked")
    assert float((x == 0).double().mean()) > 0.5  # mostly blank: ties everywhere
    _assert_same_clipped(stacked, loop)


def test_stacked_groups_split_by_memory_give_the_same_deltas(monkeypatch):
    """Groups are cut to the records one call may hold (patches and activations); how they are
    cut must not change a delta."""
    model, params, x, y, owners, rng = _stacked_setup("cnn", torch.float64)
    users = np.unique(owners)
    keys = rng.random((2, len(y)))
    training, loss = LocalTraining(2, 0.1, batch_size=3), loss_for("multiclass")
    whole = batched_user_deltas(model, params, x, y, owners, users, keys, loss, training, "stacked")
    assert max_call_records(model, x, "stacked") >= len(y)  # the default fits every user in one call
    floats = max_call_records(model, x, "stacked")
    monkeypatch.setattr("uldp.trainers.per_user.MAX_ACTIVATION_FLOATS", 1)
    assert max_call_records(model, x, "stacked") == 1 < floats
    split = batched_user_deltas(model, params, x, y, owners, users, keys, loss, training, "stacked")
    torch.testing.assert_close(split, whole, atol=1e-12, rtol=0)


@pytest.mark.parametrize("batch_size", [None, 2])
def test_users_with_large_steps_take_the_loop_inside_the_stacked_path(monkeypatch, batch_size):
    """Users whose steps hold at least LOOP_STEP_RECORDS records are trained by the loop, the
    rest stacked; each row is still its user's delta."""
    model, params, x, y, owners, rng = _stacked_setup("cnn", torch.float64)
    users = np.unique(owners)
    counts = np.bincount(owners)[users]
    training, loss = LocalTraining(2, 0.1, batch_size=batch_size), loss_for("multiclass")
    keys = rng.random((2, len(y)))
    threshold = 2 if batch_size else int(np.median(counts)) + 1
    monkeypatch.setattr("uldp.trainers.per_user.LOOP_STEP_RECORDS", threshold)
    looped = set(users[np.minimum(counts, batch_size or counts.max()) >= threshold].tolist())
    assert 0 < len(looped) < len(users)  # some users of each kind
    calls = []
    real_loop = loop_user_deltas

    def spy(model, params, x, y, owners, users, *rest):
        calls.append(set(np.asarray(users).tolist()))
        return real_loop(model, params, x, y, owners, users, *rest)

    monkeypatch.setattr("uldp.trainers.per_user.loop_user_deltas", spy)
    row_users, rows = user_deltas(model, params, x, y, owners, users, keys, loss, training, batched=True)
    assert calls == [looped]
    reference = real_loop(model, params, x, y, owners, row_users, keys, loss, training)
    _assert_same_clipped(rows, reference)


@pytest.mark.parametrize(
    "layer",
    [
        nn.Conv2d(1, 2, 3, groups=1, padding="same"),
        nn.Conv2d(2, 2, 3, groups=2),
        nn.Conv2d(1, 2, 3, padding=1, padding_mode="reflect"),
        nn.BatchNorm2d(1),
        nn.Conv1d(1, 2, 3),
    ],
)
def test_models_with_layers_it_cannot_stack_run_vmap(layer):
    """No stacked version: the batched request on CPU trains them with vmap, the loop's deltas."""
    model = nn.Sequential(layer, nn.Flatten(), nn.LazyLinear(4))
    x = torch.randn(12, 1, 6, 6) if not isinstance(layer, nn.Conv1d) else torch.randn(12, 1, 6)
    if isinstance(layer, nn.Conv2d) and layer.groups == 2:
        x = torch.randn(12, 2, 6, 6)
    model(x)  # materialise the lazy layer
    assert not stackable(model)
    assert batched_path(model, "cpu") == "vmap"
    if not isinstance(layer, nn.BatchNorm2d):
        params = {k: v.detach() for k, v in model.named_parameters()}
        y, owners = torch.randint(0, 4, (12,)), np.arange(12) % 3
        keys, training = np.random.default_rng(0).random((1, 12)), LocalTraining(1, 0.1)
        users, rows = user_deltas(
            model, params, x, y, owners, np.arange(3), keys, loss_for("multiclass"), training, batched=True
        )
        loop = loop_user_deltas(
            model, params, x, y, owners, np.arange(3), keys, loss_for("multiclass"), training
        )
        torch.testing.assert_close(rows[np.argsort(users)], loop, atol=1e-6, rtol=0)


def test_which_path_the_batched_request_takes():
    """The CNN on CPU goes through the stacked model, on a GPU through vmap; no convolution: vmap."""
    cnn = build_model("cnn", task="multiclass", feature_shape=(1, 28, 28), n_classes=10)
    mlp = build_model("mlp", task="binary", feature_shape=(30,), n_classes=2)
    assert batched_path(cnn, "cpu") == "stacked"
    assert batched_path(cnn, "cuda") == "vmap"
    assert batched_path(mlp, "cpu") == "vmap"


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a GPU: the batched path on --device cuda (vmap) is checked wherever one is present; "
    "CI has none",
)
@pytest.mark.parametrize("path", ["vmap", "stacked"])
def test_on_a_gpu_both_batched_paths_equal_the_loop(path):
    # float64: in float32, cuDNN's convolutions may run in TF32, whose 10-bit mantissa differs
    # between algorithms by far more than 1e-6.
    model, params, x, y, owners, rng = _stacked_setup("cnn", torch.float64)
    model, x, y = model.cuda(), x.cuda(), y.cuda()
    params = {k: v.detach() for k, v in model.named_parameters()}
    users = np.unique(owners)
    training = LocalTraining(2, 0.1, batch_size=4)
    keys = rng.random((training.epochs, len(y)))
    loss = loss_for("multiclass")
    loop = loop_user_deltas(model, params, x, y, owners, users, keys, loss, training)
    batched = batched_user_deltas(model, params, x, y, owners, users, keys, loss, training, path)
    _assert_same_clipped(batched, loop)


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
