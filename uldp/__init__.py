"""uldp: privacy accounting and training for user-level DP in cross-silo federated learning.

The repository's folders install as one package: `uldp.accountants` (accounting, no torch),
`uldp.trainers` (data, models, algorithms), `uldp.crypto` (ULDP-FL Protocol 1) and `uldp.cli`
(the Click application). Importing `uldp` loads none of them: the entry points below are
resolved on first use, so `import uldp` stays cheap; `dir(uldp)` lists them (docs/library.md).

    import uldp
    uldp.calibrate(epsilon=3, delta=1e-5, q=0.01, epochs=10).sigma   # uldp calibrate
    uldp.account(sigma=1.1, q=0.01, steps=1000).epsilon              # uldp account
    uldp.train(my_model, "mnist", algo="uldp-avg", rounds=5).model   # uldp train (uldp/training.py)
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from .errors import DataError, EngineError, InvalidParameter, ProtocolError, UldpError, UnreachableBudget

try:
    __version__ = version("uldp")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.1.0"

# name -> module that defines it; imported when the name is first read.
_ENTRY_POINTS = {
    "calibrate": "uldp.accounting",
    "account": "uldp.accounting",
    "Calibrated": "uldp.accounting",
    "Accounting": "uldp.accounting",
    "train": "uldp.training",
    "TrainRun": "uldp.training",
    "plan_algorithm": "uldp.trainers.algorithms",
    "SubsampledGaussian": "uldp.accountants",
    "secure_weighted_sum": "uldp.crypto",
    "WeightingSession": "uldp.crypto",
}

__all__ = [
    "DataError",
    "EngineError",
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


def __dir__() -> list[str]:
    # What a newcomer may use (the lazily resolved entry points included) and the standard module
    # attributes (__doc__, __file__, __path__, ...), not the helpers this module imports for itself.
    return sorted({*__all__, *(name for name in globals() if name.startswith("__") and name.endswith("__"))})
