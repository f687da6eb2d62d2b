"""The canaries of `uldp audit` (trainers/canaries.py) and the faults it catches (algorithms/faults.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.func import functional_call, grad

from uldp.errors import InvalidParameter
from uldp.trainers import canaries
from uldp.trainers.algorithms import TrainConfig, faults
from uldp.trainers.algorithms.dirac_rows import DiracRows
from uldp.trainers.audit import canary_count, check_auditable
from uldp.trainers.data import load_dataset
from uldp.trainers.runner import build_silos


def test_the_canary_block_changes_no_output_and_gets_an_exact_zero_gradient():
    """The block is last in the flat order, the output is the inner model's, its gradient is 0."""
    torch.manual_seed(0)
    inner = torch.nn.Linear(3, 2)
    model = canaries.CanaryBlock(inner, 5)
    assert list(dict(model.named_parameters()))[-1] == canaries.CANARY_PARAMETER
    x = torch.randn(4, 3)
    assert torch.equal(model(x), inner(x))
    params = dict(model.named_parameters())
    grads = grad(lambda p: functional_call(model, p, (x,)).square().sum())(params)
    assert torch.equal(grads[canaries.CANARY_PARAMETER], torch.zeros(5))
    assert grads["inner.weight"].abs().sum() > 0
    model(x).square().sum().backward()  # the autograd path (the loop over users) too
    assert torch.equal(model.canaries.weight.grad, torch.zeros(5))


@pytest.fixture(scope="module")
def heart():
    return load_dataset("heart-disease", users=100, seed=0)


def test_plant_puts_each_included_canary_in_every_silo_and_leaves_the_others_out(heart):
    """One record per silo for every included canary; none for the excluded; users n + m."""
    planted, c, of = canaries.plant(heart, 40, heart.n_silos, "every silo", np.random.default_rng(3))
    assert planted.n_users == heart.n_users + 40 and c.first_user == heart.n_users
    assert 5 < c.included.sum() < 35  # Bernoulli(1/2) for 40 canaries
    extra = planted.user_train[len(heart.y_train) :]
    assert np.array_equal(np.unique(extra), c.users[c.included])
    for user in c.users[c.included]:
        silos = planted.silo_train[planted.user_train == user]
        assert sorted(silos) == list(range(heart.n_silos))
    assert np.array_equal(of[: len(heart.y_train)], np.full(len(heart.y_train), -1))
    assert np.array_equal(planted.user_train[of >= 0], heart.n_users + of[of >= 0])


def test_silos_know_their_records_canary_coordinates(heart):
    """mark_silos aligns with build_silos: a canary record's coordinate is offset + its index."""
    planted, c, of = canaries.plant(heart, 10, 2, "two records", np.random.default_rng(1))
    silos = build_silos(planted)
    canaries.mark_silos(silos, planted, of, offset=14)
    for silo in silos:
        assert silo.canary is not None
        owners = silo.users[silo.canary >= 0]
        assert np.array_equal(silo.canary[silo.canary >= 0], 14 + owners - heart.n_users)
        real, dirac = canaries.split_canaries(silo, np.unique(silo.users), 0.5, torch.zeros(1))
        assert set(dirac.users) == set(owners) and set(real).isdisjoint(dirac.users)
        assert np.array_equal(dirac.coordinates, 14 + dirac.users - heart.n_users)
        assert torch.equal(dirac.values, torch.full((len(dirac),), canaries.CANARY_NORM * 0.5))


def test_dirac_rows_sum_as_their_dense_rows_would():
    """Scaling and the weighted sum of the sparse rows equal the dense matrix's, and clipping a
    row by its one entry gives the dense row's factor."""
    from uldp.trainers.per_user import clip_factors

    dirac = DiracRows(np.array([3, 9]), np.array([4, 1]), torch.tensor([100.0, 100.0]))
    dense = dirac.dense(6)
    assert dense.tolist() == [[0, 0, 0, 0, 100, 0], [0, 100, 0, 0, 0, 0]]
    factors, _ = clip_factors(dense.clone(), 2.0)
    sparse_factors, _ = clip_factors(dirac.values.unsqueeze(1), 2.0)
    assert torch.equal(factors, sparse_factors)
    clipped = dirac.scaled(sparse_factors)
    weights = torch.tensor([0.25, 0.5])
    expected = (weights * factors) @ dense + 1.0
    assert torch.allclose(clipped.add_sum_to(torch.ones(6), weights), expected)
    assert clipped.dense(6).norm(dim=1).tolist() == [2.0, 2.0]


def test_a_canary_gradient_is_a_dirac_row_whose_descent_raises_its_parameter():
    """DP-SGD's per-record rows: a canary record's gradient is -CANARY_NORM * C on its coordinate."""
    grads = canaries.plant_gradients(torch.ones(3, 6), np.array([-1, 5, -1]), 2.0)
    assert grads[1].tolist() == [0, 0, 0, 0, 0, -canaries.CANARY_NORM * 2.0]
    assert grads[0].tolist() == [1] * 6


def test_the_faults_break_exactly_what_they_say():
    """noise / 10, silo 0's factors 1, every positive weight 1; no fault changes nothing."""
    assert faults.noise_std(5.0, "noise") == 0.5 and faults.noise_std(5.0, None) == 5.0
    factors = torch.tensor([0.1, 1.0])
    assert faults.clip_factors(factors, "clip", 0).tolist() == [1.0, 1.0]
    assert faults.clip_factors(factors, "clip", 1) is factors
    w = np.array([[0.25, 0.0], [0.75, 1.0]])
    assert faults.weights(w, "weights").tolist() == [[1.0, 0.0], [1.0, 1.0]]
    assert faults.weights(w, "noise") is w
    with pytest.raises(InvalidParameter, match="fault must be one of"):
        TrainConfig(algo="uldp-avg", rounds=1, fault="everything")


@pytest.mark.parametrize(
    ("value", "users", "expected"), [(0.5, 400, 200), (200, 400, 200), (2, 2, 2), (0.01, 1000, 10)]
)
def test_canary_count_takes_a_count_or_a_fraction(value, users, expected):
    """A whole number as is, a fraction of the users rounded."""
    assert canary_count(value, users) == expected


@pytest.mark.parametrize(("value", "users"), [(401, 400), (1.5, 400), (0.001, 400), (1, 400), (-3, 400)])
def test_canary_count_refuses_what_cannot_be_audited(value, users):
    """More canaries than users, fewer than 2, or a fraction outside (0, 1)."""
    with pytest.raises(InvalidParameter, match="--canaries"):
        canary_count(value, users)


def test_check_auditable_names_what_can_be_audited():
    """Algorithms without canaries, faults that do not apply, and --secure are refused by name."""
    check_auditable("uldp-avg-w", "weights")
    for algo in ("userldp", "dp-fedavg-robust", "uldp-naive", "localitemdp"):
        with pytest.raises(InvalidParameter, match="no canary construction"):
            check_auditable(algo)
    with pytest.raises(InvalidParameter, match="not private"):
        check_auditable("default")
    with pytest.raises(InvalidParameter, match="does not apply"):
        check_auditable("uldp-group", "weights")
    with pytest.raises(InvalidParameter, match="--secure"):
        check_auditable("uldp-avg-w", secure=True)
