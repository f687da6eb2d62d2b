"""--delta, --accountant, --conversion, --orders for `uldp dropout` and `uldp subject`.

The same flags as `accounting_options` in `uldp_cli/accounting_options.py`, without the group
options (--k, --group-method) these commands have no use for.
"""
from __future__ import annotations

from typing import Callable, Sequence

import click

from accountants.conversion import CONVERSIONS

from ..accounting_options import OrdersType
from ..options import OpenUnitInterval


def mechanism_flags(accountants: Sequence[str]) -> Callable:
    """Decorate a command with --delta, --accountant (one of `accountants`), --conversion, --orders."""
    def decorate(f: Callable) -> Callable:
        for opt in reversed([
            click.option("--delta", type=OpenUnitInterval(), default=1e-5, show_default=True,
                         help="Target delta, in (0, 1)."),
            click.option("--accountant", type=click.Choice(list(accountants)), default="rdp",
                         show_default=True, help="Accountant: " + ", ".join(accountants) + "."),
            click.option("--conversion", type=click.Choice(CONVERSIONS), default="improved",
                         show_default=True, help="RDP to DP: improved (Lemma 2) or classic."),
            click.option("--orders", type=OrdersType(), default="default", show_default=True,
                         help="RDP orders: default, tf-privacy, or a comma list."),
        ]):
            f = opt(f)
        return f
    return decorate


def accounting_label(accountant: str, conversion: str, orders: str) -> str:
    """'rdp, improved conversion, default orders' or 'pld'."""
    if accountant != "rdp":
        return accountant
    return f"rdp, {conversion} conversion, {orders} orders"
