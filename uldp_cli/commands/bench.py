"""`uldp bench`: what the private weighting protocol (ULDP-FL Protocol 1) costs, phase by phase."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from uldp.accountants.private_sampling import DEFAULT_SLOTS, MAX_SLOTS, PrivateSampling, private_rate
from uldp.cli.machine import describe_machine
from uldp.errors import UldpError

from ..config import config_option
from ..errors import library_errors
from ..options import Interval, OutputFile, PositiveInt, comma_list_option, format_option, given_source
from ..progress import progress_bar
from ..render import emit

if TYPE_CHECKING:  # the crypto extra is imported only when the command runs
    from uldp.crypto.protocol.benchmark import BenchmarkRun

# Short headers so that the table fits 80 columns; the assumptions block says what each means.
COLUMNS = [
    ("params", "d"),
    ("users", "users"),
    ("key_exchange", "keys s"),
    ("blinded_histograms", "hist s"),
    ("server_weights", "enc s"),
    ("silo_weighting", "silo s"),
    ("aggregation", "agg s"),
    ("verified", "ok"),
]
COMPARE_COLUMNS = [("straightforward_seconds", "naive s"), ("speedup", "gain")]
# --private-sampling (issue 36): P and m name a run too; the OT's five phases come after setup,
# then their total and its cost per user, then the round's other phases (cf. ULDP-FL Fig. 11).
SAMPLING_LABEL_COLUMNS = [("slots", "P"), ("real", "m")]
SAMPLING_COLUMNS = [
    ("sampling_offer", "offer s"),
    ("sampling_choice", "choice s"),
    ("sampling_transfer", "xfer s"),
    ("sampling_retrieve", "fetch s"),
    ("sampling_audit", "audit s"),
    ("ot_seconds", "OT s"),
    ("ot_ms_per_user", "OT ms/user"),
]

PHASE_LABELS = {
    "key_exchange": "key exchange",
    "blinded_histograms": "blinded histograms",
    "server_weights": "encrypted weights (server)",
    "silo_weighting": "silo weighting (per silo)",
    "aggregation": "aggregation and decryption",
    "ot_seconds": "OT phase (private sampling)",
}


# Ceilings of the options (issue 12): each refuses at parse time what the benchmark cannot serve.
#: d and |U|: each silo holds |U| d Paillier ciphertexts (~768 bytes each at 3072 bits), so their
#: product is capped too (CIPHERTEXTS_MAX, about 0.8 GB).
PARAMS_MAX, USERS_MAX, CIPHERTEXTS_MAX = 10**5, 10**4, 10**6
#: |S|: one Paillier-encrypted weighting per silo per round.
SILOS_MAX = 1000
#: λ: key generation time grows as λ^4; 16384 bits takes minutes and is beyond any standard.
KEY_BITS_MAX = 16384
ROUNDS_MAX = 10**4
#: P: values up to 1e10 are encoded as round(v / P), which must be a finite double (P >= 1e-100
#: keeps it below 1e110); P > 1 would round every clipped delta in [-1, 1] to 0 or +-1.
PRECISION_MIN, PRECISION_MAX = 1e-100, 1.0
#: N_max: the encoding multiplies by lcm(1..N_max), ~1.44 N_max bits; even a 16384-bit key
#: holds it only up to about 1e4.
N_MAX_MAX = 10**4
WORKERS_MAX = 1024
#: |U| P: each silo receives P 32-byte slot keys per user and the server hashes |S| |U| P keys a
#: round (about 1e6 keys a second), so their product is capped (1e6: |U| = 1e4 at P = 100).
SLOT_KEYS_MAX = 10**6
#: --user-q's default under --private-sampling: m = 10 of P = 100.
DEFAULT_USER_Q = 0.1
#: crypto.protocol.sampling.DEFAULT_AUDIT_RATE (that module needs the crypto extra, imported only
#: when the command runs; tests/cli/test_bench_private_sampling.py checks the two agree).
DEFAULT_AUDIT_RATE = 0.05


@click.group("bench")
def command() -> None:
    """Benchmarks: the cost of the private weighting protocol."""


@command.command("protocol")
@comma_list_option(
    "--params",
    item_type=PositiveInt(PARAMS_MAX),
    default=["16"],
    show_default=True,
    help="Model sizes d to time (comma list, each in [1, 1e5]; Fig. 11 top sweeps 16..107).",
)
@comma_list_option(
    "--users",
    item_type=PositiveInt(USERS_MAX),
    default=["20"],
    show_default=True,
    help="Numbers of users |U| to time (comma list, each in [1, 1e4]; Fig. 11 bottom sweeps 10..40).",
)
@click.option(
    "--silos",
    type=PositiveInt(SILOS_MAX),
    default=3,
    show_default=True,
    help="Number of silos |S|, in [1, 1000].",
)
@click.option(
    "--key-bits",
    type=PositiveInt(KEY_BITS_MAX),
    default=3072,
    show_default=True,
    help="Paillier modulus size λ, even, at most 16384; >= 2048 unless --test-keys.",
)
@click.option(
    "--test-keys", is_flag=True, help="Allow --key-bits below 2048. INSECURE: for tests and quick looks only."
)
@click.option(
    "--rounds",
    type=PositiveInt(ROUNDS_MAX),
    default=1,
    show_default=True,
    help="Weighting rounds per run (round phases are averaged), in [1, 1e4].",
)
@click.option(
    "--precision",
    type=Interval(PRECISION_MIN, PRECISION_MAX, low_open=False, high_open=False),
    default=1e-10,
    show_default=True,
    help="Encoding precision P (Algorithm 5), in [1e-100, 1].",
)
@click.option(
    "--n-max",
    type=PositiveInt(N_MAX_MAX),
    default=None,
    help="N_max, the most records per user, in [1, 1e4]; default: the largest <= 2000 the key holds.",
)
@click.option(
    "--compare-straightforward",
    is_flag=True,
    help="Also time silo 0's straightforward weighting (|U| d full exponentiations).",
)
@click.option(
    "--workers",
    type=PositiveInt(WORKERS_MAX),
    default=None,
    help="Processes for the fast silo weighting, in [1, 1024] [default: one per core].",
)
@click.option(
    "--private-sampling",
    is_flag=True,
    help="Draw each round's user sample by oblivious transfer (ULDP-FL §4.1, issue 36) and time "
    "its phases (offer, choice, transfer, retrieval, audit) next to the others.",
)
@comma_list_option(
    "--sampling-slots",
    item_type=PositiveInt(MAX_SLOTS),
    default=[str(DEFAULT_SLOTS)],
    show_default=True,
    help=f"With --private-sampling: P slots per user to time (comma list, each in [2, {MAX_SLOTS}]; "
    "the issue sweeps 10..100).",
)
@click.option(
    "--user-q",
    type=Interval(0.0, 1.0, low_open=True, high_open=False),
    default=DEFAULT_USER_Q,
    show_default=True,
    help="With --private-sampling: the user sampling rate, rounded to m/P (0 < m < P), in (0, 1].",
)
@click.option(
    "--audit-rate",
    type=Interval(0.0, 1.0, low_open=False, high_open=True),
    default=DEFAULT_AUDIT_RATE,
    show_default=True,
    help="With --private-sampling: the share of users the silos audit each round, in [0, 1).",
)
@click.option(
    "--plot", type=OutputFile(), default=None, help="Write a PNG of seconds against params and users."
)
@format_option
@config_option
@click.pass_context
def protocol(
    ctx,
    params,
    users,
    silos,
    key_bits,
    test_keys,
    rounds,
    precision,
    n_max,
    compare_straightforward,
    workers,
    private_sampling,
    sampling_slots,
    user_q,
    audit_rate,
    plot,
    fmt,
):
    """Time each phase of the private weighting protocol and verify every result.

    One run per (params, users) pair: a fresh setup (Paillier and DH keys, blinded histograms)
    and --rounds weighting rounds on synthetic data, each aggregate checked against the
    plaintext weighted sum.

    \b
      uldp bench protocol --params 16,100 --users 10,20
      uldp bench protocol --users 100 --params 100 --compare-straightforward --format json
      uldp bench protocol --key-bits 1024 --test-keys --params 16,64 --users 10,20 --plot t.png
      uldp bench protocol --private-sampling --users 100,1000 --sampling-slots 10,100 --params 100
    """
    from uldp.crypto.encoding import Encoding
    from uldp.crypto.paillier import check_key_bits
    from uldp.crypto.protocol.benchmark import benchmark_run, check_synthetic_counts, default_n_max, run_steps

    if key_bits < 2048 and not test_keys:
        raise click.BadParameter(
            f"{key_bits} bits is insecure; use >= 2048 (default 3072), or add --test-keys for tests only",
            param_hint="'--key-bits'",
        )
    try:
        check_key_bits(key_bits, test_keys=test_keys)
    except UldpError as error:
        raise click.BadParameter(str(error), param_hint="'--key-bits'") from error
    if max(params) * max(users) > CIPHERTEXTS_MAX:
        raise click.BadParameter(
            f"d = {max(params)} with |U| = {max(users)} needs {max(params) * max(users):.1e} "
            f"ciphertexts per silo, above the {CIPHERTEXTS_MAX:.0e} this benchmark holds in memory; "
            "lower --params or --users",
            param_hint="'--params'",
        )
    rates = _sampling_rates(
        ctx, private_sampling, sampling_slots, user_q, compare_straightforward, max(users)
    )
    grid = [(d, u, rate) for rate in rates for u in dict.fromkeys(users) for d in dict.fromkeys(params)]
    with library_errors():
        for _d, u, _rate in grid:  # refuse an encoding the key cannot hold before any key is made
            chosen = default_n_max(key_bits, u, silos, precision) if n_max is None else n_max
            encoding = Encoding(precision=precision, n_max=chosen)
            encoding.check_capacity(2 ** (key_bits - 1), u, silos)
            check_synthetic_counts(silos, u, encoding)
        runs = _timed_runs(
            grid,
            fmt,
            key_bits=key_bits,
            steps=run_steps(silos, rounds, compare_straightforward),
            run=lambda d, u, rate, progress: benchmark_run(
                params=d,
                users=u,
                silos=silos,
                key_bits=key_bits,
                rounds=rounds,
                test_keys=test_keys,
                precision=precision,
                n_max=n_max,
                compare_straightforward=compare_straightforward,
                workers=workers,
                sampling=_sampling_params(rate, audit_rate),
                progress=progress,
            ),
        )
    documents = [_document(run) for run in runs]
    # The table rounds to milliseconds so that it fits a terminal; JSON and CSV keep every digit.
    rows = [{**doc, **doc["seconds"]} for doc in documents]
    if fmt == "table":
        rows = [{k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()} for row in rows]
    if plot is not None:
        _plot(runs, plot)
    columns = COLUMNS[:-1] + (COMPARE_COLUMNS if compare_straightforward else []) + COLUMNS[-1:]
    if private_sampling:
        columns = COLUMNS[:2] + SAMPLING_LABEL_COLUMNS + COLUMNS[2:4] + SAMPLING_COLUMNS + COLUMNS[4:]
    assumptions = {
        "machine": describe_machine(),
        "silos": silos,
        "data": "synthetic: n_su uniform in [1, 20] (every user in every silo), deltas clipped to "
        "[-1, 1], Gaussian noise shares",
        "encoding": f"P = {precision:g}, values bounded by 1e10, N_max = "
        f"{n_max if n_max else 'largest <= 2000 the key holds'}",
        "key": f"{key_bits}-bit Paillier"
        + (" (TEST KEY, INSECURE)" if test_keys else "")
        + ", RFC 3526 3072-bit DH",
        "timing": "wall-clock seconds; keys = setup (a)-(c) with Paillier key generation; "
        "hist = setup (d)-(f); enc = round (a), the server encrypting weights; silo = "
        "round (b) per silo (mean over silos); agg = round (c), aggregation and "
        "decryption; rounds averaged",
    }
    if private_sampling:
        assumptions["private sampling"] = (
            f"ULDP-FL §4.1 by 1-out-of-P oblivious transfer (Chou-Orlandi, RFC 3526 3072-bit group), "
            f"user q {user_q:g} rounded to m/P per P; audit rate {audit_rate:g} (audited users sit "
            "the round out)"
        )
        assumptions["OT phase"] = (
            "offer = the server's OT offers and commitments; choice = a silo's OT choices (mean over "
            "silos); xfer = the server's Enc(B_inv(N_u)), Enc(0) and every silo's padded slot keys; "
            "fetch = a silo opening its slot of every user; audit = a silo checking the audited "
            "users' openings; OT s = their sum (server plus the mean silo); OT ms/user = OT s / |U|; "
            "enc = the server's openings of the audited users; silo = round (b) per silo without "
            "the audit"
        )
    notes = [
        "verified: every round's decoded aggregate is within (|U| + |S|) P / 2 of the "
        "plaintext weighted sum, plus float64 rounding (docs/protocol.md)"
        + ("; the straightforward plaintexts equal the fast path's" if compare_straightforward else "")
        + (
            "; under private sampling, the sum over the users the transfer realised (c_u in S_u, not "
            "audited; the server's S_u and the silos' seed together, which no party holds)"
            if private_sampling
            else ""
        )
    ]
    if compare_straightforward:
        notes.append(
            "naive s: silo 0's round (b) by the straightforward path (|U| d full-size "
            "exponentiations, one process, full size, not extrapolated); gain = naive s "
            "/ silo s"
        )
    if plot is not None:
        notes.append(f"plot written to {plot}")
    emit(
        "uldp bench protocol",
        columns,
        rows,
        fmt,
        assumptions=assumptions,
        document={"command": "bench protocol", "runs": documents, "assumptions": assumptions, "notes": notes},
        notes=notes,
        labels=4 if private_sampling else 2,  # d and users (and P, m) name a run
    )
    failed = [
        _cell(r.params, r.users, r.sampling.slots if r.sampling is not None else None)
        for r in runs
        if not r.verified
    ]
    if failed:
        raise click.ClickException(f"verification failed for {', '.join(failed)}")


def _sampling_rates(
    ctx: click.Context,
    private_sampling: bool,
    slots: list[int],
    user_q: float,
    compare_straightforward: bool,
    users: int,
) -> list[PrivateSampling | None]:
    """The rate m/P of each --sampling-slots P (`private_rate`), or [None] without
    --private-sampling. Refused as usage errors (one `Error:` line, exit 2): a private-sampling
    option without the flag, the flag with --compare-straightforward, a q that rounds to 0 or P,
    and |U| P above SLOT_KEYS_MAX."""
    if not private_sampling:
        for name in ("sampling_slots", "user_q", "audit_rate"):
            if given_source(ctx, name) is not None:
                raise click.BadParameter(
                    "only private sampling reads it: add --private-sampling or drop it",
                    ctx=ctx,
                    param_hint=f"'--{name.replace('_', '-')}'",
                )
        return [None]
    if compare_straightforward:
        raise click.BadParameter(
            "times round (a)'s weights in the clear, which private sampling replaces: drop one of the two",
            ctx=ctx,
            param_hint="'--compare-straightforward'",
        )
    if max(slots) * users > SLOT_KEYS_MAX:
        raise click.BadParameter(
            f"P = {max(slots)} with |U| = {users} makes {max(slots) * users:.1e} slot keys per silo "
            f"and round, above the {SLOT_KEYS_MAX:.0e} this benchmark holds; lower --sampling-slots "
            "or --users",
            ctx=ctx,
            param_hint="'--sampling-slots'",
        )
    rates: list[PrivateSampling | None] = []
    for p in dict.fromkeys(slots):
        try:
            rates.append(private_rate(user_q, p))
        except UldpError as err:
            raise click.UsageError(str(err), ctx=ctx) from None
    return rates


def _sampling_params(rate: PrivateSampling | None, audit_rate: float):
    """crypto's SamplingParams for a rate (the crypto extra is imported only when the command runs)."""
    if rate is None:
        return None
    from uldp.crypto.protocol.sampling import SamplingParams

    return SamplingParams(slots=rate.slots, real=rate.m, audit_rate=audit_rate)


