"""The models of ULDP-FL §5.1 and the losses and metrics of their tasks.

- MNIST: a CNN of about 20K parameters (§5.1.1: "a CNN with about 20K parameters").
- Creditcard: an MLP of about 5K parameters (§5.1.1: "a neural network with about 4K
  parameters"; ours has 5,105 on the 30 Creditcard features).
- HeartDisease: logistic regression, as FLamby's Fed-Heart-Disease baseline (§5.1.1, [42]).
- TcgaBrca stand-in (gbsg2): a linear Cox proportional-hazards model, trained on the Cox
  partial likelihood and scored by Harrell's C-index, as FLamby's Fed-TCGA-BRCA baseline.

Every loss takes a `mask` of real records (1) and padding (0) so that users of different record
counts can be trained together (trainers/per_user.py); a batch without real records has loss 0
and hence gradient 0, which leaves a model unchanged under plain SGD.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from uldp.errors import InvalidParameter

LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

MODELS = ("cnn", "mlp", "logistic", "cox")


class MnistCNN(nn.Module):
    """Two 5x5 convolutions (16, 32 channels) with max-pooling, one linear layer: 18,378 weights."""

    def __init__(self, n_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc = nn.Linear(32 * 4 * 4, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(-3))


class Dense(nn.Module):
    """y = x W + b with W stored (in, out), initialised as nn.Linear.

    The transpose of nn.Linear's layout: a per-user weight gradient x^T dy then comes out of the
    batched matrix product already in W's memory order, which saves a strided copy per user in
    trainers/per_user.py.
    """

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        reference = nn.Linear(n_in, n_out)
        self.weight = nn.Parameter(reference.weight.detach().t().contiguous())
        self.bias = nn.Parameter(reference.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight + self.bias


class MLP(nn.Module):
    """features -> 80 -> 32 -> outputs with ReLU: 5,105 weights on 30 features and one logit."""

    def __init__(self, n_features: int, n_outputs: int, hidden: tuple[int, ...] = (80, 32)) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = n_features
        for h in hidden:
            layers += [Dense(width, h), nn.ReLU()]
            width = h
        layers.append(Dense(width, n_outputs))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class LogisticRegression(nn.Module):
    """One linear layer; with one output it is binary logistic regression (sigmoid + BCE)."""

    def __init__(self, n_features: int, n_outputs: int = 1) -> None:
        super().__init__()
        self.linear = nn.Linear(n_features, n_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


class CoxLinear(nn.Module):
    """Linear log-risk score eta = beta . x (no intercept: the partial likelihood cancels it)."""

    def __init__(self, n_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(n_features, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


class Flattened(nn.Module):
    """`inner` applied to the last `dims` dimensions of the input flattened into one."""

    def __init__(self, inner: nn.Module, dims: int) -> None:
        super().__init__()
        self.inner = inner
        self.dims = dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x.flatten(-self.dims))


def default_model_name(dataset: str, task: str, feature_shape: tuple[int, ...]) -> str:
    """The paper's model for a dataset; for a user's own table, an MLP (or Cox for survival)."""
    if task == "survival":
        return "cox"
    if len(feature_shape) == 3:
        return "cnn"
    if dataset == "heart-disease":
        return "logistic"
    return "mlp"


def build_model(name: str, *, task: str, feature_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    """A model for the task: multiclass has one logit per class, binary one logit, survival one score."""
    if name not in MODELS:
        raise InvalidParameter(f"model must be one of {', '.join(MODELS)}, got {name!r}")
    outputs = n_classes if task == "multiclass" else 1
    if name == "cnn":
        if tuple(feature_shape) != (1, 28, 28):
            raise InvalidParameter(f"the CNN takes 1x28x28 images, got features of shape {feature_shape}")
        return MnistCNN(outputs)
    if len(feature_shape) != 1:
        if name not in ("logistic", "mlp") or task == "survival":
            raise InvalidParameter(f"model {name!r} takes flat feature vectors, got shape {feature_shape}")
        # Images into a linear model or an MLP: flatten the pixels first (the batched per-user
        # path adds leading dimensions, so flatten only the feature dimensions).
        flat = build_model(name, task=task, feature_shape=(math.prod(feature_shape),), n_classes=n_classes)
        return Flattened(flat, len(feature_shape))
    if name == "cox":
        if task != "survival":
            raise InvalidParameter("the Cox model is for survival tasks")
        return CoxLinear(feature_shape[0])
    if task == "survival":
        raise InvalidParameter(f"survival tasks need the cox model, got {name!r}")
    if name == "logistic":
        return LogisticRegression(feature_shape[0], outputs)
    return MLP(feature_shape[0], outputs)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def cross_entropy_loss(output: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean softmax cross-entropy over real records (multiclass)."""
    per_record = nn.functional.cross_entropy(output, y, reduction="none")
    return _masked_mean(per_record, mask)


