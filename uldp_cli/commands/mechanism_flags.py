"""--delta, --accountant, --conversion, --orders for `uldp dropout` and `uldp subject`.

The same flags as `accounting_options` in `uldp_cli/accounting_options.py`, without the group
options (--k, --group-method) these commands have no use for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import click

from uldp.accountants.registry import accountant_named

from ..accounting_options import conversion_option, delta_option, orders_option


def mechanism_flags(accountants: Sequence[str]) -> Callable:
    """Decorate a command with --delta, --accountant (one of `accountants`), --conversion, --orders."""

    def decorate(f: Callable) -> Callable:
        for opt in reversed(
            [
                delta_option,
                click.option(
                    "--accountant",
                    type=click.Choice(list(accountants)),
                    default="rdp",
                    show_default=True,
                    help="Accountant: " + ", ".join(accountants) + ".",
                ),
                conversion_option,
                orders_option,
            ]
        ):
            f = opt(f)
        return f

    return decorate


def accounting_label(accountant: str, conversion: str, orders: str) -> str:
    """'rdp, improved conversion, default orders' or 'pld'."""
    if not uses_rdp(accountant):
        return accountant
    return f"rdp, {conversion} conversion, {orders} orders"


def uses_rdp(accountant: str) -> bool:
    """Whether the accountant's figures depend on the RDP conversion and orders."""
    return accountant_named(accountant).converts_rdp
