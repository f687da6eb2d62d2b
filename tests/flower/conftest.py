"""The `slow` mark of the Flower deployment tests (`pytest -m "not slow"` skips them)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: starts a real Flower deployment (30-60 s each)")