def _cell(d: int, u: int, slots: int | None) -> str:
    return f"d={d} |U|={u}" + (f" P={slots}" if slots else "")


def _timed_runs(
    grid: list[tuple[int, int, PrivateSampling | None]],
    fmt: str,
    *,
    key_bits: int,
    steps: int,
    run: Callable[[int, int, PrivateSampling | None, Callable[[str], None]], BenchmarkRun],
) -> list[BenchmarkRun]:
    """`run(d, u, rate, progress)` for each (d, |U|, rate) cell of the grid (rate: private
    sampling's m/P, or None), saying what it is doing as it goes.

    A table's reader sees a bar on a terminal and, elsewhere (a log, a pipe), lines on stderr: a
    cell's start, each of its rounds when there are several, and its end with the time it took
    and an estimate of what is left; JSON and CSV stay silent. A cell costs a fixed setup (keys,
    blinded histograms) plus work in proportion to d |U| (round (b) raises one value per user and
    coordinate; private sampling adds |U| P slot keys), so the estimate scales the finished cells'
    two parts to the cells still to run.
    """
    from rich.console import Console

    lines = fmt == "table" and not Console(stderr=True).is_terminal
    runs: list[BenchmarkRun] = []
    fixed: list[float] = []
    per_unit: list[float] = []
    with progress_bar(fmt, len(grid) * steps, "protocol") as bar:
        for index, (d, u, rate) in enumerate(grid, 1):
            cell = _cell(d, u, rate.slots if rate is not None else None)
            said = [""]

            def progress(text: str, cell: str = cell, said: list[str] = said) -> None:
                bar(advance=1, description=f"{cell}: {text}")
                # A line per round only when there are several: the cell's lines frame one.
                if lines and text.startswith("round") and not text.endswith("/1") and text != said[0]:
                    said[0] = text
                    click.echo(f"bench protocol: {cell}: {text} done", err=True)

            if lines:
                click.echo(
                    f"bench protocol: cell {index}/{len(grid)}, {cell}: setup ({key_bits}-bit "
                    "Paillier key, DH keys, blinded histograms) and rounds",
                    err=True,
                )
            start = time.perf_counter()
            result = run(d, u, rate, progress)
            elapsed = time.perf_counter() - start
            runs.append(result)
            setup = result.seconds["key_exchange"] + result.seconds["blinded_histograms"]
            fixed.append(setup)
            per_unit.append(max(elapsed - setup, 0.0) / _units(d, u, rate))
            rest = grid[index:]
            left = sum(statistics.mean(fixed) + statistics.mean(per_unit) * _units(*cell) for cell in rest)
            estimate = f"about {_duration(left)} left" if rest else ""
            bar(status=estimate)
            if lines:
                click.echo(
                    f"bench protocol: cell {index}/{len(grid)}, {cell}: done in {_duration(elapsed)}"
                    + (f"; {estimate}" if rest else ""),
                    err=True,
                )
    return runs


