"""The default torch thread count: the CPUs other processes leave free, at least one."""

from __future__ import annotations

import pytest

from uldp.trainers.threads import free_cpus, usable_cpus


@pytest.mark.parametrize(
    "cpus,load,expected",
    [(2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.4, 1), (2, 2.9, 1), (16, 3.2, 13), (1, 0.0, 1)],
)
def test_free_cpus_subtracts_the_load(cpus, load, expected):
    assert free_cpus(cpus, load) == expected


def test_defaults_read_this_machine():
    assert 1 <= free_cpus() <= usable_cpus()
