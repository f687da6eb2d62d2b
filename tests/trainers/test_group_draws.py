"""uldp-group's guarantee does not depend on the random contribution flags (issue 11 point 12):
each silo's rate and steps come from its size before bounding, so two draws that keep different
records (and different numbers of them per silo) account the same epsilon."""

from __future__ import annotations

import numpy as np

from uldp.trainers.algorithms import TrainConfig, make_algorithm
from uldp.trainers.runner import accounting_plan, build_silos, user_epsilon

from .synthetic import make_data


def _draw(seed: int):
    data = make_data("binary", n=300, users=12, silos=3)
    cfg = TrainConfig(algo="uldp-group", rounds=5, sigma=2.0, group_k=2, batch_size=16, noise_seed=seed)
    silos = build_silos(data)
    algo = make_algorithm(cfg, silos, data.task)
    return algo, user_epsilon(accounting_plan(cfg, 5, len(silos), algo), 1e-5), silos


def test_two_draws_of_the_flags_give_the_same_epsilon():
    first, eps_first, silos = _draw(1)
    second, eps_second, _ = _draw(2)
    assert first.kept_sizes() != second.kept_sizes()  # the draws keep different records per silo
    assert eps_first == eps_second
    assert first.sizes == second.sizes == [s.size for s in silos]


def test_account_command_names_the_sizes_before_bounding():
    algo, _, silos = _draw(3)
    cfg = TrainConfig(algo="uldp-group", rounds=5, sigma=2.0, group_k=2, batch_size=16)
    flags = algo.account_flags(cfg, len(silos))[0]
    assert f"--silo-sizes {','.join(str(s.size) for s in silos)}" in flags
    assert sum(algo.kept_sizes()) < sum(algo.sizes)
    assert np.all(np.array(algo.kept_sizes()) <= np.array(algo.sizes))
