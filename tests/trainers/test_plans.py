"""ULDP-FL algorithms' plans (Theorems 1-3, Algorithm 4) compiled into mechanisms."""

import math

import pytest

from uldp.accountants.account import record_level
from uldp.accountants.events import ParallelSilos, SubsampledGaussian
from uldp.trainers.algorithms import plan_algorithm


def test_avg_with_user_sampling_is_a_subsampled_gaussian_per_round():
    plan = plan_algorithm("uldp-avg", sigma=5, rounds=100, user_q=0.5)
    assert plan.mechanism == SubsampledGaussian(5, 0.5, 100)
    assert plan.group_k is None and "Algorithm 4" in plan.assumptions["user sampling"]


def test_theorems_1_and_3_closed_form():
    # Without sub-sampling ULDP-NAIVE and ULDP-AVG are T Gaussians: eps = min over alpha of
    # T alpha / (2 sigma^2) + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha - 1).
    sigma, rounds, delta = 3.0, 50, 1e-5
    for algo in ("uldp-naive", "uldp-avg", "uldp-sgd"):
        plan = plan_algorithm(algo, sigma=sigma, rounds=rounds, local_epochs=5)
        alphas = [1 + x / 100 for x in range(5, 100_000)]
        closed = min(
            rounds * a / (2 * sigma**2) + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1)
            for a in alphas
        )
        got = record_level(plan.mechanism, delta).epsilon
        # The accountant refines the order over the reals, so it may beat this 0.01 grid slightly.
        assert closed * (1 - 1e-5) <= got <= closed * 1.001


def test_group_steps_follow_local_epochs_and_sampling_rate():
    plan = plan_algorithm("uldp-group", sigma=1.0, rounds=10, record_q=0.03, local_epochs=2, k=4, silos=3)
    assert plan.mechanism == SubsampledGaussian(1.0, 0.03, 10 * math.ceil(2 / 0.03))
    assert plan.group_k == 4


def test_group_with_batch_size_gives_one_mechanism_per_distinct_silo():
    plan = plan_algorithm("uldp-group", sigma=1.0, rounds=5, batch_size=50, silo_sizes=[1000, 500, 1000], k=2)
    assert isinstance(plan.mechanism, ParallelSilos)
    assert set(plan.mechanism.silos) == {
        SubsampledGaussian(1.0, 0.05, 5 * 20),
        SubsampledGaussian(1.0, 0.1, 5 * 10),
    }


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(algorithm="uldp-group", record_q=0.1), "--k"),
        (dict(algorithm="uldp-group", k=2), "exactly one of"),
        (dict(algorithm="uldp-group", k=2, batch_size=10), "--silo-sizes"),
        (dict(algorithm="uldp-group", k=2, record_q=0.1, silos=2, silo_sizes=[5, 5, 5]), "disagrees"),
        (dict(algorithm="fedavg"), "algorithm must be one of"),
    ],
)
def test_bad_hyper_parameters_are_refused(kwargs, message):
    algorithm = kwargs.pop("algorithm")
    with pytest.raises(ValueError, match=message):
        plan_algorithm(algorithm, sigma=1.0, rounds=10, **kwargs)
