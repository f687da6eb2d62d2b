"""--delta, --accountant, --conversion, --orders for `uldp dropout` and `uldp subject`.

The same flags as `accounting_options` in `uldp_cli/accounting_options.py`, without the group
options (--k, --group-method) these commands have no use for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import click

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
