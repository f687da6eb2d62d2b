"""Command-line interface for `uldp`: privacy accounting for cross-silo federated learning."""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("uldp")
except PackageNotFoundError:
    # Running from a source tree that was never installed (e.g. `python -m uldp_cli` in a clone).
    __version__ = "0.1.0"
