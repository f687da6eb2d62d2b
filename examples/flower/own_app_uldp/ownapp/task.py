"""ownapp: a Flower / PyTorch app: the model, the data and the train/test functions.

The data are synthetic (nothing is downloaded): RECORDS records of FEATURES numbers in CLASSES
classes, each belonging to one of USERS users (a patient id, which FedAvg never reads), spread
over the partitions so that most users have records in several of them (a patient seen at
several hospitals). Every partition is a function of (partition id, number of partitions)
alone: a SuperNode rebuilds its own.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

USERS = 40
FEATURES = 8
CLASSES = 3
RECORDS = 600
TEST_RECORDS = 150


class Net(nn.Module):
    """A small multilayer perceptron."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, 16)
        self.fc2 = nn.Linear(16, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _records(count: int, rng: np.random.Generator, users: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`count` records around one centre per class, each user shifting its own a little."""
    centres = np.random.default_rng(0).normal(0.0, 1.5, (CLASSES, FEATURES))
    shifts = np.random.default_rng(1).normal(0.0, 0.5, (USERS, FEATURES))
    y = rng.integers(0, CLASSES, count)
    x = centres[y] + shifts[users] + rng.normal(0.0, 1.0, (count, FEATURES))
    return x.astype(np.float32), y.astype(np.int64)


def all_records(num_partitions: int = 3) -> dict[str, np.ndarray]:
    """Every partition's records: training records with their user and partition (silo), test
    records with their partition."""
    rng = np.random.default_rng(2)
    users = rng.permutation(np.arange(RECORDS) % USERS)  # every user holds 15 records
    x, y = _records(RECORDS, rng, users)
    test_users = rng.integers(0, USERS, TEST_RECORDS)
    x_test, y_test = _records(TEST_RECORDS, rng, test_users)
    return {
        "x": x,
        "y": y,
        "users": users,
        "silos": rng.integers(0, num_partitions, RECORDS),
        "x_test": x_test,
        "y_test": y_test,
        "silos_test": rng.integers(0, num_partitions, TEST_RECORDS),
    }


def load_data(partition_id: int, num_partitions: int, batch_size: int) -> tuple[DataLoader, DataLoader]:
    """Partition `partition_id`'s training and test loaders."""
    data = all_records(num_partitions)
    mine = data["silos"] == partition_id
    test = data["silos_test"] == partition_id
    train_set = TensorDataset(torch.as_tensor(data["x"][mine]), torch.as_tensor(data["y"][mine]))
    test_set = TensorDataset(torch.as_tensor(data["x_test"][test]), torch.as_tensor(data["y_test"][test]))
    trainloader = DataLoader(train_set, batch_size=batch_size, shuffle=True)
    return trainloader, DataLoader(test_set, batch_size=batch_size)


def load_records(partition_id: int, num_partitions: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Partition `partition_id`'s training records and the user of each (user_level_mod's input)."""
    data = all_records(num_partitions)
    mine = data["silos"] == partition_id
    return data["x"][mine], data["y"][mine], data["users"][mine]


def train(net: nn.Module, trainloader: DataLoader, epochs: int, lr: float, device: str) -> float:
    """Train the model on the training set; the mean training loss."""
    net.to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    net.train()
    running_loss = 0.0
    for _ in range(epochs):
        for x, y in trainloader:
            optimizer.zero_grad()
            loss = criterion(net(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
    return running_loss / max(1, epochs * len(trainloader))


def test(net: nn.Module, testloader: DataLoader, device: str) -> tuple[float, float]:
    """Validate the model on the test set: (mean loss, accuracy)."""
    net.to(device)
    criterion = nn.CrossEntropyLoss()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for x, y in testloader:
            outputs = net(x.to(device))
            loss += criterion(outputs, y.to(device)).item()
            correct += (outputs.argmax(1) == y.to(device)).sum().item()
    return loss / max(1, len(testloader)), correct / max(1, len(testloader.dataset))  # type: ignore[arg-type]
