"""Seconds per round of `uldp train` with 1 and 2 torch threads, batched and --loop paths.

    python benchmarks/bench_train_threads.py [--rounds 4] [--format table|json]

Each setting runs `uldp train ... --threads N [--loop] --format json` as a fresh process (as a
user runs it) and reports the median of the per-round times after the first round (which pays
for warm-up), with the 1-minute load average just before the run: on a shared machine the same
command is several times slower with more threads than free cores (issue 11 point 11), so the
load is part of the result. Settings: the README's default MNIST run (1,000 users, logistic
regression) and the paper's CNN with 100 users (issue 11's 13.1 s vs 2.7 s per round), each for
fewer rounds.
Figures go to docs/performance.md ("Training threads").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from uldp.cli.machine import describe_machine

SETTINGS = {
    "mnist defaults (logistic, 1000 users)": ["--algo", "uldp-avg", "--dataset", "mnist"],
    "mnist CNN (100 users, 2 local epochs)": [
        "--algo",
        "uldp-avg",
        "--dataset",
        "mnist",
        "--model",
        "cnn",
        "--users",
        "100",
        "--local-epochs",
        "2",
        "--lr",
        "0.1",
        "--global-lr",
        "5",
        "--sigma",
        "5",
    ],
}


def per_round(args: list[str], rounds: int) -> tuple[float, float]:
    """(median seconds per round after the first, load average before the run)."""
    load = os.getloadavg()[0]
    out = subprocess.run(
        [sys.executable, "-m", "uldp.cli", "train", *args, "--rounds", str(rounds), "--noise-seed", "0"]
        + ["--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    elapsed = [row["elapsed_s"] for row in json.loads(out)["history"]]
    return statistics.median(b - a for a, b in zip(elapsed, elapsed[1:])), load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--format", choices=["table", "json"], default="table")
    args = parser.parse_args()
    rows = []
    for name, setting in SETTINGS.items():
        for path in ("batched", "loop"):
            for threads in (1, 2):
                flags = [*setting, "--threads", str(threads), *(["--loop"] if path == "loop" else [])]
                seconds, load = per_round(flags, args.rounds)
                rows.append(
                    {"setting": name, "path": path, "threads": threads, "s_per_round": round(seconds, 3)}
                    | {"load_before": round(load, 2)}
                )
                if args.format == "table":
                    print(
                        f"{name:45} {path:8} threads {threads}  {seconds:7.3f} s/round  (load {load:.2f})",
                        flush=True,
                    )
    if args.format == "json":
        print(json.dumps({"machine": describe_machine(), "rounds": args.rounds, "results": rows}, indent=2))
    else:
        print(describe_machine())


if __name__ == "__main__":
    main()
