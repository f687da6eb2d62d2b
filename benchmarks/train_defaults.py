"""How `uldp train`'s tuned defaults were chosen, and whether they hold across noise seeds.

    python benchmarks/train_defaults.py seeds mnist uldp-avg --seeds 10   # the defaults, 10 seeds
    python benchmarks/train_defaults.py sweep mnist uldp-avg              # the grid of the search

`seeds` runs `uldp train --algo A --dataset D` with the defaults of trainers/defaults.py (no
hyper-parameters given) under noise seeds 0..N-1 and prints each run's final metric, epsilon and
wall time, then the minimum and median metric. `sweep` runs the grid below (one noise seed),
one JSON line per setting, best final metric last. One torch thread, as `--threads 1`, so two
sweeps can share a 2-core machine without slowing each other down much.

Reasoning behind the grid (ULDP-AVG, Algorithms 3-4, Theorem 3): the server adds
eta_g / (|U||S|) * (sum of clipped deltas weighted 1/|S| + N(0, sigma^2 C^2 I)), so the signal
grows with |U| and the noise with sqrt(#parameters); epsilon is that of T rounds of a Gaussian of
multiplier sigma, so (sigma, T) pairs are taken at epsilon just under 10 (delta 1e-5).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from uldp.trainers.algorithms import TrainConfig  # noqa: E402
from uldp.trainers.data import load_dataset  # noqa: E402
from uldp.trainers.defaults import train_defaults  # noqa: E402
from uldp.trainers.runner import train  # noqa: E402

# (sigma, rounds) pairs at epsilon 9.2-9.6 (delta 1e-5), and the other axes of the search.
GRIDS = {
    "mnist": {
        "users": [500, 1000, 2000],
        "sigma_rounds": [(2.5, 20), (3.0, 30), (4.0, 50)],
        "lr": [0.5],
        "global_lr": [5.0, 20.0, 50.0],
        "local_epochs": [1, 5],
        "model": ["logistic"],
    },
    "heart-disease": {
        "users": [100, 200, 400],
        "sigma_rounds": [(2.5, 20), (3.0, 30), (4.0, 50)],
        "lr": [0.1, 0.5],
        "global_lr": [20.0, 50.0, 100.0],
        "local_epochs": [1, 5],
        "model": ["logistic"],
    },
}


def run(dataset: str, algo: str, settings: dict, noise_seed: int) -> dict:
    data = load_dataset(dataset, users=settings["users"], seed=0)
    cfg = TrainConfig(
        algo=algo,
        rounds=settings["rounds"],
        sigma=settings["sigma"],
        lr=settings["lr"],
        global_lr=settings["global_lr"],
        local_epochs=settings["local_epochs"],
        delta=1e-5,
        noise_seed=noise_seed,
    )
    started = time.perf_counter()
    model = None if settings["model"] == "auto" else settings["model"]
    result = train(data, cfg, model_name=model)
    last = result.history[-1]
    return {
        **settings,
        "noise_seed": noise_seed,
        data.metric: round(last[data.metric], 4),
        "epsilon": round(last["epsilon"], 3),
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["seeds", "sweep"])
    parser.add_argument("dataset", choices=sorted(GRIDS))
    parser.add_argument("algo")
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    metric = "accuracy"
    if args.mode == "seeds":
        settings = train_defaults(args.dataset, args.algo)
        rows = [run(args.dataset, args.algo, settings, seed) for seed in range(args.seeds)]
        for row in rows:
            print(json.dumps(row), flush=True)
        values = [row[metric] for row in rows]
        print(
            json.dumps(
                {
                    "min": min(values),
                    "median": statistics.median(values),
                    "max": max(values),
                    "runs": len(rows),
                }
            )
        )
        return
    grid = GRIDS[args.dataset]
    rows = []
    for users, (sigma, rounds), lr, global_lr, epochs, model in itertools.product(
        grid["users"],
        grid["sigma_rounds"],
        grid["lr"],
        grid["global_lr"],
        grid["local_epochs"],
        grid["model"],
    ):
        settings = dict(
            users=users,
            sigma=sigma,
            rounds=rounds,
            lr=lr,
            global_lr=global_lr,
            local_epochs=epochs,
            model=model,
        )
        rows.append(run(args.dataset, args.algo, settings, noise_seed=1))
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps(max(rows, key=lambda r: r[metric])))


if __name__ == "__main__":
    main()
