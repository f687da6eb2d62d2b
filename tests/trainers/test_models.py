"""Models of ULDP-FL §5.1 and the losses and metrics of their tasks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.trainers.models import (
    binary_loss,
    build_model,
    c_index,
    cox_loss,
    cross_entropy_loss,
    default_model_name,
    metric_value,
    parameter_count,
    roc_auc,
)


def test_paper_model_sizes():
    cnn = build_model("cnn", task="multiclass", feature_shape=(1, 28, 28), n_classes=10)
    mlp = build_model("mlp", task="binary", feature_shape=(30,), n_classes=2)
    logistic = build_model("logistic", task="binary", feature_shape=(13,), n_classes=2)
    cox = build_model("cox", task="survival", feature_shape=(7,), n_classes=0)
    assert 15_000 <= parameter_count(cnn) <= 25_000  # "about 20K"
    assert 4_000 <= parameter_count(mlp) <= 6_000  # "about 4K" / ~5K
    assert parameter_count(logistic) == 14 and parameter_count(cox) == 7  # "< 100 parameters"
    assert cnn(torch.zeros(4, 1, 28, 28)).shape == (4, 10)
    assert mlp(torch.zeros(4, 30)).shape == (4, 1)


def test_default_model_per_dataset():
    assert default_model_name("mnist", "multiclass", (1, 28, 28)) == "cnn"
    assert default_model_name("creditcard", "binary", (30,)) == "mlp"
    assert default_model_name("heart-disease", "binary", (13,)) == "logistic"
    assert default_model_name("gbsg2", "survival", (7,)) == "cox"


def test_linear_models_take_images_by_flattening_them():
    model = build_model("logistic", task="multiclass", feature_shape=(1, 28, 28), n_classes=10)
    assert sum(p.numel() for p in model.parameters()) == 28 * 28 * 10 + 10
    images = torch.rand(3, 1, 28, 28)
    assert model(images).shape == (3, 10)
    # The batched per-user path adds leading dimensions: only the pixels are flattened.
    assert model(torch.rand(2, 3, 1, 28, 28)).shape == (2, 3, 10)
    assert torch.allclose(model(images), model.inner(images.reshape(3, -1)))
    assert build_model("mlp", task="multiclass", feature_shape=(1, 28, 28), n_classes=10)(images).shape == (
        3,
        10,
    )


def test_build_model_rejects_mismatches():
    with pytest.raises(ValueError, match="1x28x28"):
        build_model("cnn", task="multiclass", feature_shape=(30,), n_classes=10)
    with pytest.raises(ValueError, match="survival"):
        build_model("mlp", task="survival", feature_shape=(7,), n_classes=0)
    with pytest.raises(ValueError, match="model must be one of"):
        build_model("resnet", task="binary", feature_shape=(7,), n_classes=2)


@pytest.mark.parametrize(
    "loss,make_y,out",
    [
        (cross_entropy_loss, lambda n: torch.randint(0, 4, (n,)), 4),
        (binary_loss, lambda n: torch.randint(0, 2, (n,)), 1),
        (cox_loss, lambda n: torch.stack([torch.rand(n) * 5, (torch.rand(n) > 0.3).float()], 1), 1),
    ],
)
def test_padding_does_not_change_the_loss(loss, make_y, out):
    torch.manual_seed(0)
    output, y = torch.randn(9, out), make_y(9)
    mask = torch.tensor([1.0] * 6 + [0.0] * 3)
    padded = loss(output, y, mask)
    plain = loss(output[:6], y[:6], torch.ones(6))
    assert torch.allclose(padded, plain)
    assert loss(output, y, torch.zeros(9)) == 0  # no real record: no loss, no gradient


def test_cox_loss_matches_breslow_formula():
    rng = np.random.default_rng(1)
    eta = rng.normal(size=12)
    time = rng.integers(1, 6, size=12).astype(float)  # ties on purpose
    event = (rng.random(12) < 0.6).astype(float)
    expected = 0.0
    for i in range(12):
        if event[i]:
            expected -= eta[i] - np.log(np.exp(eta[time >= time[i]]).sum())
    expected /= event.sum()
    got = cox_loss(
        torch.tensor(eta).unsqueeze(1),
        torch.tensor(np.stack([time, event], 1)),
        torch.ones(12, dtype=torch.float64),
    )
    assert got.item() == pytest.approx(expected, rel=1e-10)


def test_metrics_agree_with_reference_implementations():
    from lifelines.utils import concordance_index
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(2)
    scores = rng.normal(size=200)
    labels = (scores + rng.normal(size=200) > 0).astype(int)
    assert roc_auc(scores[:, None], labels) == pytest.approx(roc_auc_score(labels, scores))
    risk = np.round(rng.normal(size=150), 1)  # ties in score count 1/2
    time = rng.exponential(np.exp(-risk))
    event = (rng.random(150) < 0.7).astype(float)
    expected = concordance_index(time, -risk, event)  # lifelines scores survival, not risk
    assert c_index(risk, np.stack([time, event], 1)) == pytest.approx(expected, abs=1e-9)
    logits = rng.normal(size=(50, 3))
    y = rng.integers(0, 3, 50)
    assert metric_value("accuracy", logits, y) == np.mean(logits.argmax(1) == y)


def test_roc_auc_is_nan_with_one_class():
    assert np.isnan(roc_auc(np.arange(5.0), np.zeros(5, dtype=int)))


@settings(max_examples=30)
@given(st.lists(st.floats(-5, 5), min_size=2, max_size=30))
def test_c_index_of_a_perfect_ranking_is_one(times):
    times = np.array(times)
    y = np.stack([times, np.ones_like(times)], 1)
    value = c_index(-times, y)  # earlier failure, higher risk
    assert np.isnan(value) or value == 1.0
