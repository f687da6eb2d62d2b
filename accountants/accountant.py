"""What every accountant is: a name, which events it accounts, and epsilon of those events.

As in dp-accounting (`dp_accounting.privacy_accountant.PrivacyAccountant.supports`), an
accountant says which events it can turn into a guarantee; here `supports` returns None or a
one-line reason, and `accountants.registry.account_event` refuses an unsupported event with
that reason instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .events import Event


@dataclass(frozen=True)
class Accounted:
    """An upper bound on epsilon at the delta asked for, and how it was reached."""

    epsilon: float
    order: float | None = None  # RDP order of the guarantee (RDP only)
    base_order: float | None = None  # order of the record-level RDP it came from (Lemma 6)
    group_size_used: int | None = None  # k rounded up to a power of two by Lemma 6, else k
    note: str = ""


class Accountant(Protocol):
    """Turns events into (epsilon, delta) guarantees under add-or-remove adjacency."""

    name: str
    converts_rdp: bool  # whether the conversion option shapes its guarantee

    def supports(self, event: Event) -> str | None:
        """None when `event` can be accounted, else a one-line reason why not."""

    def epsilon(self, event: Event, delta: float, **options) -> Accounted:
        """An upper bound on epsilon at `delta`; options the accountant does not use are ignored."""
