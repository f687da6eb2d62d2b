"""The `slow` mark of the Flower tests that start Ray or a deployment (`pytest -m "not slow"`
skips them)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: starts Ray or a real Flower deployment (20 s to minutes)")


# tryfirst: pytest-xdist's own hook turns the xdist_group mark into the test's group (a suffix of
# its node id), so the mark must be there before it runs. Under pytest 9 that suffix is lost
# (pyproject.toml pins pytest below 9): the Flower tests were spread over both workers, each
# starting the shared simulation, until issue 34 found it.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`.ci/run`: `-n 2 --dist loadgroup`) every Flower test runs on one
    worker, one after another: each starts Ray or a deployment of its own, which two at once on
    two cores would slow past their timeouts."""
    here = __file__.rsplit("/", 1)[0]
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.xdist_group("flower"))
