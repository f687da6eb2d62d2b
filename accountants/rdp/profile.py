"""An event's RDP curve, evaluated lazily and remembered order by order.

Group privacy by Lemma 6 needs the RDP at orders 2^c * beta for several group sizes; many of
these coincide, so one cache per event avoids evaluating the same order twice.
"""

from __future__ import annotations

import numpy as np

from ..events import Event
from .curves import event_rdp


class RdpProfile:
    """RDP of `event` (a run: composed over its steps, maximum over silos) at any orders."""

    def __init__(self, event: Event) -> None:
        self.mechanism = event
        self._known: dict[float, float] = {}

    def at(self, orders: np.ndarray) -> np.ndarray:
        orders = np.asarray(orders, dtype=float)
        missing = np.array(sorted({float(a) for a in orders} - self._known.keys()))
        if missing.size:
            self._known.update(zip(missing.tolist(), event_rdp(self.mechanism, missing).tolist()))
        return np.array([self._known[float(a)] for a in orders])
