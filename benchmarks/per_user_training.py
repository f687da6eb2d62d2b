"""Seconds per round of ULDP-AVG's per-user training: Python loop vs batched (vmap) path.

One round = every silo trains every one of its users from the global model (ULDP-FL Algorithm 3
lines 8-16, through `PerUserClipping.silo_update`: training, clipping, weighting, noise). Both
paths run on the same data and model; the batched path is checked to give the same clipped
deltas (to 1e-5) on the users the loop timed.

Settings (issue 5): 5 silos, 1,000 and 10,000 users, the ~5K-parameter MLP on creditcard-shaped
data (the synthetic stand-in unless --data-path names creditcard.csv), 1 and 5 local epochs;
the ~20K-parameter CNN on MNIST with 100 users. Both paths are timed as whole rounds through
the same silo update (training, clipping, weighting, noise), alternately, best of --repeats. Where the loop
would take longer than --loop-budget seconds, only its training is timed, on a random subset of
the users, and scaled linearly by the number of (user, silo) pairs; the output says so
("loop_scaled_from").

    python benchmarks/per_user_training.py                 # table
    python benchmarks/per_user_training.py --format json   # one JSON document
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from uldp.cli.machine import describe_machine  # noqa: E402
from uldp.trainers.algorithms import TrainConfig  # noqa: E402
from uldp.trainers.algorithms.base import Context  # noqa: E402
from uldp.trainers.algorithms.per_user_clipping import PerUserClipping  # noqa: E402
from uldp.trainers.data import load_dataset  # noqa: E402
from uldp.trainers.models import build_model, default_model_name, loss_for, parameter_count  # noqa: E402
from uldp.trainers.per_user import (  # noqa: E402
    LocalTraining,
    batched_user_deltas,
    clip_rows,
    loop_user_deltas,
    vectorises_well,
)
from uldp.trainers.runner import build_silos, round_rngs  # noqa: E402

SETTINGS = [
    ("creditcard", 1000, 1),
    ("creditcard", 1000, 5),
    ("creditcard", 10000, 1),
    ("creditcard", 10000, 5),
    ("mnist", 100, 1),
]


def _setup(dataset: str, users: int, data_path: str | None, device: str):
    data = load_dataset(
        dataset, users=users, silos=5, seed=0, path=data_path if dataset == "creditcard" else None
    )
    torch.manual_seed(0)
    name = default_model_name(data.name, data.task, data.feature_shape)
    model = build_model(name, task=data.task, feature_shape=data.feature_shape, n_classes=data.n_classes).to(
        device
    )
    params = {k: v.detach() for k, v in model.named_parameters()}
    silos = build_silos(data, device)
    counts = data.user_silo_counts()
    ctx = Context(model, loss_for(data.task), data.n_users, data.n_silos, parameter_count(model), counts)
    return data, name, model, params, silos, ctx


def _round_seconds(algo, silos, params, ctx, cfg) -> float:
    server_rng, silo_rngs = round_rngs(cfg.seed, 1, len(silos))
    plan = algo.plan_round(1, ctx, cfg, server_rng)
    start = time.perf_counter()
    for silo, rng in zip(silos, silo_rngs):
        algo.silo_update(silo, params, plan, ctx, cfg, rng)
    return time.perf_counter() - start


def _loop_subset_seconds(silos, params, ctx, training, fraction, rng):
    """Loop time (training only) on a random `fraction` of each silo's users, and the largest
    difference between the loop's and the batched path's clipped deltas for those users."""
    seconds, worst, pairs = 0.0, 0.0, 0
    for silo in silos:
        present = np.flatnonzero(ctx.counts[silo.silo] > 0)
        chosen = np.sort(rng.choice(present, size=max(1, int(round(fraction * len(present)))), replace=False))
        keys = np.random.default_rng(silo.silo).random((training.epochs, silo.size))
        start = time.perf_counter()
        loop = loop_user_deltas(
            ctx.model, params, silo.x, silo.y, silo.users, chosen, keys, ctx.loss_fn, training
        )
        seconds += time.perf_counter() - start
        batched = batched_user_deltas(
            ctx.model, params, silo.x, silo.y, silo.users, chosen, keys, ctx.loss_fn, training
        )
        worst = max(worst, float((clip_rows(loop, 1.0)[0] - clip_rows(batched, 1.0)[0]).abs().max()))
        pairs += len(chosen)
    return seconds, worst, pairs


def measure(dataset, users, epochs, *, data_path, device, loop_budget, repeats) -> dict:
    data, name, model, params, silos, ctx = _setup(dataset, users, data_path, device)
    cfg = TrainConfig(algo="uldp-avg", rounds=1, local_epochs=epochs, lr=0.05, sigma=1.0)
    algo = PerUserClipping("uldp-avg")
    total_pairs = int((ctx.counts > 0).sum())
    # Warm-up: the first vmap call imports and traces (seconds, once per process).
    _round_seconds(algo, silos[:1], params, ctx, cfg)
    training = LocalTraining(epochs, cfg.lr, None)
    rng = np.random.default_rng(1)
    probe_s, worst, probe_pairs = _loop_subset_seconds(
        silos, params, ctx, training, min(1.0, 50 / users), rng
    )
    estimate = probe_s * total_pairs / probe_pairs
    whole_loop = estimate <= loop_budget
    loop_runs = max(1, min(repeats, int(loop_budget // max(estimate, 1e-9)))) if whole_loop else 0
    # Both paths run whole rounds through the same silo update, alternately, so that other jobs
    # on the machine weigh on both alike; the best of each is kept.
    loop_cfg = dataclasses.replace(cfg, batched=False)
    batched_times, loop_times = [], []
    for i in range(repeats):
        batched_times.append(_round_seconds(algo, silos, params, ctx, cfg))
        if i < loop_runs:
            loop_times.append(_round_seconds(algo, silos, params, ctx, loop_cfg))
    batched = min(batched_times)
    if whole_loop:
        loop, timed_pairs = min(loop_times), total_pairs
    else:
        fraction = max(probe_pairs / total_pairs, loop_budget / estimate)
        loop_s, worst, timed_pairs = _loop_subset_seconds(silos, params, ctx, training, fraction, rng)
        loop = loop_s * total_pairs / timed_pairs
    used = "batched (vmap)" if vectorises_well(model, device) else "loop (vmap slower for conv on CPU)"
    return {
        "dataset": dataset,
        "synthetic": data.synthetic,
        "model": name,
        "parameters": ctx.n_params,
        "users": users,
        "silos": len(silos),
        "local_epochs": epochs,
        "train_records": int(len(data.y_train)),
        "user_silo_pairs": total_pairs,
        "loop_s_per_round": round(loop, 4),
        "batched_s_per_round": round(batched, 4),
        "speedup": round(loop / batched, 2),
        "batched_path_used": used,
        "loop_scaled_from": None
        if timed_pairs == total_pairs
        else f"{timed_pairs} of {total_pairs} user-silo pairs, scaled linearly",
        "max_abs_diff_clipped": worst,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--format", choices=["table", "json"], default="table")
    parser.add_argument("--data-path", default=None, help="Kaggle creditcard.csv (default: stand-in)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--loop-budget",
        type=float,
        default=12.0,
        help="Seconds the loop may take per setting before it is subsampled.",
    )
    parser.add_argument("--repeats", type=int, default=3, help="Rounds timed per path (best kept).")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads for both paths (default: torch's, one per core; "
        "1 is steadier when other jobs share the cores).",
    )
    parser.add_argument("--quick", action="store_true", help="Only the 1,000-user MLP, 1 epoch.")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no GPU here")
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = SETTINGS[:1] if args.quick else SETTINGS
    rows = [
        measure(
            d,
            u,
            e,
            data_path=args.data_path,
            device=args.device,
            loop_budget=args.loop_budget,
            repeats=args.repeats,
        )
        for d, u, e in settings
    ]
    machine = {
        "machine": describe_machine(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": args.device,
        "load_average_at_end": os.getloadavg(),
    }
    if args.format == "json":
        print(json.dumps({"benchmark": "per_user_training", "machine": machine, "settings": rows}, indent=2))
        return
    print(
        f"{'model':6} {'users':>6} {'epochs':>6} {'loop s/round':>13} {'batched s/round':>16} "
        f"{'speedup':>8}  note"
    )
    for r in rows:
        note = r["batched_path_used"] + ("; loop: " + r["loop_scaled_from"] if r["loop_scaled_from"] else "")
        print(
            f"{r['model']:6} {r['users']:>6} {r['local_epochs']:>6} {r['loop_s_per_round']:>13.3f} "
            f"{r['batched_s_per_round']:>16.3f} {r['speedup']:>7.1f}x  {note}"
        )
    print(f"machine: {machine}")


if __name__ == "__main__":
    main()
