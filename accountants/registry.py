"""The accountants by name, and the one function that accounts any event with any of them.

A new accountant is one module with a class satisfying `accountants.accountant.Accountant` and
one line here. Nothing outside this registry chooses an accountant by its name.
"""

from __future__ import annotations

from uldp.errors import InvalidParameter

from .accountant import Accountant, Accounted
from .events import Event, describe
from .rdp.accountant import RdpAccountant
from .tight.accountants import PldAccountant, PrvAccountant

ACCOUNTANTS: dict[str, Accountant] = {a.name: a for a in (RdpAccountant(), PldAccountant(), PrvAccountant())}


def accountant_named(name: str) -> Accountant:
    try:
        return ACCOUNTANTS[name]
    except (KeyError, TypeError):
        raise InvalidParameter(f"accountant must be one of {', '.join(ACCOUNTANTS)}, got {name!r}") from None


def account_event(event: Event, delta: float, accountant: str = "rdp", **options) -> Accounted:
    """Epsilon at `delta` of `event` by the named accountant.

    options: `conversion`, `orders`, `group_method`, `profile` for rdp (the others ignore them).
    An event the accountant does not support is refused with its reason, never approximated.
    """
    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
    chosen = accountant_named(accountant)
    reason = chosen.supports(event)
    if reason is not None:
        raise InvalidParameter(f"the {chosen.name} accountant does not account {describe(event)}: {reason}")
    return chosen.epsilon(event, delta, **options)
