"""The algorithms `uldp train --secure` applies to, by name, in registration order.

`registry.register` notes every spec that says `secure` (its weighting may run through Protocol
1, ULDP-FL §4.1, or its uploads through secure aggregation, Baek et al. Algorithm 3) and
`registry.unregister` forgets it again; `base.TrainConfig` refuses `secure=True` for any other
algorithm. The names live here, below both, because the registry names `TrainConfig` in its types
and `TrainConfig` must not import the registry back.
"""

from __future__ import annotations

# A dict as an ordered set: the names in the order the --algo choices list them.
_SECURE: dict[str, None] = {}


def note_secure(name: str) -> None:
    """`name` may run with --secure (`registry.register`, for a spec that says `secure`)."""
    _SECURE[name] = None


def forget_secure(name: str) -> None:
    """`name` is no longer registered (`registry.unregister`); no-op if it never ran --secure."""
    _SECURE.pop(name, None)


def secure_names() -> tuple[str, ...]:
    """The algorithms whose weighting `--secure` runs through Protocol 1 (or, for
    dp-fedavg-robust, whose uploads it runs through secure aggregation)."""
    return tuple(_SECURE)
