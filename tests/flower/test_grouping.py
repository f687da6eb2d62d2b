"""The Flower tests share one pytest-xdist worker (tests/flower/conftest.py), as `.ci/run`'s
`--dist loadgroup` promises: pytest 9 silently dropped the group (pyproject.toml), the shared
simulation then started on both workers at once, and nothing failed but the suite's time."""

from __future__ import annotations

import pytest


def test_a_flower_test_is_in_the_flower_group_under_loadgroup(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by pytest-xdist with --dist loadgroup (.ci/run runs it so)")
    assert request.node.nodeid.endswith("@flower"), request.node.nodeid
