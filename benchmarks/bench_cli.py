"""Wall-clock time of `uldp` commands run as fresh processes, as a user would run them.

    python benchmarks/bench_cli.py [--repeat 7] [--format table|json]

Prints the median and best of `--repeat` runs of each command (after one warm-up run that fills
the OS file cache), with the machine it ran on. Figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time

from uldp.cli.machine import describe_machine

COMMANDS = {
    "account (Fig. 2, k = 1..64, rdp + normal)": [
        "account",
        "--sigma",
        "5",
        "--q",
        "0.01",
        "--steps",
        "100000",
        "--k",
        "1,2,4,8,16,32,64",
        "--group-method",
        "rdp,normal",
    ],
    "account (Fig. 2, k = 1..64, pld group)": [
        "account",
        "--sigma",
        "5",
        "--q",
        "0.01",
        "--steps",
        "100000",
        "--k",
        "1,2,4,8,16,32,64",
        "--group-method",
        "pld",
    ],
    "account (Fig. 2, record level, rdp + pld + prv)": [
        "account",
        "--sigma",
        "5",
        "--q",
        "0.01",
        "--steps",
        "100000",
        "--accountant",
        "rdp,pld,prv",
    ],
    "calibrate sigma (eps 3, q 0.01, 1e5 steps)": [
        "calibrate",
        "--epsilon",
        "3",
        "--q",
        "0.01",
        "--steps",
        "100000",
    ],
    "calibrate steps (eps 3, q 0.01, sigma 5)": [
        "calibrate",
        "--epsilon",
        "3",
        "--q",
        "0.01",
        "--sigma",
        "5",
    ],
    "account --algo uldp-avg (user level)": [
        "account",
        "--algo",
        "uldp-avg",
        "--sigma",
        "5",
        "--rounds",
        "100",
        "--user-q",
        "0.5",
    ],
    "--help": ["--help"],
}


def uldp_command() -> list[str]:
    exe = shutil.which("uldp")
    return [exe] if exe else [sys.executable, "-m", "uldp"]


def time_command(args: list[str], repeat: int) -> list[float]:
    cmd = uldp_command() + args
    subprocess.run(cmd, check=True, capture_output=True)  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def run_commands(commands: dict[str, list[str]], *, default_repeat: int, description: str) -> None:
    """Time each of `commands` as fresh processes and print a table (or JSON with --format json)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repeat", type=int, default=default_repeat)
    parser.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args()
    rows = []
    for name, cmd in commands.items():
        times = time_command(cmd, args.repeat)
        rows.append(
            {
                "benchmark": name,
                "command": "uldp " + " ".join(cmd),
                "median_s": statistics.median(times),
                "best_s": min(times),
            }
        )
    if args.format == "json":
        print(json.dumps({"machine": describe_machine(), "repeat": args.repeat, "results": rows}, indent=2))
        return
    print(f"machine: {describe_machine()}; {args.repeat} runs each, fresh process")
    for row in rows:
        print(f"{row['median_s']:7.3f} s median  {row['best_s']:7.3f} s best  {row['benchmark']}")


def main() -> None:
    run_commands(COMMANDS, default_repeat=7, description=__doc__.splitlines()[0])


if __name__ == "__main__":
    main()
