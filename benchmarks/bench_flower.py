"""Per-round time of ULDP-AVG (MLP, MNIST, 1,000 users, 5 silos) in process, on Flower's
simulation engine, and on a loopback Flower deployment, side by side in one run (issue 13).

    python benchmarks/bench_flower.py [--rounds 4] [--skip-deployment] [--format table|json]

The per-round time is the median over rounds 2..R of the gaps between the rounds' `elapsed_s`
(round 1 pays each worker's first use); `setup s` is everything before round 1's loop (Ray's
start, the ClientApps' first message, for the deployment also bringing the federation up). The
goal is Flower's overhead per round <= 1 s + 20% of the in-process time. Recorded in
docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from uldp.cli.machine import describe_machine

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = dict(
    algo="uldp-avg", sigma=5.0, clip=1.0, lr=0.05, global_lr=1.0, local_epochs=1, seed=0, noise_seed=1
)
USERS, SILOS = 1000, 5


def per_round(history: list[dict]) -> float:
    """Median seconds per round over rounds 2..R (from the rows' cumulative elapsed_s)."""
    times = [row["elapsed_s"] for row in history]
    gaps = [b - a for a, b in zip(times, times[1:])]
    return statistics.median(gaps) if gaps else float("nan")


def in_process(data, rounds: int, engine: str) -> dict:
    from uldp.trainers.algorithms import TrainConfig
    from uldp.trainers.runner import train

    start = time.perf_counter()
    result = train(data, TrainConfig(rounds=rounds, **SETTINGS), model_name="mlp", engine=engine)
    wall = time.perf_counter() - start
    return {
        "per_round_s": per_round(result.history),
        "setup_s": wall - result.history[-1]["elapsed_s"],
        "wall_s": wall,
    }


def deployed(data, rounds: int) -> dict:
    from uldp.trainers.flower.partitions import write_partitions

    with tempfile.TemporaryDirectory(prefix="uldp-bench-flower-") as directory:
        files = write_partitions(data, directory)
        metrics = Path(directory) / "metrics.jsonl"
        train_args = (
            f"--algo uldp-avg --dataset mnist --users {USERS} --silos {SILOS} --model mlp --rounds {rounds} "
            f"--sigma {SETTINGS['sigma']} --lr {SETTINGS['lr']} --global-lr {SETTINGS['global_lr']} "
            f"--local-epochs {SETTINGS['local_epochs']} --seed 0 --noise-seed 1 --metrics {metrics}"
        )
        command = [sys.executable, str(ROOT / "examples/flower/federation.py"), "--app"]
        command += [str(ROOT / "examples/flower/uldp_app"), "--run-config", f"train-args='{train_args}'"]
        for path in files:
            command += ["--data-file", str(path)]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(
                f"the deployment failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
        history = [json.loads(line) for line in metrics.read_text().splitlines()]
    return {"per_round_s": per_round(history), "setup_s": wall - history[-1]["elapsed_s"], "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--skip-deployment", action="store_true")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args()

    from uldp.trainers.data import load_dataset

    data = load_dataset("mnist", users=USERS, silos=SILOS, seed=0)
    rows = {"in process": in_process(data, args.rounds, "local")}
    rows["Flower simulation"] = in_process(data, args.rounds, "flower")
    if not args.skip_deployment:
        rows["Flower deployment (loopback)"] = deployed(data, args.rounds)
    local = rows["in process"]["per_round_s"]
    goal = 1.0 + 0.2 * local
    for row in rows.values():
        row["overhead_s"] = row["per_round_s"] - local
        row["within_goal"] = row["overhead_s"] <= goal
    if args.format == "json":
        print(
            json.dumps(
                {
                    "machine": describe_machine(),
                    "rounds": args.rounds,
                    "goal_overhead_s": goal,
                    "engines": rows,
                }
            )
        )
        return
    print(f"ULDP-AVG, MLP, MNIST, {USERS} users, {SILOS} silos, {args.rounds} rounds; {describe_machine()}")
    print(
        f"{'engine':30} {'per round s':>12} {'overhead s':>11} {'goal <= s':>10} {'setup s':>9} {'wall s':>8}"
    )
    for name, row in rows.items():
        print(
            f"{name:30} {row['per_round_s']:12.2f} {row['overhead_s']:11.2f} {goal:10.2f} "
            f"{row['setup_s']:9.1f} {row['wall_s']:8.1f}"
        )


if __name__ == "__main__":
    main()
