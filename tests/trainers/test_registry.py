"""The algorithm registry: one spec per algorithm, looked up by name, read without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from uldp.errors import InvalidParameter
from uldp.trainers.algorithms import (
    AlgorithmSpec,
    TrainConfig,
    accounted_names,
    algorithm_names,
    get_algorithm,
    plan_algorithm,
    register,
    secure_names,
    unregister,
)
from uldp.trainers.algorithms.fedavg import FedAvg
from uldp.trainers.algorithms.registry import plan_names


def test_built_in_algorithms_in_their_order():
    assert algorithm_names() == (
        "default",
        "uldp-naive",
        "uldp-group",
        "uldp-avg",
        "uldp-avg-w",
        "uldp-sgd",
        "uldp-sgd-w",
        "rpdp",
        "unidp",
        "dp-fedavg-robust",
        "userldp",
        "localgroupdp",
        "higradavgdp",
        "localitemdp",
    )
    assert accounted_names() == ("uldp-naive", "uldp-group", "uldp-avg", "uldp-sgd")
    assert plan_names() == ("uldp-naive", "uldp-group", "uldp-avg", "uldp-avg-w", "uldp-sgd", "uldp-sgd-w")
    assert secure_names() == ("uldp-avg-w", "uldp-sgd-w", "dp-fedavg-robust")


def test_weighted_variants_release_their_base_algorithms_mechanism():
    for weighted, base in (("uldp-avg-w", "uldp-avg"), ("uldp-sgd-w", "uldp-sgd")):
        spec = get_algorithm(weighted)
        assert spec.private and spec.accounted_as == base
        plan, base_plan = plan_algorithm(weighted, sigma=2, rounds=5), plan_algorithm(base, sigma=2, rounds=5)
        # Its own name, the base algorithm's mechanism and assumptions, and a line saying why.
        assert plan.algorithm == weighted
        assert (plan.mechanism, plan.group_k) == (base_plan.mechanism, base_plan.group_k)
        assert {k: v for k, v in plan.assumptions.items() if k != "weights"} == base_plan.assumptions
        assert f"the guarantee is {base}'s" in plan.assumptions["weights"]


def test_default_is_not_private_and_has_no_plan():
    spec = get_algorithm("default")
    assert not spec.private and spec.accounted_as is None
    with pytest.raises(InvalidParameter, match="default is not private"):
        plan_algorithm("default", sigma=1.0, rounds=1)


def test_record_level_algorithms_are_private_but_have_no_user_level_plan():
    for name in ("rpdp", "unidp"):
        spec = get_algorithm(name)
        assert spec.private and spec.record_level and spec.accounted_as is None
        with pytest.raises(InvalidParameter, match="accounted per record: use `uldp personalize`"):
            plan_algorithm(name, sigma=1.0, rounds=1)
    assert [
        n for n in ("uldp-avg", "uldp-avg-w", "uldp-sgd", "uldp-sgd-w") if get_algorithm(n).user_budgets
    ] == [
        "uldp-avg",
        "uldp-avg-w",
        "uldp-sgd",
        "uldp-sgd-w",
    ]
    with pytest.raises(InvalidParameter, match="record-level algorithm is accounted per record"):
        AlgorithmSpec(name="x", help="", build=lambda *a: None, plan=lambda i: None, record_level=True)


def test_unknown_names_are_refused_with_the_choices():
    with pytest.raises(InvalidParameter, match="algo must be one of default, uldp-naive"):
        get_algorithm("fedprox")
    with pytest.raises(InvalidParameter, match="--secure applies to uldp-avg-w and uldp-sgd-w"):
        TrainConfig(algo="uldp-avg", rounds=1, secure=True)


def test_register_and_unregister():
    spec = AlgorithmSpec(name="plain", help="FedAvg again.", build=lambda cfg, silos, task: FedAvg())
    assert register(spec) is spec
    try:
        assert algorithm_names()[-1] == "plain" and "plain" not in accounted_names()
        with pytest.raises(InvalidParameter, match="already registered"):
            register(spec)
    finally:
        assert unregister("plain") is spec
    assert "plain" not in algorithm_names()


def test_a_secure_plug_in_may_run_secure_until_it_is_unregistered():
    # The names --secure applies to are kept beside the registry (algorithms/secure_algorithms.py,
    # below base.TrainConfig): register and unregister must keep them in step with the specs.
    spec = AlgorithmSpec(name="plain-secure", help="", build=lambda cfg, silos, task: FedAvg(), secure=True)
    register(spec)
    try:
        assert secure_names()[-1] == "plain-secure"
        assert TrainConfig(algo="plain-secure", rounds=1, secure=True).secure
    finally:
        unregister("plain-secure")
    assert "plain-secure" not in secure_names()
    with pytest.raises(InvalidParameter, match="--secure applies to"):
        TrainConfig(algo="plain-secure", rounds=1, secure=True)


def test_a_spec_without_plan_cannot_be_accounted_as_another():
    with pytest.raises(InvalidParameter, match="needs a plan"):
        AlgorithmSpec(name="x", help="", build=lambda cfg, silos, task: FedAvg(), accounted_as="uldp-avg")


def test_reading_the_registry_imports_no_torch():
    code = (
        "import sys\n"
        "from uldp.trainers.algorithms import plan_algorithm, plan_names\n"
        "for name in plan_names():\n"
        "    plan_algorithm(name, sigma=1.0, rounds=3, k=2, record_q=0.1)\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
