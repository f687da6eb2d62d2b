"""What `uldp audit` costs over a plain `uldp train` run with the same flags (issue 18).

    python benchmarks/bench_audit.py [--repeat 3] [--threads 1] [--format table|json]

For each setting, `uldp train FLAGS --format json` and `uldp audit FLAGS --canaries M --format
json` run as fresh processes (as a user runs them), alternately, after one warm-up of each that
fills the OS file cache; the median and best wall clock of `--repeat` runs of each, and their
ratio audit / train. The audit's own `seconds` (train: its training run, canaries included;
audit: planting, scoring and the lower bounds; accounting: the upper bounds) are reported as
medians too, beside `uldp train`'s own training loop (`summary.elapsed_s`); the rest of each wall
clock is start-up (imports, data loading). Both commands get the same --noise-seed and
--threads, pinned: the default (the CPUs free now) would differ between back-to-back runs as the
load average follows them. The default here is 1 thread: with 2 on the 2-core machine, setting
(b)'s training loop took 4.7-15.4 s in three back-to-back runs (a thread waiting for a core;
docs/performance.md, "Training threads"), with 1 thread 6.3-6.5 s. The 1-minute load average
before each setting is reported. Canary users are added to the data's own, so the audited run
trains on more users than the plain one. An audit that exits 3 (a lower bound above the upper
bound) is reported, not hidden.
Figures go to docs/performance.md ("Auditing").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

from bench_cli import uldp_command  # same folder: run as a script

from uldp.cli.machine import describe_machine

NOISE_SEED = "1"
#: name -> (flags shared by train and audit, --canaries)
SETTINGS: dict[str, tuple[list[str], int]] = {
    "(a) uldp-avg, mnist, tuned defaults (1000 users, 30 rounds, logistic)": (
        ["--algo", "uldp-avg", "--dataset", "mnist"],
        1000,
    ),
    "(b) uldp-avg, creditcard (synthetic), 2000 users, 20 rounds": (
        ["--algo", "uldp-avg", "--dataset", "creditcard", "--users", "2000", "--rounds", "20"],
        1000,
    ),
    "(c) uldp-group k = 1 (record level), creditcard (synthetic), 1 silo, 1000 users, 5 rounds": (
        [
            *["--algo", "uldp-group", "--dataset", "creditcard", "--silos", "1", "--users", "1000"],
            *["--group-k", "1", "--batch-size", "3200", "--rounds", "5", "--sigma", "5"],
        ],
        1000,
    ),
}
#: The exit status of an audit whose lower bound exceeds its upper bound (uldp audit's VIOLATED).
VIOLATED = 3


def timed(args: list[str]) -> tuple[float, dict, int]:
    """(wall seconds, the JSON document, exit status) of `uldp ARGS` as a fresh process."""
    start = time.perf_counter()
    done = subprocess.run(uldp_command() + args, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode not in (0, VIOLATED):
        raise SystemExit(f"uldp {' '.join(args)} failed (exit {done.returncode}):\n{done.stderr}")
    return wall, json.loads(done.stdout), done.returncode


def measure(flags: list[str], canaries: int, repeat: int, warmup: int) -> dict:
    common = [*flags, "--noise-seed", NOISE_SEED, "--format", "json"]
    train_args = ["train", *common]
    audit_args = ["audit", *common, "--canaries", str(canaries)]
    load = os.getloadavg()[0]
    for _ in range(warmup):
        timed(train_args)
        timed(audit_args)
    train_wall, train_loop, audit_wall, parts, statuses = [], [], [], [], []
    views = None
    for _ in range(repeat):  # alternate, so that a drift in load hits both alike
        wall, doc, _ = timed(train_args)
        train_wall.append(wall)
        train_loop.append(doc["summary"]["elapsed_s"])
        wall, doc, status = timed(audit_args)
        audit_wall.append(wall)
        parts.append(doc["seconds"])
        statuses.append(status)
        views = [
            {
                k: v[k]
                for k in ("view", "lower_bound", "upper_bound", "ceiling", "verdict", "guesses", "correct")
            }
            for v in doc["views"]
        ]
    med = statistics.median
    return {
        "train_command": "uldp " + " ".join(train_args),
        "audit_command": "uldp " + " ".join(audit_args),
        "load_before": round(load, 2),
        "train_median_s": round(med(train_wall), 3),
        "train_best_s": round(min(train_wall), 3),
        "train_loop_median_s": round(med(train_loop), 3),
        "audit_median_s": round(med(audit_wall), 3),
        "audit_best_s": round(min(audit_wall), 3),
        "audit_seconds_median": {k: round(med(p[k] for p in parts), 3) for k in parts[0]},
        "ratio_audit_train": round(med(audit_wall) / med(train_wall), 2),
        "audit_exit_statuses": statuses,
        "views": views,  # the last audit's (the same every run: the seed is fixed)
        "train_wall_s": [round(t, 3) for t in train_wall],
        "audit_wall_s": [round(t, 3) for t in audit_wall],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs of each command first")
    parser.add_argument(
        "--threads", type=int, default=1, help="--threads for both commands (0: their default)"
    )
    parser.add_argument("--only", default=None, help="run only the settings whose name contains this")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args()
    threads = ["--threads", str(args.threads)] if args.threads else []
    rows = []
    for name, (flags, canaries) in SETTINGS.items():
        if args.only and args.only not in name:
            continue
        row = {"setting": name} | measure([*flags, *threads], canaries, args.repeat, args.warmup)
        rows.append(row)
        if args.format == "table":
            s = row["audit_seconds_median"]
            bad = [x for x in row["audit_exit_statuses"] if x == VIOLATED]
            train = (
                f"train {row['train_median_s']:7.2f} s median ({row['train_best_s']:.2f} best; "
                f"loop {row['train_loop_median_s']:.2f})"
            )
            audit = (
                f"audit {row['audit_median_s']:7.2f} s median ({row['audit_best_s']:.2f} best; "
                f"train {s['train']:.2f} + audit {s['audit']:.2f} + accounting {s['accounting']:.2f})"
            )
            print(
                f"{name}\n  {train}  {audit}  audit/train {row['ratio_audit_train']:.2f}  "
                f"(load {row['load_before']:.2f})"
                + (f"  EXIT 3 in {len(bad)} of {len(row['audit_exit_statuses'])} audits" if bad else ""),
                flush=True,
            )
    if args.format == "json":
        document = {
            "machine": describe_machine(),
            "repeat": args.repeat,
            "warmup": args.warmup,
            "threads": args.threads or None,
            "results": rows,
        }
        print(json.dumps(document, indent=2))
    else:
        print(f"machine: {describe_machine()}; median of {args.repeat} runs each, fresh process")


if __name__ == "__main__":
    main()