def binary_loss(output: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean logistic loss over real records: one logit per record, labels 0/1."""
    per_record = nn.functional.binary_cross_entropy_with_logits(
        output.squeeze(-1), y.to(output.dtype), reduction="none"
    )
    return _masked_mean(per_record, mask)


def cox_loss(output: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Negative Cox partial log-likelihood (Breslow ties), averaged over real events.

    y[:, 0] is the time, y[:, 1] the event indicator. For each real record i with an event,
    -(eta_i - log sum_{j real, t_j >= t_i} exp(eta_j)); the risk set is taken within the batch,
    as in FLamby's TCGA-BRCA baseline.
    """
    eta = output.squeeze(-1)
    time, event = y[:, 0], y[:, 1] * mask
    at_risk = (time.unsqueeze(0) >= time.unsqueeze(1)) & (mask.unsqueeze(0) > 0)
    scores = eta.unsqueeze(0).expand(eta.shape[0], -1)
    log_risk = torch.logsumexp(scores.masked_fill(~at_risk, float("-inf")), dim=1)
    # A padded record has an empty risk set (-inf); its event weight is 0, so keep it finite.
    log_risk = torch.where(torch.isfinite(log_risk), log_risk, torch.zeros_like(log_risk))
    return -((eta - log_risk) * event).sum() / event.sum().clamp(min=1.0)


def loss_for(task: str) -> LossFn:
    """The training loss of a task."""
    try:
        return {"multiclass": cross_entropy_loss, "binary": binary_loss, "survival": cox_loss}[task]
    except KeyError:
        raise InvalidParameter(f"task must be multiclass, binary or survival, got {task!r}") from None


def accuracy(output: np.ndarray, y: np.ndarray) -> float:
    """Share of correct predictions: argmax of the logits, or logit > 0 for one output."""
    if output.ndim == 2 and output.shape[1] > 1:
        predicted = output.argmax(axis=1)
    else:
        predicted = (output.reshape(-1) > 0).astype(np.int64)
    return float((predicted == y).mean())


def roc_auc(scores: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve from scores (Mann-Whitney U with mid-ranks for ties).

    NaN when the test set holds one class only.
    """
    from scipy.stats import rankdata

    scores = scores.reshape(len(y), -1)[:, -1]
    positives = y == 1
    n_pos, n_neg = int(positives.sum()), int((~positives).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def c_index(risk: np.ndarray, y: np.ndarray) -> float:
    """Harrell's concordance index: over comparable pairs (t_i < t_j, event_i), the share where
    the earlier failure has the higher risk score; ties in score count one half. NaN if no pair."""
    risk = risk.reshape(-1)
    time, event = y[:, 0], y[:, 1] > 0
    comparable = (time[:, None] < time[None, :]) & event[:, None]
    total = comparable.sum()
    if total == 0:
        return float("nan")
    concordant = (risk[:, None] > risk[None, :]) & comparable
    tied = (risk[:, None] == risk[None, :]) & comparable
    return float((concordant.sum() + 0.5 * tied.sum()) / total)


def metric_value(metric: str, output: np.ndarray, y: np.ndarray) -> float:
    """The task metric named by FederatedData.metric."""
    if metric == "accuracy":
        return accuracy(output, y)
    if metric == "roc_auc":
        return roc_auc(output, y)
    if metric == "c_index":
        return c_index(output, y)
    raise InvalidParameter(f"metric must be accuracy, roc_auc or c_index, got {metric!r}")
