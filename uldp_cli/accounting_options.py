"""Options shared by `uldp account` and `uldp calibrate`, and the plans they build.

The option decorators keep both commands' flags identical; `build_plans` turns the parsed
options into the library's `Plan`s (one per algorithm, or a bare mechanism), so a command body
only parses, calls the library and renders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import click

from uldp.accountants.account import ACCOUNTANTS, GROUP_METHODS
from uldp.accountants.conversion import CONVERSIONS
from uldp.accountants.events import MAX_PLD_GROUP_K
from uldp.accountants.orders import Orders
from uldp.accountants.plan import Plan
from uldp.accountants.private_sampling import DEFAULT_SLOTS, MAX_SLOTS, PrivateSampling, private_rate
from uldp.accounting import mechanism_schedule, plan_for, unused_keyword
from uldp.errors import UldpError
from uldp.trainers.algorithms import algorithm_names, get_algorithm
from uldp.trainers.algorithms.secure_algorithms import private_sampling_names

from .options import (
    COUNT_MAX,
    AlgorithmChoice,
    AlgorithmOption,
    PositiveFloat,
    PositiveInt,
    Probability,
    comma_list_option,
    delta_option,
    given_source,
)

#: --k: group sizes up to 2^20 records. Lemma 6 doubles the order once per factor of two and the
#: RDP group bound at 2^20 is already ~1e17 for any useful sigma; the PLD group method stops
#: earlier (uldp.accountants.events.MAX_PLD_GROUP_K).
K_MAX = 2**20
#: --silos: the plans build one mechanism per silo (1e6 took 16 s); cross-silo FL has few silos.
SILOS_MAX = 10**4
#: --local-epochs: Q; each silo runs T ceil(Q / gamma) steps.
LOCAL_EPOCHS_MAX = 10**6


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


def k_list_option(help_text: str) -> Callable:
    """--k as a list of group sizes (repeat or comma list), default [1]."""
    return comma_list_option(
        "--k", "ks", item_type=PositiveInt(K_MAX), default=[1], show_default=True, help=help_text
    )


def group_methods_option(default: list[str], help_text: str) -> Callable:
    """--group-method as a list of GROUP_METHODS, or all."""
    return comma_list_option(
        "--group-method",
        "methods",
        item_type=click.Choice([*GROUP_METHODS, "all"]),
        default=default,
        show_default=True,
        help=help_text,
    )


def accountants_option(default: list[str], help_text: str) -> Callable:
    """--accountant as a list of ACCOUNTANTS, to state side by side."""
    return comma_list_option(
        "--accountant",
        "accountants",
        item_type=click.Choice(ACCOUNTANTS),
        default=default,
        show_default=True,
        help=help_text,
    )


def accounting_options(*, many: bool) -> Callable:
    """--delta, --accountant, --conversion, --orders, --k, --group-method.

    `many`: account takes lists of k, group methods and accountants; calibrate takes one each.
    """
    if many:
        k_opt = k_list_option(f"Group sizes (repeat or comma list), each in [1, {K_MAX}]; 1 = one record.")
        method_opt = group_methods_option(
            ["rdp", "normal"], "rdp (Lemma 6), normal (Lemma 5), pld (tight), or all."
        )
        acct_opt = accountants_option(
            ["rdp"], "Record-level accountant(s): rdp, pld, prv (comma list to compare)."
        )
    else:
        k_opt = click.option(
            "--k",
            "k",
            type=PositiveInt(K_MAX),
            default=1,
            show_default=True,
            help=f"Group size the budget must hold for, in [1, {K_MAX}]; 1 = one record.",
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
    """--algo (the registry's private algorithms) and their hyper-parameters (ULDP-FL §3).

    The hyper-parameters (rounds, user_q, silos, silo_sizes, batch_size, record_q, local_epochs:
    `build_plan`'s keywords) reach the command as keyword arguments that it takes whole
    (`**flags`) and hands to `build_plan` as they are."""
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
                    type=PositiveInt(COUNT_MAX),
                    default=None,
                    help="Training rounds T (with --algo), in [1, 1e12].",
                ),
                click.option(
                    "--user-q",
                    type=Probability(),
                    default=1.0,
                    show_default=True,
                    help="User-level Poisson sampling rate per round (Algorithm 4).",
                ),
                click.option(
                    "--silos",
                    type=PositiveInt(SILOS_MAX),
                    default=None,
                    help=f"Number of silos |S|, in [1, {SILOS_MAX:.0e}] (with --algo).",
                ),
                comma_list_option(
                    "--silo-sizes",
                    item_type=PositiveInt(COUNT_MAX),
                    default=None,
                    help="uldp-group: records per silo (comma list, each in [1, 1e12]), for --batch-size.",
                ),
                click.option(
                    "--batch-size",
                    type=PositiveInt(COUNT_MAX),
                    default=None,
                    help="DP-SGD batch size, in [1, 1e12]: with --dataset-size, q = batch / N; "
                    "uldp-group: its rate is batch / silo size.",
                ),
                click.option(
                    "--record-q",
                    type=Probability(),
                    default=None,
                    help="uldp-group: DP-SGD record sampling rate in every silo.",
                ),
                click.option(
                    "--group-k",
                    type=PositiveInt(K_MAX),
                    default=None,
                    help=f"uldp-group: records kept per user k (as `uldp train --group-k`), in [1, {K_MAX}]; "
                    "the user-level guarantee is the group bound for k records (default: the largest --k).",
                ),
                click.option(
                    "--local-epochs",
                    type=PositiveInt(LOCAL_EPOCHS_MAX),
                    default=1,
                    show_default=True,
                    help=f"uldp-group: local epochs Q per round, in [1, {LOCAL_EPOCHS_MAX:.0e}].",
                ),
            ]
        ):
            f = opt(f)
        return f

    return decorate


def private_sampling_options(f: Callable) -> Callable:
    """--private-sampling and --sampling-slots (ULDP-FL §4.1), shared by account, calibrate and
    report (train's Secure computation group declares them with --audit-rate, which only a run
    has); `private_sampling_rate` checks them and gives the rate m/P."""
    for opt in reversed(
        [
            click.option(
                "--private-sampling",
                is_flag=True,
                default=False,
                help="The silos draw the user sample by oblivious transfer (ULDP-FL §4.1), so the "
                "server does not learn it and its view is amplified too; --user-q is rounded to "
                f"m/P. Only {' and '.join(private_sampling_names())} with --user-q < 1.",
            ),
            click.option(
                "--sampling-slots",
                type=PositiveInt(MAX_SLOTS),
                default=DEFAULT_SLOTS,
                show_default=True,
                help="With --private-sampling: P slots per user, m of them real (q = m/P), "
                f"in [2, {MAX_SLOTS}].",
            ),
        ]
    ):
        f = opt(f)
    return f


def private_sampling_rate(
    ctx: click.Context,
    algos: Sequence[str | None],
    user_q: float,
    *,
    private_sampling: bool,
    sampling_slots: int,
) -> PrivateSampling | None:
    """The private sampling rate m/P nearest `user_q` (`private_rate`), or None without
    --private-sampling. Refused, as a usage error (one `Error:` line, exit status 2): the flag with
    an algorithm other than private_sampling_names() (None: a bare mechanism) or without
    --user-q < 1; --sampling-slots set without the flag; a P or q private sampling cannot draw."""
    if not private_sampling:
        if given_source(ctx, "sampling_slots") is not None:
            raise click.BadParameter(
                "only private sampling reads it: add --private-sampling or drop it",
                ctx=ctx,
                param_hint="'--sampling-slots'",
            )
        return None
    allowed = " or ".join(private_sampling_names())
    others = [a for a in algos if a not in private_sampling_names()]
    if others:
        given = "no --algo" if others[0] is None else f"--algo {others[0]}"
        raise click.BadParameter(
            f"hides the user sample inside Protocol 1's weighting: give --algo {allowed} (got {given})",
            ctx=ctx,
            param_hint="'--private-sampling'",
        )
    if user_q >= 1:
        raise click.BadParameter(
            "hides the user sample from the server: give --user-q below 1 (users sampled each round)",
            ctx=ctx,
            param_hint="'--private-sampling'",
        )
    try:
        return private_rate(user_q, sampling_slots)
    except UldpError as err:
        raise click.UsageError(str(err), ctx=ctx) from None


#: --epochs: up to a million passes over the data (as `uldp report`).
EPOCHS_MAX = 10**6


def schedule_options(f: Callable) -> Callable:
    """--epochs and --dataset-size: a bare DP-SGD mechanism as Opacus and TF-Privacy describe it
    (with --batch-size: q = batch / N; steps = ceil(epochs / q)), `uldp.accounting.mechanism_schedule`."""
    for opt in reversed(
        [
            click.option(
                "--epochs",
                # PositiveFloat refuses subnormals such as 5e-324 (issue 32).
                type=PositiveFloat(EPOCHS_MAX),
                default=None,
                help=f"Passes over the data, in (0, {EPOCHS_MAX:.0e}], instead of --steps: "
                "steps = ceil(epochs / q) (TF-Privacy's count; Opacus' epochs).",
            ),
            click.option(
                "--dataset-size",
                type=PositiveInt(COUNT_MAX),
                default=None,
                help="Records N, in [1, 1e12], instead of --q: with --batch-size, q = batch / N.",
            ),
        ]
    ):
        f = opt(f)
    return f


def accounted_as(algo: str | None) -> str | None:
    """The algorithm whose mechanism `algo` releases when that is another one (a `-w` variant:
    its base algorithm), from the registry's `AlgorithmSpec.accounted_as`; None otherwise (and
    for a name no algorithm is registered under: a plug-in's plan may label its rows freely)."""
    if algo is None or algo not in algorithm_names():
        return None
    base = get_algorithm(algo).accounted_as
    return base if base not in (None, algo) else None


def accounted_as_note(algo: str | None) -> str | None:
    """The note line for an algorithm accounted as another: its weights (the only difference
    `AlgorithmSpec.accounted_as` allows, ULDP-FL Eq. 3) leave the mechanism, so the numbers, as
    they are. The plan's `weights` assumption says why."""
    base = accounted_as(algo)
    if base is None:
        return None
    return (
        f"{algo} is accounted as {base}: its weights do not change the released mechanism, "
        f"so the guarantee is {base}'s (the same numbers)"
    )


def option_spelling(keyword: str) -> str:
    """A library keyword as this CLI spells its option: `dataset_size` -> `--dataset-size`."""
    return "--" + keyword.replace("_", "-")


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
    epochs: float | None = None,
    dataset_size: int | None = None,
) -> Plan:
    """A Plan for one algorithm, or for the bare mechanism given by --q and --steps (or
    --epochs, --dataset-size and --batch-size): the library's `uldp.accounting.plan_for`, which
    `uldp.account` and `uldp.calibrate` use too."""
    try:
        if algo is None:
            schedule = mechanism_schedule(
                q=q,
                steps=steps,
                epochs=epochs,
                dataset_size=dataset_size,
                batch_size=batch_size,
                spell=option_spelling,
            )
            return plan_for(
                None,
                sigma=sigma,
                q=schedule.q,
                steps=schedule.steps,
                derived=schedule.derived,
                spell=option_spelling,
            )
        return plan_for(
            algo,
            sigma=sigma,
            q=q,
            steps=steps,
            rounds=rounds,
            user_q=user_q,
            silos=silos,
            silo_sizes=silo_sizes,
            batch_size=batch_size,
            record_q=record_q,
            local_epochs=local_epochs,
            k=k,
            spell=option_spelling,
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


def plan_reads(algo: str | None, field: str) -> bool:
    """Whether `algo`'s plan reads the `PlanInputs` field `field` (None: the bare mechanism,
    which reads k and samples records at --q)."""
    if algo is None:
        return field == "k"
    return field in get_algorithm(algo).plan_options


def refuse_unused(ctx: click.Context, algos: list[str | None], *, group: bool) -> None:
    """BadParameter naming the first plan option the user set that none of `algos` reads: the
    library's `uldp.accounting.unused_keyword`, which `uldp.account` and `uldp.calibrate` ask too,
    so the commands and the calls refuse the same settings.

    A value that changes nothing is a mistake the user should hear about (issue 12): `--record-q`
    with uldp-avg, `--rounds` without --algo, `--group-method` without a --k above 1. Defaults are
    not the user's and pass; values from the command line, the environment or --config do not.
    """
    given = [
        param.opts[0][2:].replace("-", "_")
        for param in ctx.command.params
        if param.name is not None
        and param.opts[0].startswith("--")
        and given_source(ctx, param.name) is not None
    ]
    found = unused_keyword(algos, given, group=group, spell=option_spelling)
    if found is not None:
        raise click.BadParameter(found[1], ctx=ctx, param_hint=f"'{option_spelling(found[0])}'")


def uldp_group_k(ctx: click.Context, ks: list[int], group_k: int | None) -> tuple[int, list[int]]:
    """(ULDP-GROUP-k's k, the group sizes to state): `--group-k` when given, as `uldp train` spells
    it, and then the sizes stated default to [k]; else the largest `--k`, as before issue 34."""
    if group_k is None:
        return max(ks), ks
    return group_k, ks if given_source(ctx, "ks") is not None else [group_k]


def check_group_sizes(ks: list[int], methods: list[str]) -> None:
    """Refuse, before any work, a --k the PLD group method cannot serve (it builds a mixture of
    k + 1 Gaussians per step, time and memory growing with k)."""
    if "pld" in methods and max(ks) > MAX_PLD_GROUP_K:
        raise click.BadParameter(
            f"{max(ks)} is above the largest group the pld group method serves, {MAX_PLD_GROUP_K}; "
            "use --group-method rdp or normal for larger groups",
            param_hint="'--k'",
        )


#: The options only an RDP bound reads: (parameter name, flag).
RDP_ONLY_OPTIONS = (("conversion", "--conversion"), ("orders", "--orders"))


def refuse_unread_rdp_options(ctx: click.Context, reads_rdp: bool) -> None:
    """BadParameter naming --conversion or --orders when the user set it and no number printed is
    an RDP bound (`reads_rdp` False): PLD and PRV read neither, so the value would change nothing
    (issue 32). Defaults pass; values from the command line, the environment or --config do not."""
    if reads_rdp:
        return
    for name, flag in RDP_ONLY_OPTIONS:
        if given_source(ctx, name) is not None:
            raise click.BadParameter(
                "only RDP bounds read it, and every number here is a PLD or PRV bound; drop it "
                "(or account with --accountant rdp)",
                ctx=ctx,
                param_hint=f"'{flag}'",
            )


def may_read_rdp(
    plans: list[Plan],
    accountants: list[str],
    ks: list[int],
    methods: list[str],
    *,
    private_sampling: bool = False,
) -> bool:
    """Whether `account_plan` may give an RDP bound here: the RDP accountant, a group bound by
    Lemma 5 or 6, or the server's view of user sampling (accountants/rdp/participation.py; under
    `private_sampling` that view is the released model's, by the accountants given)."""
    groups = any(k > 1 for k in ks) or any(p.group_k is not None and p.group_k > 1 for p in plans)
    server_view = not private_sampling and any(
        p.algorithm != "mechanism" and p.group_k is None and getattr(p.mechanism, "q", 1) < 1 for p in plans
    )
    return "rdp" in accountants or (groups and any(m != "pld" for m in methods)) or server_view
