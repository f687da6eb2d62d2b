"""Speed of `uldp personalize`: the three inversion methods side by side, and a million records.

    python benchmarks/bench_personalize.py [--records 1000] [--repeat 3] [--big 1000000] [--format json]

1. The runtime study of rPDP-FL (slides ch. 4 I) on its three budget sets, Group-3, Group-100
   and Individual-1000 (published: BinarySearch 1.69 / 52.50 / 597.82 s, SCF 13.11 / 13.32 /
   14.10 s): each of exact, scf and bisect in the library, the median of `--repeat` runs, with
   how many records each overspends and how far its rates are from bisection's.
   The slides state no sigma, T, tau, lambda or delta for that study; we use T = 50 rounds,
   tau = 10 local steps, lambda = 1 (untrusted), delta = 1e-5, and sigma calibrated so that each
   set's largest budget is reached at q = 1 (as `--calibrate-sigma` does).
2. `--big` records with distinct budgets (Individual-1000) with exact, end to end: in the library
   (draw, calibrate sigma, invert, write the CSV), then as a fresh `uldp personalize` process
   writing its CSV (imports included), the median of `--repeat` runs.
3. `--scale N` (issue 12): only this part. Every method end to end on N records as a fresh
   `uldp personalize` process writing its CSV, one at a time, with its wall time and peak
   resident memory (getrusage of the child): exact and scf on Individual-1000 (N distinct
   budgets), bisect on Group-100 (100 distinct; bisect refuses more than 10,000 distinct
   budgets), and --compare on Group-100.

    python benchmarks/bench_personalize.py --scale 10000000
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uldp.accountants.personalized.budgets import sample_budgets  # noqa: E402
from uldp.accountants.personalized.record_rates import METHODS, personalize  # noqa: E402
from uldp.accountants.personalized.record_spend import EpsilonCurve, RecordSampledFL, calibrate_sigma  # noqa: E402
from uldp.cli.machine import describe_machine

PUBLISHED = {
    "group-3": {"bisect": 1.69, "scf": 13.11},
    "group-100": {"bisect": 52.50, "scf": 13.32},
    "individual-1000": {"bisect": 597.82, "scf": 14.10},
}
RUN = RecordSampledFL(sigma=1.0, local_steps=10, rounds=50, client_rate=1.0)
DELTA = 1e-5


def side_by_side(name: str, records: int, repeat: int) -> list[dict]:
    budgets = sample_budgets(name, records, seed=0)
    sigma = calibrate_sigma(RUN, DELTA, float(budgets.max())).value
    rows, rates = [], {}
    for method in METHODS:
        times, result = [], None
        for _ in range(repeat):
            curve = EpsilonCurve(replace(RUN, sigma=sigma), DELTA)  # a fresh curve each time
            result = personalize(budgets, curve, method=method)
            times.append(result.seconds + result.check_seconds)
        rates[method] = result.q
        s = result.summary()
        rows.append(
            {
                "set": name,
                "records": records,
                "distinct": int(np.unique(budgets).size),
                "sigma": sigma,
                "method": method,
                "seconds": statistics.median(times),
                "evaluations": s["evaluations"],
                "overspent": s["overspent"],
                "overspend_max": s["overspend_max"],
                "r2": s.get("r2"),
                "published_seconds": PUBLISHED[name].get(method),
            }
        )
    for row in rows:
        q, ref = rates[row["method"]], rates["bisect"]
        used = ref > 0
        row["max_q_gap_vs_bisect"] = float(np.max(np.abs(q[used] - ref[used]) / ref[used]))
    return rows


def big_library(records: int) -> dict:
    from uldp.cli.personalize_io import Budgets, write_rates

    start = time.perf_counter()
    budgets = sample_budgets("individual-1000", records, seed=0)
    drawn = time.perf_counter()
    sigma = calibrate_sigma(RUN, DELTA, float(budgets.max())).value
    calibrated = time.perf_counter()
    result = personalize(budgets, EpsilonCurve(replace(RUN, sigma=sigma), DELTA))
    inverted = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        write_rates(
            Path(tmp) / "q.csv", Budgets(np.arange(records), "id", "epsilon", budgets, "bench"), result
        )
    written = time.perf_counter()
    return {
        "records": records,
        "distinct": int(np.unique(budgets).size),
        "sigma": sigma,
        "draw_s": drawn - start,
        "calibrate_s": calibrated - drawn,
        "exact_s": inverted - calibrated,
        "write_csv_s": written - inverted,
        "total_s": written - start,
        "evaluations": result.evaluations,
        "overspent": result.summary()["overspent"],
    }


def big_cli(records: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "q.csv"
        cmd = [
            sys.executable,
            "-m",
            "uldp",
            "personalize",
            "--distribution",
            "individual-1000",
            "--records",
            str(records),
            "--calibrate-sigma",
            "--local-steps",
            "10",
            "--rounds",
            "50",
            "--out",
            str(out),
            "--format",
            "json",
        ]
        subprocess.run(cmd, check=True, capture_output=True)  # warm-up: the OS file cache
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            times.append(time.perf_counter() - start)
        size = out.stat().st_size
    return {
        "command": "uldp " + " ".join(cmd[3:]).replace(str(out), "/tmp/q.csv"),
        "median_s": statistics.median(times),
        "best_s": min(times),
        "csv_bytes": size,
    }


SCALE_RUNS = (
    ("exact", "individual-1000", []),
    ("scf", "individual-1000", ["--method", "scf"]),
    ("bisect", "group-100", ["--method", "bisect"]),
    ("compare", "group-100", ["--compare"]),
)


def scale(records: int) -> list[dict]:
    """Each method on `records` records in its own process: seconds and peak RSS."""
    rows = []
    for name, budgets, extra in SCALE_RUNS:
        with tempfile.TemporaryDirectory() as tmp:
            args = [
                "personalize", "--distribution", budgets, "--records", str(records),
                "--calibrate-sigma", "--local-steps", "10", "--rounds", "50",
                *extra, "--out", str(Path(tmp) / "q.csv"), "--format", "json",
            ]  # fmt: skip
            script = (
                "import resource, subprocess, sys, time\n"
                "start = time.perf_counter()\n"
                "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
                "seconds = time.perf_counter() - start\n"
                "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
                "print(done.returncode, seconds, peak, done.stderr.decode()[-300:].replace(chr(10), ' '))\n"
            )
            # A process per run: RUSAGE_CHILDREN is the peak of that one child only.
            line = subprocess.run(
                [sys.executable, "-c", script, sys.executable, "-m", "uldp", *args],
                check=True, capture_output=True, text=True,
            ).stdout  # fmt: skip
            code, seconds, peak, err = line.split(" ", 3)
            rows.append(
                {
                    "method": name,
                    "budgets": budgets,
                    "records": records,
                    "exit": int(code),
                    "seconds": float(seconds),
                    "peak_rss_mb": int(peak) / 1024,
                    "stderr": err.strip(),
                    "command": "uldp " + " ".join(args).replace(str(Path(tmp) / "q.csv"), "q.csv"),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000, help="records per budget set")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--big", type=int, default=1_000_000, help="records of the end-to-end run")
    parser.add_argument("--format", choices=["table", "json"], default="table")
    parser.add_argument("--scale", type=int, default=None, help="only part 3, on this many records")
    args = parser.parse_args()
    if args.scale is not None:
        runs = scale(args.scale)
        if args.format == "json":
            print(json.dumps({"machine": describe_machine(), "scale": runs}, indent=2))
            return
        print(f"machine: {describe_machine()}")
        for r in runs:
            print(
                f"{r['method']:8} {r['budgets']:16} {r['records']:>10,} exit {r['exit']} "
                f"{r['seconds']:8.1f} s  peak RSS {r['peak_rss_mb']:7.0f} MB  {r['stderr']}\n"
                f"  {r['command']}"
            )
        return

    rows = [row for name in PUBLISHED for row in side_by_side(name, args.records, args.repeat)]
    big = big_library(args.big)
    cli = big_cli(args.big, args.repeat)
    doc = {
        "machine": describe_machine(),
        "run": "T = 50, tau = 10, lambda = 1, untrusted, delta = 1e-5, "
        "sigma calibrated to the largest budget at q = 1",
        "methods": rows,
        "big_library": big,
        "big_cli": cli,
    }
    if args.format == "json":
        print(json.dumps(doc, indent=2))
        return
    print(f"machine: {doc['machine']}\nrun: {doc['run']}\n")
    print(
        f"{'set':16} {'n':>6} {'sigma':>6} {'method':7} {'seconds':>9} {'published':>9} "
        f"{'evals':>6} {'overspent':>9} {'max over':>9} {'q gap':>8}"
    )
    for r in rows:
        published = "-" if r["published_seconds"] is None else f"{r['published_seconds']:.2f}"
        over = "-" if r["overspend_max"] is None else f"{r['overspend_max']:.3g}"
        print(
            f"{r['set']:16} {r['distinct']:>6} {r['sigma']:>6.4g} {r['method']:7} {r['seconds']:>9.4f} "
            f"{published:>9} {r['evaluations']:>6} {r['overspent']:>9} {over:>9} "
            f"{r['max_q_gap_vs_bisect']:>8.2e}"
        )
    print(
        f"\n{big['records']:,} records ({big['distinct']:,} distinct budgets), exact, library: "
        f"draw {big['draw_s']:.3f} s, calibrate sigma {big['calibrate_s']:.3f} s, exact "
        f"{big['exact_s']:.3f} s, write CSV {big['write_csv_s']:.3f} s, total {big['total_s']:.3f} s; "
        f"overspent {big['overspent']}"
    )
    print(
        f"CLI, fresh process: median {cli['median_s']:.2f} s, best {cli['best_s']:.2f} s "
        f"({cli['csv_bytes'] / 1e6:.0f} MB CSV)\n  {cli['command']}"
    )


if __name__ == "__main__":
    main()
