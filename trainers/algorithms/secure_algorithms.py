"""The algorithms `uldp train --secure` applies to, by name, in registration order.

`registry.register` notes every spec that says `secure` (its weighting may run through Protocol
1, ULDP-FL §4.1, or its uploads through secure aggregation, Baek et al. Algorithm 3) and
`registry.unregister` forgets it again; `base.TrainConfig` refuses `secure=True` for any other
algorithm. The names live here, below both, because the registry names `TrainConfig` in its types
and `TrainConfig` must not import the registry back.
"""

from __future__ import annotations

# The names in the order the --algo choices list them, each with whether Protocol 1 computes its
# weighting (False: secure aggregation of observed releases, dp-fedavg-robust).
_SECURE: dict[str, bool] = {}


def note_secure(name: str, *, protocol1: bool = True) -> None:
    """`name` may run with --secure (`registry.register`, for a spec that says `secure`);
    `protocol1`: through Protocol 1's weighting, not secure aggregation."""
    _SECURE[name] = protocol1


def forget_secure(name: str) -> None:
    """`name` is no longer registered (`registry.unregister`); no-op if it never ran --secure."""
    _SECURE.pop(name, None)


def secure_names() -> tuple[str, ...]:
    """The algorithms whose weighting `--secure` runs through Protocol 1 (or, for
    dp-fedavg-robust, whose uploads it runs through secure aggregation)."""
    return tuple(_SECURE)


def private_sampling_names() -> tuple[str, ...]:
    """The algorithms whose weighting Protocol 1 computes (not secure aggregation's observed
    releases): private sampling (ULDP-FL §4.1) hides the user sample inside that protocol."""
    return tuple(name for name, protocol1 in _SECURE.items() if protocol1)
