"""`uldp bench`: what the private weighting protocol (ULDP-FL Protocol 1) costs, phase by phase."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from uldp.cli.machine import describe_machine
from uldp.errors import UldpError

from ..config import config_option
from ..errors import library_errors
from ..options import Interval, OutputFile, PositiveInt, comma_list_option, format_option
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

PHASE_LABELS = {
    "key_exchange": "key exchange",
    "blinded_histograms": "blinded histograms",
    "server_weights": "encrypted weights (server)",
    "silo_weighting": "silo weighting (per silo)",
    "aggregation": "aggregation and decryption",
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
    "--plot", type=OutputFile(), default=None, help="Write a PNG of seconds against params and users."
)
@format_option
@config_option
def protocol(
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
    grid = [(d, u) for u in dict.fromkeys(users) for d in dict.fromkeys(params)]
    with library_errors():
        for _d, u in grid:  # refuse an encoding the key cannot hold before any key is made
            chosen = default_n_max(key_bits, u, silos, precision) if n_max is None else n_max
            encoding = Encoding(precision=precision, n_max=chosen)
            encoding.check_capacity(2 ** (key_bits - 1), u, silos)
            check_synthetic_counts(silos, u, encoding)
        runs = _timed_runs(
            grid,
            fmt,
            key_bits=key_bits,
            steps=run_steps(silos, rounds, compare_straightforward),
            run=lambda d, u, progress: benchmark_run(
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
    notes = [
        "verified: every round's decoded aggregate is within (|U| + |S|) P / 2 of the "
        "plaintext weighted sum, plus float64 rounding (docs/protocol.md)"
        + ("; the straightforward plaintexts equal the fast path's" if compare_straightforward else "")
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
        labels=2,  # d and users name a run
    )
    failed = [f"d={r.params} |U|={r.users}" for r in runs if not r.verified]
    if failed:
        raise click.ClickException(f"verification failed for {', '.join(failed)}")


def _timed_runs(
    grid: list[tuple[int, int]],
    fmt: str,
    *,
    key_bits: int,
    steps: int,
    run: Callable[[int, int, Callable[[str], None]], BenchmarkRun],
) -> list[BenchmarkRun]:
    """`run(d, u, progress)` for each (d, |U|) cell of the grid, saying what it is doing as it goes.

    A table's reader sees a bar on a terminal and, elsewhere (a log, a pipe), lines on stderr: a
    cell's start, each of its rounds when there are several, and its end with the time it took
    and an estimate of what is left; JSON and CSV stay silent. A cell costs a fixed setup (keys,
    blinded histograms) plus work in proportion to d |U| (round (b) raises one value per user and
    coordinate), so the estimate scales the finished cells' two parts to the cells still to run.
    """
    from rich.console import Console

    lines = fmt == "table" and not Console(stderr=True).is_terminal
    runs: list[BenchmarkRun] = []
    fixed: list[float] = []
    per_unit: list[float] = []
    with progress_bar(fmt, len(grid) * steps, "protocol") as bar:
        for index, (d, u) in enumerate(grid, 1):
            cell = f"d={d} |U|={u}"
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
            result = run(d, u, progress)
            elapsed = time.perf_counter() - start
            runs.append(result)
            setup = result.seconds["key_exchange"] + result.seconds["blinded_histograms"]
            fixed.append(setup)
            per_unit.append(max(elapsed - setup, 0.0) / (d * u))
            rest = grid[index:]
            left = sum(statistics.mean(fixed) + statistics.mean(per_unit) * dd * uu for dd, uu in rest)
            estimate = f"about {_duration(left)} left" if rest else ""
            bar(status=estimate)
            if lines:
                click.echo(
                    f"bench protocol: cell {index}/{len(grid)}, {cell}: done in {_duration(elapsed)}"
                    + (f"; {estimate}" if rest else ""),
                    err=True,
                )
    return runs


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
    if run.straightforward_seconds is not None:
        doc["straightforward_seconds"] = run.straightforward_seconds
        doc["speedup"] = run.straightforward_seconds / run.seconds["silo_weighting"]
    return doc


# Fig. 11's three timed phases: one colour each, the same in both panels.
PLOT_PHASES = {"silo_weighting": "tab:blue", "aggregation": "tab:orange", "key_exchange": "tab:green"}
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
    fig, axes = subplots(ncols=len(panels), figsize=(5.5 * len(panels), 4.6), squeeze=False)
    for ax, (x_key, series_key) in zip(axes[0], panels):
        values = sorted({getattr(r, series_key) for r in runs})
        for i, value in enumerate(values):
            chosen = sorted(
                (r for r in runs if getattr(r, series_key) == value), key=lambda r: getattr(r, x_key)
            )
            xs = [getattr(r, x_key) for r in chosen]
            line, marker = SERIES_STYLES[i % len(SERIES_STYLES)]
            for phase, colour in PLOT_PHASES.items():
                ax.plot(xs, [r.seconds[phase] for r in chosen], ls=line, marker=marker, color=colour, ms=5)
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
                label=f"{name} = {value}",
            )
            for i, value in enumerate(values)
        ]
        phases = [Line2D([], [], color=c, lw=2, label=PHASE_LABELS[p]) for p, c in PLOT_PHASES.items()]
        below = ax.legend(
            handles=phases, fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.14), frameon=False
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
