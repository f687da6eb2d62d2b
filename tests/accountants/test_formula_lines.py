"""Assumption lines render formulas with their values next to them, never pasted into the
formula without an operator (issue 11 point 9: `N(0, 4 sigma^2 C^2 5)`, `sensitivity 2 5 C`)."""

import re

import pytest

from uldp.accountants.assumptions import accounting_assumptions
from uldp.trainers.algorithms.registry import plan_algorithm, plan_names

# A number right after a formula symbol (C, sigma, |S|, a power) or right after another number,
# separated by a space only: a value pasted into a formula where an operator belongs.
PASTED = re.compile(r"(?:\^\d+|\bC|\bsigma|\|S\||(?<![\w.,=])\d+(?:\.\d+)?)\s+\d")

SETTINGS = [
    dict(silos=5),
    dict(silos=None),
    dict(silo_sizes=[1000, 500, 2000], batch_size=64, local_epochs=2),
    dict(silos=4, user_q=0.25),
]


def _lines(algorithm: str, settings: dict) -> dict[str, str]:
    extra = dict(settings)
    if algorithm == "uldp-group":
        extra.setdefault("k", 4)
        if "batch_size" not in extra:
            extra["record_q"] = 0.01
    plan = plan_algorithm(algorithm, sigma=2.0, rounds=20, **extra)
    return accounting_assumptions(
        [plan], delta=1e-5, accountants=["rdp"], conversion="improved", orders="default"
    ).as_dict()


@pytest.mark.parametrize("algorithm", plan_names())
@pytest.mark.parametrize("settings", SETTINGS)
def test_no_number_is_pasted_into_a_formula(algorithm, settings):
    for label, text in _lines(algorithm, settings).items():
        assert not PASTED.search(text), f"{algorithm} {label}: {text}"


def test_the_pattern_catches_the_issue_examples():
    assert PASTED.search("each silo adds N(0, 4 sigma^2 C^2 5)")
    assert PASTED.search("user-level sensitivity 2 5 C")
    assert not PASTED.search("each silo adds N(0, 4 sigma^2 C^2 |S|) with |S| = 5")


def test_silo_count_is_stated_next_to_the_formula():
    noise = _lines("uldp-naive", dict(silos=5))["noise"]
    assert "N(0, 4 sigma^2 C^2 |S|) with |S| = 5" in noise
