"""uldp: privacy accounting and training for user-level DP in cross-silo federated learning.

The repository's folders install as one package: `uldp.accountants` (accounting, no torch),
`uldp.trainers` (data, models, algorithms), `uldp.crypto` (ULDP-FL Protocol 1) and `uldp.cli`
(the Click application). Importing `uldp` loads none of them: the entry points below are
resolved on first use, so `import uldp` stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from .errors import DataError, InvalidParameter, ProtocolError, UldpError, UnreachableBudget

try:
    __version__ = version("uldp")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.1.0"

# name -> module that defines it; imported when the name is first read.
_ENTRY_POINTS = {
    "account": "uldp.accountants",
    "plan_algorithm": "uldp.trainers.algorithms",
    "SubsampledGaussian": "uldp.accountants",
    "secure_weighted_sum": "uldp.crypto",
    "WeightingSession": "uldp.crypto",
}

__all__ = [
    "DataError",
    "InvalidParameter",
    "ProtocolError",
    "UldpError",
    "UnreachableBudget",
    "__version__",
    *_ENTRY_POINTS,
]


def __getattr__(name: str) -> Any:
    if name in _ENTRY_POINTS:
        return getattr(import_module(_ENTRY_POINTS[name]), name)
    raise AttributeError(f"module 'uldp' has no attribute {name!r}")
