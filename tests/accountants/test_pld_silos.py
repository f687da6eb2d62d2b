"""PLD group bound over unequal silos: each silo's own mechanism, the worst split of the k
records (issue 11 point 10), checked against dp-accounting's PLD accountant run directly."""

import pytest
from dp_accounting import dp_event, pld
from scipy.stats import binom

from uldp.accountants.account import account_plan
from uldp.accountants.events import ParallelSilos, SubsampledGaussian
from uldp.accountants.tight.pld import pld_epsilon
from uldp.trainers.algorithms import plan_algorithm

SILOS = ((1.5, 0.05, 60), (1.5, 0.2, 15))


def direct_worst_split(silos, delta, grid=2e-3):
    """k = 2 over two silos: the three splits (2, 0), (1, 1), (0, 2), each accounted by
    dp-accounting's PLDAccountant with the silo's own Poisson-sampled Gaussian or, for two
    records in one silo, the Binomial(2, q) mixture of Gaussians."""
    worst = 0.0
    for split in ((2, 0), (1, 1), (0, 2)):
        accountant = pld.PLDAccountant(value_discretization_interval=grid)
        for (sigma, q, steps), part in zip(silos, split):
            if part == 1:
                accountant.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps)
            elif part == 2:
                probs = binom.pmf([0, 1, 2], 2, q).tolist()
                accountant.compose(dp_event.MixtureOfGaussiansDpEvent(sigma, [0, 1, 2], probs), steps)
        worst = max(worst, accountant.get_epsilon(delta))
    return worst


def test_split_over_unequal_silos_matches_dp_accounting():
    ours = pld_epsilon(ParallelSilos(tuple(SubsampledGaussian(*s) for s in SILOS)), 1e-5, k=2)
    assert ours == pytest.approx(direct_worst_split(SILOS, 1e-5), rel=2e-3)


def test_issue_example_each_silo_own_mechanism():
    # uldp account --algo uldp-group --sigma 2 --rounds 20 --silo-sizes 1000,500,2000
    #   --batch-size 64 --local-epochs 2 --k 4: one made-up worst silo gave 88.30.
    plan = plan_algorithm(
        "uldp-group", sigma=2, rounds=20, silo_sizes=[1000, 500, 2000], batch_size=64, local_epochs=2, k=4
    )
    by = {
        g.method: g.epsilon
        for g in account_plan(plan, delta=1e-5, methods=("rdp", "normal", "pld"), accountants=("rdp",))
    }
    assert by["pld"] == pytest.approx(33.48, rel=1e-3)
    assert by["pld"] < by["normal"] < by["rdp"]
