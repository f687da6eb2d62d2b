"""Users' own models, as a user would write them: factories for the tests of issue 35 and for
`benchmarks/per_user_training.py --model tests/trainers/own_models.py:residual_cnn`.

A factory takes what it needs of the data by name (`feature_shape`, `n_classes`, `n_outputs`,
`task`; trainers/own_model.py) and returns an nn.Module.
"""

from __future__ import annotations

import torch
from torch import nn


class ResidualBlock(nn.Module):
    """Two 3x3 convolutions with GroupNorm and a skip connection (a ResNet basic block, with
    GroupNorm for BatchNorm: per record, so per user)."""

    def __init__(self, channels: int, groups: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm1 = nn.GroupNorm(groups, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.norm1(self.conv1(x)))
        return torch.relu(x + self.norm2(self.conv2(out)))


class ResidualCNN(nn.Module):
    """A strided stem convolution and max-pooling (28x28 to 7x7), one residual block, global
    average pooling and a linear head: 1,386 weights for MNIST's ten classes."""

    def __init__(self, in_channels: int, n_outputs: int, channels: int = 8, groups: int = 4) -> None:
        super().__init__()
        self.stem = nn.Conv2d(in_channels, channels, 3, padding=1, stride=2)
        self.norm = nn.GroupNorm(groups, channels)
        self.block = ResidualBlock(channels, groups)
        self.head = nn.Linear(channels, n_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block(torch.max_pool2d(torch.relu(self.norm(self.stem(x))), 2))
        return self.head(x.mean(dim=(-2, -1)))


def residual_cnn(feature_shape: tuple[int, ...], n_outputs: int) -> nn.Module:
    """The residual GroupNorm CNN for images of `feature_shape` (channels, height, width)."""
    return ResidualCNN(feature_shape[0], n_outputs)


class SequenceGRU(nn.Module):
    """A GRU over a sequence of feature vectors (batch first), its last state to a linear head."""

    def __init__(self, n_features: int, n_outputs: int, hidden: int = 8) -> None:
        super().__init__()
        self.gru = nn.GRU(n_features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, n_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return self.head(out[:, -1])


def sequence_gru(feature_shape: tuple[int, ...], n_outputs: int) -> nn.Module:
    """The GRU for records of `feature_shape` (time steps, features)."""
    return SequenceGRU(feature_shape[-1], n_outputs)


def mlp(feature_shape: tuple[int, ...], n_outputs: int) -> nn.Module:
    """A two-layer MLP (nn.Linear, ReLU) on flat features."""
    return nn.Sequential(nn.Linear(feature_shape[0], 16), nn.ReLU(), nn.Linear(16, n_outputs))


def batchnorm_cnn(feature_shape: tuple[int, ...], n_outputs: int) -> nn.Module:
    """A CNN with BatchNorm: per-user training refuses it (it mixes records of a batch)."""
    return nn.Sequential(
        nn.Conv2d(feature_shape[0], 4, 3),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, n_outputs),
    )


class CountingLinear(nn.Module):
    """A linear layer that counts its calls in a buffer: state its forward pass changes."""

    def __init__(self, n_features: int, n_outputs: int) -> None:
        super().__init__()
        self.linear = nn.Linear(n_features, n_outputs)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.linear(x)


def counting_linear(feature_shape: tuple[int, ...], n_outputs: int) -> nn.Module:
    return CountingLinear(feature_shape[0], n_outputs)


def lazy_mlp(n_outputs: int) -> nn.Module:
    """An MLP whose first layer learns its input size on the first forward pass (nn.LazyLinear)."""
    return nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.Linear(8, n_outputs))
