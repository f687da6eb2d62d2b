"""`uldp report`: one privacy statement for a plan, a run, or a centralised DP-SGD run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import click

from uldp.accountants.events import Composed, SubsampledGaussian
from uldp.accountants.plan import Plan
from uldp.accountants.private_sampling import privately_sampled
from uldp.accountants.statements.statement import (
    REPORT_ACCOUNTANTS,
    REPORT_GROUP_METHODS,
    Accounting,
    Statement,
    dp_sgd_statement,
    plan_statement,
)

from ..accounting_options import (
    K_MAX,
    accountants_option,
    algorithm_options,
    build_plan,
    check_group_sizes,
    conversion_option,
    expand_methods,
    group_methods_option,
    k_list_option,
    may_read_rdp,
    plan_reads,
    private_sampling_options,
    private_sampling_rate,
    refuse_unread_rdp_options,
    refuse_unused,
    uldp_group_k,
)
from ..accounting_options import orders_option as orders_opt
from ..config import config_option
from ..errors import library_errors
from ..files import atomic_write_text
from ..options import (
    COUNT_MAX,
    NoiseMultiplier,
    OutputFile,
    PositiveFloat,
    PositiveInt,
    Probability,
    delta_option,
    given_source,
    zero_epsilon_note,
)
from ..progress import status
from ..report_render import REPORT_FORMATS, draw_roc_plot, render_markdown, render_table

#: --epochs of a DP-SGD description: up to a million passes over the data.
EPOCHS_MAX = 10**6


def _sources(run, opacus, dataset_size, sigma) -> str:
    given = [name for name, value in (("--run", run), ("--opacus", opacus)) if value is not None]
    if len(given) > 1:
        raise click.UsageError("give one of --run and --opacus")
    if given and dataset_size is not None:
        raise click.UsageError(f"--dataset-size describes a DP-SGD run of its own; drop it with {given[0]}")
    if given:
        if sigma is not None:
            raise click.BadParameter(
                f"the noise is the one {given[0]} recorded; drop it", param_hint="'--sigma'"
            )
        return given[0][2:]
    if sigma is None:
        raise click.UsageError(
            "give --sigma with a plan (--q/--steps, --algo, or --dataset-size), or --run / --opacus"
        )
    return "dp-sgd" if dataset_size is not None else "plan"


@click.command("report")
@click.option(
    "--sigma", type=NoiseMultiplier(), default=None, help="Noise multiplier of a plan, in [1e-6, 1e6]."
)
@click.option("--q", type=Probability(), default=None, help="Poisson sampling rate per step, in (0, 1].")
@click.option("--steps", type=PositiveInt(COUNT_MAX), default=None, help="Number of steps T, in [1, 1e12].")
@algorithm_options(many=False)
@private_sampling_options
@click.option(
    "--run",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="A uldp train run: its --metrics file (with FILE.run.json beside it) or --checkpoint DIR.",
)
@click.option(
    "--opacus",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="An Opacus RDPAccountant state (JSON or torch .pt: state_dict() or its history).",
)
@click.option(
    "--dataset-size",
    type=PositiveInt(COUNT_MAX),
    default=None,
    help="A centralised DP-SGD run as TF-Privacy describes it: N records (with --batch-size, --epochs).",
)
@click.option(
    "--epochs",
    # PositiveFloat, not click.FloatRange: it refuses subnormals such as 5e-324 (issue 32).
    type=PositiveFloat(EPOCHS_MAX),
    default=None,
    help=f"DP-SGD epochs over --dataset-size, in (0, {EPOCHS_MAX:.0e}].",
)
@click.option(
    "--max-examples-per-user",
    type=PositiveInt(K_MAX),
    default=None,
    help=f"Most records one person has (DP-SGD, --opacus): user level as that group, in [1, {K_MAX}].",
)
@click.option(
    "--microbatching/--no-microbatching",
    default=None,
    help="DP-SGD: microbatches of several records (TF-Privacy's used_microbatching, its default: "
    "the noise multiplier is halved) or one record each (Opacus). Default: --microbatching.",
)
@delta_option
@k_list_option(f"Group sizes to state (repeat or comma list), each in [1, {K_MAX}]; 1 = one record.")
@group_methods_option(
    list(REPORT_GROUP_METHODS), "Group bounds: rdp (Lemma 6), normal (Lemma 5), pld (tight), or all."
)
@accountants_option(
    list(REPORT_ACCOUNTANTS), "Accountants to state side by side (RDP next to the tight PLD and PRV)."
)
@conversion_option
@orders_opt
@click.option(
    "--format",
    "fmt",
    type=click.Choice(REPORT_FORMATS),
    default="table",
    show_default=True,
    help="table (a statement for people), markdown (a model-card section), json (docs/report-schema.json).",
)
@click.option(
    "--plot", type=OutputFile(), default=None, help="Also draw the attacker's ROC bound per claim (PNG)."
)
@click.option(
    "--out", type=OutputFile(), default=None, help="Write the statement to this file (atomically) too."
)
@click.option(
    "--dp-event",
    is_flag=True,
    default=False,
    help="Print the mechanism as dp-accounting DpEvents (JSON) instead, to re-account it with dp-accounting.",
)
@click.option(
    "--schema", is_flag=True, default=False, help="Print the JSON Schema of --format json and exit."
)
@config_option
def command(
    sigma,
    q,
    steps,
    algo,
    private_sampling,
    sampling_slots,
    run,
    opacus,
    dataset_size,
    epochs,
    max_examples_per_user,
    microbatching,
    delta,
    ks,
    methods,
    accountants,
    conversion,
    orders,
    fmt,
    plot,
    out,
    dp_event,
    schema,
    **flags,
):
    """A privacy statement a reviewer can sign: every guarantee of one run, what each assumes, and
    what it means to a membership-inference attacker.

    \b
    A plan (the flags of uldp account):
      uldp report --sigma 5 --q 0.01 --steps 100000 --k 8
      uldp report --algo uldp-avg --sigma 5 --rounds 100 --user-q 0.5
      uldp report --algo uldp-avg-w --sigma 5 --rounds 100 --user-q 0.5 --private-sampling
    A finished or interrupted run:
      uldp report --run metrics.jsonl        (or --run CHECKPOINT_DIR)
    A centralised DP-SGD run (TF-Privacy's inputs), or an Opacus accountant:
      uldp report --sigma 1.1 --dataset-size 60000 --batch-size 256 --epochs 60 --max-examples-per-user 4
      uldp report --opacus accountant.json
    """
    if schema:
        from uldp.accountants.statements.report_schema import schema_text

        click.echo(schema_text(), nl=False)
        return
    source = _sources(run, opacus, dataset_size, sigma)
    methods = expand_methods(methods)
    accountants = list(dict.fromkeys(accountants))
    if source != "plan" and flags["group_k"] is not None:
        raise click.BadParameter(
            "is ULDP-GROUP-k's k: give it with --algo uldp-group", param_hint="'--group-k'"
        )
    group_k, ks = uldp_group_k(click.get_current_context(), ks, flags.pop("group_k"))
    check_group_sizes([*ks, group_k, max_examples_per_user or 1], methods)
    if max_examples_per_user is not None and source not in ("dp-sgd", "opacus"):
        raise click.BadParameter(
            "applies to a DP-SGD description or --opacus", param_hint="'--max-examples-per-user'"
        )
    for flag, value in (("--epochs", epochs), ("--microbatching", microbatching)):
        if source != "dp-sgd" and value is not None:
            raise click.BadParameter(
                "describes a DP-SGD run: give it with --dataset-size", param_hint=f"'{flag}'"
            )
    _refuse_private_sampling_off_plan(source)
    how = Accounting(delta, tuple(ks), tuple(accountants), tuple(methods), conversion, orders)
    rate = None
    with library_errors():
        plan = None
        if source == "plan":
            refuse_unused(click.get_current_context(), [algo], group=any(k > 1 for k in [*ks, group_k]))
            rate = private_sampling_rate(
                click.get_current_context(),
                [algo],
                flags["user_q"],
                private_sampling=private_sampling,
                sampling_slots=sampling_slots,
            )
            if rate is not None:  # accounted at the rate the silos draw, m/P
                flags["user_q"] = rate.q
            plan = build_plan(
                algo,
                sigma=sigma,
                q=q,
                steps=steps,
                **flags,
                # ULDP-GROUP-k keeps k records per user: --group-k, else the largest --k, as in
                # `uldp account`.
                k=group_k if algo is not None and plan_reads(algo, "k") else None,
            )
            if rate is not None:
                plan = privately_sampled(plan, rate)
        elif source == "dp-sgd":
            # TF-Privacy's default microbatching: halving the multiplier is the safe side when unsaid.
            description = _dp_sgd_description(
                sigma,
                dataset_size,
                flags["batch_size"],
                epochs,
                max_examples_per_user,
                q,
                steps,
                algo,
                used_microbatching=microbatching is not False,
            )
            plan = Plan("mechanism", description.mechanism(), None)
        elif source == "opacus":
            plan = _opacus_plan(opacus, max_examples_per_user)
        if dp_event:
            also = description.once_per_epoch_claims() if source == "dp-sgd" else []
            document = _dp_event_document(plan, run, ks, max_examples_per_user, also)
            click.echo(json.dumps(document, indent=2))
            return
        if plan is not None:  # before the work; a run's history is checked by its claims below
            user_k = [max_examples_per_user] if max_examples_per_user else []
            refuse_unread_rdp_options(
                click.get_current_context(),
                may_read_rdp([plan], accountants, [*ks, *user_k], methods, private_sampling=rate is not None),
            )
        with status(fmt, "accounting") as update:
            if source == "run":
                from uldp.trainers.run_record import read_run
                from uldp.trainers.run_report import run_statement

                statement = run_statement(read_run(run), how, progress=update)
            elif source == "dp-sgd":
                statement = dp_sgd_statement(description, how, progress=update)
            else:
                assert plan is not None
                statement = plan_statement(
                    plan,
                    how,
                    user_k=max_examples_per_user,
                    source=source,
                    title=_title(source, plan, opacus),
                    private_sampling=rate is not None,
                    progress=update,
                )
            if source != "run":
                assert plan is not None
                statement.settings = _settings(
                    source, plan, dataset_size, flags["batch_size"], epochs, max_examples_per_user
                )
                if source == "dp-sgd":
                    statement.settings["used_microbatching"] = description.used_microbatching
                if rate is not None:
                    statement.settings["private_sampling"] = rate.as_dict()
    refuse_unread_rdp_options(
        click.get_current_context(), any(b.conversion is not None for c in statement.claims for b in c.bounds)
    )
    if any(c.best.epsilon == 0 for c in statement.claims):
        statement.caveats.append(zero_epsilon_note(statement.delta))
    _render(statement, fmt, out)
    if plot is not None:
        draw_roc_plot(plot, statement)
        if fmt == "table":
            click.echo(f"ROC bound written to {plot}")


def _refuse_private_sampling_off_plan(source: str) -> None:
    """--private-sampling and --sampling-slots describe a plan: a run's record says itself whether
    it sampled privately (`uldp train --private-sampling`), and DP-SGD samples records."""
    if source == "plan":
        return
    ctx = click.get_current_context()
    for name, flag in (("private_sampling", "--private-sampling"), ("sampling_slots", "--sampling-slots")):
        if given_source(ctx, name) is None:
            continue
        why = (
            "a run's record says whether it sampled users privately (uldp train --private-sampling); drop it"
            if source == "run"
            else "applies to a plan: --algo uldp-avg-w or uldp-sgd-w with --user-q < 1; drop it"
        )
        raise click.BadParameter(why, ctx=ctx, param_hint=f"'{flag}'")


def _render(statement: Statement, fmt: str, out: Path | None) -> None:
    """The statement to stdout in `fmt`; with --out, also to that file (Markdown for .md, else
    JSON), written atomically."""
    if fmt == "table":
        render_table(statement)
    else:
        click.echo(_text(statement, fmt), nl=False)
    if out is not None:
        atomic_write_text(out, _text(statement, "markdown" if out.suffix == ".md" else "json"))


def _text(statement: Statement, fmt: str) -> str:
    if fmt == "markdown":
        return render_markdown(statement)
    from ..render import json_text

    return json_text(statement.as_dict())


def _dp_sgd_description(
    sigma, dataset_size, batch_size, epochs, max_examples_per_user, q, steps, algo, *, used_microbatching
):
    from uldp.accountants.statements.external import DpSgdDescription

    for flag, value in (("--q", q), ("--steps", steps), ("--algo", algo)):
        if value is not None:
            raise click.BadParameter(
                "a DP-SGD description derives q = batch / N and its steps from --epochs; drop it",
                param_hint=f"'{flag}'",
            )
    if batch_size is None or epochs is None:
        raise click.UsageError(
            "--dataset-size needs --batch-size and --epochs (TF-Privacy's DP-SGD description)"
        )
    return DpSgdDescription(
        noise_multiplier=sigma,
        batch_size=batch_size,
        dataset_size=dataset_size,
        epochs=epochs,
        max_examples_per_user=max_examples_per_user,
        used_microbatching=used_microbatching,
    )


def _opacus_plan(path: Path, max_examples_per_user: int | None) -> Plan:
    # JSON or a torch file, told apart by its first bytes; torch is imported only for the latter.
    from uldp.trainers.external_files import read_opacus_state

    event = read_opacus_state(path)
    return Plan(
        "mechanism",
        event,  # type: ignore[arg-type]
        None,
        {
            "mechanism": f"the Opacus RDPAccountant history in {path.name}: {_describe(event)}",
            "neighbouring": "add or remove one record (one user's records for user level)",
        },
    )


def _describe(event: SubsampledGaussian | Composed) -> str:
    parts = cast(tuple[SubsampledGaussian, ...], event.events if isinstance(event, Composed) else (event,))
    return "; ".join(f"{p.steps} steps at sigma = {p.sigma:g}, q = {p.q:g}" for p in parts)


def _title(source: str, plan: Plan, opacus: Path | None) -> str:
    if source == "opacus":
        return f"Opacus DP-SGD ({opacus.name if opacus else ''})"
    return "DP-SGD (a Poisson-subsampled Gaussian)" if plan.algorithm == "mechanism" else plan.algorithm


def _settings(source, plan: Plan, dataset_size, batch_size, epochs, max_examples_per_user) -> dict:
    out: dict = {"algorithm": plan.algorithm}
    if source == "dp-sgd":
        out.update(
            dataset_size=dataset_size,
            batch_size=batch_size,
            epochs=epochs,
            max_examples_per_user=max_examples_per_user,
        )
    return out


def _dp_event_document(plan: Plan | None, run: Path | None, ks, user_k, also: list[str]) -> dict:
    """The mechanism as dp-accounting DpEvents, with how to re-account it and the claims of the
    statement it leaves out (the groups of --k, --max-examples-per-user, the once-per-epoch lines)."""
    from uldp.accountants.statements.dp_events import dp_event_document

    if plan is None:
        from uldp.trainers.run_record import read_run
        from uldp.trainers.run_report import run_plan

        assert run is not None  # no plan: the source is a run
        plan = run_plan(read_run(run))
    return dp_event_document(plan, group_sizes=ks, user_k=user_k, also_stated=also)
