"""Options shared by `uldp account` and `uldp calibrate`, and the plans they build.

The option decorators keep both commands' flags identical; `build_plans` turns the parsed
options into the library's `Plan`s (one per algorithm, or a bare mechanism), so a command body
only parses, calls the library and renders.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from uldp.accountants.account import ACCOUNTANTS, GROUP_METHODS
from uldp.accountants.algorithms import Plan
from uldp.accountants.conversion import CONVERSIONS
from uldp.accountants.mechanism import SubsampledGaussian
from uldp.accountants.orders import Orders
from uldp.errors import UldpError
from uldp.trainers.algorithms import plan_algorithm

from .options import AlgorithmChoice, AlgorithmOption, Probability, comma_list_option, delta_option


class OrdersType(click.ParamType):
    """`default`, `tf-privacy`, or a comma list of orders > 1."""

    name = "orders"

    def convert(self, value, param, ctx):
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        try:
            return Orders.parse(value if isinstance(value, Orders) else str(value))
        except UldpError as err:
            self.fail(str(err), param, ctx)


def _expand_all(values: list[str]) -> list[str]:
    return list(GROUP_METHODS) if "all" in values else values


# Shared by every accounting command (account, calibrate, dropout, subject).
conversion_option = click.option(
    "--conversion",
    type=click.Choice(CONVERSIONS),
    default="improved",
    show_default=True,
    help="RDP to DP: improved (Lemma 2) or classic.",
)
orders_option = click.option(
    "--orders",
    type=OrdersType(),
    default="default",
    show_default=True,
    help="RDP orders: default, tf-privacy, or a comma list.",
)


def accounting_options(*, many: bool) -> Callable:
    """--delta, --accountant, --conversion, --orders, --k, --group-method.

    `many`: account takes lists of k, group methods and accountants; calibrate takes one each.
    """
    if many:
        k_opt = comma_list_option(
            "--k",
            "ks",
            item_type=click.IntRange(min=1),
            default=[1],
            show_default=True,
            help="Group sizes (repeat or comma list); 1 = one record.",
        )
        method_opt = comma_list_option(
            "--group-method",
            "methods",
            item_type=click.Choice([*GROUP_METHODS, "all"]),
            default=["rdp", "normal"],
            show_default=True,
            help="rdp (Lemma 6), normal (Lemma 5), pld (tight), or all.",
        )
        acct_opt = comma_list_option(
            "--accountant",
            "accountants",
            item_type=click.Choice(ACCOUNTANTS),
            default=["rdp"],
            show_default=True,
            help="Record-level accountant(s): rdp, pld, prv (comma list to compare).",
        )
    else:
        k_opt = click.option(
            "--k",
            "k",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Group size the budget must hold for; 1 = one record.",
        )
        method_opt = click.option(
            "--group-method",
            "method",
            type=click.Choice(GROUP_METHODS),
            default="rdp",
            show_default=True,
            help="Group conversion when k > 1.",
        )
        acct_opt = click.option(
            "--accountant",
            "accountant",
            type=click.Choice(ACCOUNTANTS),
            default="rdp",
            show_default=True,
            help="Record-level accountant.",
        )

    def decorate(f: Callable) -> Callable:
        for opt in reversed([delta_option, k_opt, method_opt, acct_opt, conversion_option, orders_option]):
            f = opt(f)
        return f

    return decorate


def algorithm_options(*, many: bool) -> Callable:
    """--algo (the registry's private algorithms) and their hyper-parameters (ULDP-FL §3)."""
    help_text = "Account a ULDP-FL algorithm instead of a bare mechanism."
    if many:
        algo = comma_list_option(
            "--algo",
            "algos",
            item_type=AlgorithmChoice(accounted=True),
            default=None,
            cls=AlgorithmOption,
            help=help_text + " Repeat or comma list to compare.",
        )
    else:
        algo = click.option(
            "--algo",
            "algo",
            type=AlgorithmChoice(accounted=True),
            default=None,
            cls=AlgorithmOption,
            help=help_text,
        )

    def decorate(f: Callable) -> Callable:
        for opt in reversed(
            [
                algo,
                click.option(
                    "--rounds",
                    type=click.IntRange(min=0),
                    default=None,
                    help="Training rounds T (with --algo).",
                ),
                click.option(
                    "--user-q",
                    type=Probability(),
                    default=1.0,
                    show_default=True,
                    help="User-level Poisson sampling rate per round (Algorithm 4).",
                ),
                click.option(
                    "--silos", type=click.IntRange(min=1), default=None, help="Number of silos |S|."
                ),
                comma_list_option(
                    "--silo-sizes",
                    item_type=click.IntRange(min=1),
                    default=None,
                    help="Records per silo (comma list), for --batch-size.",
                ),
                click.option(
                    "--batch-size",
                    type=click.IntRange(min=1),
                    default=None,
                    help="uldp-group: DP-SGD batch size (sampling rate = batch / silo size).",
                ),
                click.option(
                    "--record-q",
                    type=Probability(),
                    default=None,
                    help="uldp-group: DP-SGD record sampling rate in every silo.",
                ),
                click.option(
                    "--local-epochs",
                    type=click.IntRange(min=1),
                    default=1,
                    show_default=True,
                    help="Local epochs Q per round.",
                ),
            ]
        ):
            f = opt(f)
        return f

    return decorate


def build_plan(
    algo: str | None,
    *,
    sigma: float,
    q: float | None,
    steps: int | None,
    rounds: int | None,
    user_q: float,
    silos,
    silo_sizes,
    batch_size,
    record_q,
    local_epochs: int,
    k: int | None,
) -> Plan:
    """A Plan for one algorithm, or for the bare mechanism given by --q and --steps."""
    silo_sizes = silo_sizes or None  # an unset repeatable option arrives as []
    if algo is None:
        if q is None or steps is None:
            raise click.UsageError("give --q and --steps, or --algo with --rounds")
        mechanism = SubsampledGaussian(sigma, q, steps)
        return Plan(
            "mechanism",
            mechanism,
            None,
            {
                "mechanism": f"{steps} steps of a Poisson-subsampled Gaussian, sigma = {sigma:g}, q = {q:g}",
                "neighbouring": "add or remove one record (k records for a group)",
            },
        )
    if q is not None or steps is not None:
        raise click.UsageError(
            "with --algo the algorithm's --rounds, --user-q, --record-q ... "
            "replace --q and --steps; drop --q/--steps"
        )
    if rounds is None:
        raise click.UsageError("--algo needs --rounds")
    try:
        return plan_algorithm(
            algo,
            sigma=sigma,
            rounds=rounds,
            user_q=user_q,
            silos=silos,
            silo_sizes=silo_sizes,
            batch_size=batch_size,
            record_q=record_q,
            local_epochs=local_epochs,
            k=k,
        )
    except UldpError as err:
        raise click.UsageError(str(err)) from None


method_labels = {
    ("record", "rdp"): "record level (RDP)",
    ("record", "pld"): "record level (PLD)",
    ("record", "prv"): "record level (PRV)",
    ("rdp", "rdp"): "Lemma 6 (RDP group)",
    ("normal", "rdp"): "Lemma 5 (DP group, RDP base)",
    ("pld", "pld"): "PLD mixture of Gaussians",
}


def expand_methods(methods: list[str]) -> list[str]:
    return list(dict.fromkeys(_expand_all(methods)))