def _units(d: int, u: int, rate: PrivateSampling | None) -> int:
    """A cell's work beyond setup, in units of one coordinate of one user's weighting."""
    return u * (d + (rate.slots if rate else 0))


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _document(run) -> dict:
    doc = {
        "params": run.params,
        "users": run.users,
        "silos": run.silos,
        "key_bits": run.key_bits,
        "rounds": run.rounds,
        "n_max": run.n_max,
        "precision": run.precision,
        "verified": run.verified,
        "seconds": dict(run.seconds),
        "max_error": run.max_error,
        "tolerance": run.tolerance,
    }
    if run.sampling is not None:
        doc["slots"] = run.sampling.slots
        doc["real"] = run.sampling.real
        doc["user_q"] = run.sampling.q
        doc["audit_rate"] = run.sampling.audit_rate
        doc["sampled_users"] = run.sampled_users
        doc["ot_seconds"] = run.ot_seconds
        doc["ot_seconds_per_user"] = run.ot_seconds_per_user
        doc["ot_ms_per_user"] = 1000 * run.ot_seconds_per_user
    if run.straightforward_seconds is not None:
        doc["straightforward_seconds"] = run.straightforward_seconds
        doc["speedup"] = run.straightforward_seconds / run.seconds["silo_weighting"]
    return doc


# Fig. 11's three timed phases: one colour each, the same in both panels.
PLOT_PHASES = {"silo_weighting": "tab:blue", "aggregation": "tab:orange", "key_exchange": "tab:green"}
# --private-sampling adds the OT phase (its five phases' sum) as a fourth series.
PLOT_OT = {"ot_seconds": "tab:red"}
# The other axis's values (users in the d panel, d in the users panel): one line style each.
SERIES_STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")]


def _plot(runs, path: Path) -> None:
    from matplotlib.lines import Line2D

    from ..figures import save_png, subplots

    # One panel per swept axis (Fig. 11: top against d, bottom against |U|); an axis with a
    # single value would give a panel of one point.
    panels = [
        (x, other)
        for x, other in (("params", "users"), ("users", "params"))
        if len({getattr(r, x) for r in runs}) > 1
    ] or [("params", "users")]
    private = any(r.sampling is not None for r in runs)
    phases = {**PLOT_PHASES, **(PLOT_OT if private else {})}

    def seconds(run, phase: str) -> float:
        return run.ot_seconds if phase == "ot_seconds" else run.seconds[phase]

    def slots(run) -> int | None:
        return run.sampling.slots if run.sampling is not None else None

    fig, axes = subplots(ncols=len(panels), figsize=(5.5 * len(panels), 4.6), squeeze=False)
    for ax, (x_key, series_key) in zip(axes[0], panels):
        # A series per value of the other axis (and per P under private sampling).
        values = sorted({(getattr(r, series_key), slots(r) or 0) for r in runs})
        for i, (value, p) in enumerate(values):
            chosen = sorted(
                (r for r in runs if getattr(r, series_key) == value and (slots(r) or 0) == p),
                key=lambda r: getattr(r, x_key),
            )
            xs = [getattr(r, x_key) for r in chosen]
            line, marker = SERIES_STYLES[i % len(SERIES_STYLES)]
            for phase, colour in phases.items():
                ax.plot(xs, [seconds(r, phase) for r in chosen], ls=line, marker=marker, color=colour, ms=5)
        ax.set_xlabel("model parameters d" if x_key == "params" else "users |U|")
        ax.set_ylabel("seconds")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        # Legends below the panel, never over the curves: colour = phase, line style = the
        # other axis's value.
        name = "|U|" if series_key == "users" else "d"
        styles = [
            Line2D(
                [],
                [],
                color="gray",
                ls=SERIES_STYLES[i % len(SERIES_STYLES)][0],
                marker=SERIES_STYLES[i % len(SERIES_STYLES)][1],
                label=f"{name} = {value}" + (f", P = {p}" if p else ""),
            )
            for i, (value, p) in enumerate(values)
        ]
        colours = [Line2D([], [], color=c, lw=2, label=PHASE_LABELS[p]) for p, c in phases.items()]
        # Two columns when the OT phase makes four entries: three lines fit below the panel.
        below = ax.legend(
            handles=colours,
            fontsize=7,
            loc="upper left",
            bbox_to_anchor=(0.0, -0.14),
            frameon=False,
            ncol=2 if private else 1,
        )
        ax.add_artist(below)
        ax.legend(handles=styles, fontsize=7, loc="upper right", bbox_to_anchor=(1.0, -0.14), frameon=False)
    first = runs[0]
    fig.suptitle(
        f"ULDP-FL Protocol 1 (cf. Fig. 11): seconds per phase, {first.key_bits}-bit Paillier, "
        f"|S| = {first.silos} silos",
        fontsize=10,
    )
    save_png(fig, path, dpi=120)
