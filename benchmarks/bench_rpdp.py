"""One rPDP-FL round against one uniform DP-SGD round at the same expected batch; rate set-up time.

    python benchmarks/bench_rpdp.py [--rounds 7] [--local-steps 10] [--format table|json]

Issue 14 point 5: a round of `rpdp` (every record Poisson-sampled at its own q_j, rPDP-FL
Algorithm 2 line 9) may cost at most 1.5x a round of uniform DP-SGD at the same expected batch
size, so per-record sampling must not be the bottleneck. Both sides run the library's
`trainers.algorithms.dp_sgd.dp_sgd` on every silo of a built-in data set, tau steps each, with
the rates `uldp train --algo rpdp --distribution three-levels` computes: once with the per-record
array q (rpdp), once with the scalar mean(q) of each silo (uniform DP-SGD with the same expected
batch sum_j q_j and the same divisor). The two alternate round by round, each with its own fixed
seed, so that a change of load hits both; the figure is the median of `--rounds` rounds after one
warm-up round each. Then the same comparison end to end, as a user runs it: `uldp train --algo
rpdp` against `uldp train --algo unidp --batch-size B`, B chosen so that unidp's expected batch
(every record at q = B / smallest silo) is as close as an integer B allows to rpdp's sum_j q_j;
each a fresh process with one torch thread, the median of the per-round times after round 1
(a round there also evaluates the model and accounts every budget tier).

Second table: `trainers.rates.record_rates` (sigma calibration and the exact inverse of
`uldp personalize`, the per-run pre-computation of the q) for 1,000 and 100,000 records.
Figures go to docs/performance.md ("Personalised budgets (rpdp)").
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

from uldp.cli.machine import describe_machine
from uldp.trainers.algorithms import TrainConfig
from uldp.trainers.algorithms.base import Context
from uldp.trainers.algorithms.dp_sgd import dp_sgd
from uldp.trainers.budget_sources import Budgets, drawn_budgets
from uldp.trainers.data import load_dataset
from uldp.trainers.models import build_model, default_model_name, loss_for, parameter_count
from uldp.trainers.rates import personalize_data, record_rates
from uldp.trainers.runner import build_silos

#: (label, data set, silos or None for its own, model or None for its default)
SETTINGS = (
    ("heart-disease, 4 hospitals, logistic (14 parameters)", "heart-disease", None, None),
    ("MNIST 5,000 images, 10 silos, logistic (7,850 parameters)", "mnist", 10, "logistic"),
    ("MNIST 5,000 images, 10 silos, MLP (65,722 parameters)", "mnist", 10, "mlp"),
)
LIMIT = 1.5  # the bound on rpdp / uniform
RUN_ROUNDS = 15  # T the rates and sigma are computed for (examples/rpdp-*.yaml)


def round_times(
    dataset: str, silos: int | None, model_name: str | None, rounds: int, local_steps: int
) -> dict[str, object]:
    """Median seconds of one round (every silo, `local_steps` DP-SGD steps) for both samplers."""
    data = load_dataset(dataset, users=100, silos=silos, seed=0)
    data, sigma = personalize_data(
        data,
        algo="rpdp",
        record_level=True,
        distribution="three-levels",
        seed=0,
        sigma=None,
        local_steps=local_steps,
        rounds=RUN_ROUNDS,
        silo_q=1.0,
        delta=1e-5,
    )
    name = model_name or default_model_name(data.name, data.task, data.feature_shape)
    torch.manual_seed(0)
    model = build_model(name, task=data.task, feature_shape=data.feature_shape, n_classes=data.n_classes)
    params = {k: v.detach() for k, v in model.named_parameters()}
    ctx = Context(model, loss_for(data.task), data.n_users, data.n_silos, parameter_count(model), None)
    assert sigma is not None
    cfg = TrainConfig(algo="rpdp", rounds=rounds, sigma=sigma, local_steps=local_steps)
    parts = build_silos(data)

    def one_round(per_record: bool, rng: np.random.Generator) -> float:
        start = time.perf_counter()
        for silo in parts:
            assert silo.q is not None
            gamma: float | np.ndarray = silo.q if per_record else float(silo.q.mean())
            dp_sgd(
                ctx,
                params,
                silo.x,
                silo.y,
                np.arange(silo.size),
                gamma=gamma,
                lot_size=float(silo.q.sum()),
                steps=local_steps,
                cfg=cfg,
                rng=rng,
            )
        return time.perf_counter() - start

    times: dict[bool, list[float]] = {True: [], False: []}
    rngs = {True: np.random.default_rng(1), False: np.random.default_rng(1)}
    for r in range(rounds + 1):
        for per_record in (True, False):
            seconds = one_round(per_record, rngs[per_record])
            if r:  # round 0 warms up (first vmap trace, allocations)
                times[per_record].append(seconds)
    rpdp, uniform = statistics.median(times[True]), statistics.median(times[False])
    q = np.asarray(data.record_q)
    smallest = int(np.bincount(data.silo_train, minlength=data.n_silos).min())
    batch = max(1, round(float(q.mean()) * smallest))  # unidp: q = B / smallest silo for all
    return {
        "records": int(q.size),
        "parameters": parameter_count(model),
        "sigma": round(sigma, 4),
        "expected_batch_per_step": round(float(q.sum()), 1),
        "rpdp_s": round(rpdp, 4),
        "uniform_s": round(uniform, 4),
        "ratio": round(rpdp / uniform, 3),
        "unidp_batch_size": batch,
        "unidp_expected_batch_per_step": round(min(1.0, batch / smallest) * q.size, 1),
    }


def cli_round(args: list[str]) -> float:
    """Median seconds per round after the first of `uldp train ARGS`, a fresh process, over the
    RUN_ROUNDS rounds the rates are made for (fewer rounds would give other rates and batches)."""
    out = subprocess.run(
        [sys.executable, "-m", "uldp.cli", "train", *args, "--rounds", str(RUN_ROUNDS)]
        + ["--noise-seed", "0", "--threads", "1", "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    elapsed = [row["elapsed_s"] for row in json.loads(out)["history"]]
    return statistics.median(b - a for a, b in zip(elapsed, elapsed[1:]))


def end_to_end(
    dataset: str, silos: int | None, model_name: str | None, local_steps: int, batch: int
) -> dict[str, object]:
    """`uldp train` seconds per round: rpdp, and unidp at (about) the same expected batch."""
    common = ["--dataset", dataset, "--distribution", "three-levels", "--local-steps", str(local_steps)]
    common += [] if silos is None else ["--silos", str(silos)]
    common += [] if model_name is None else ["--model", model_name]
    rpdp = cli_round(["--algo", "rpdp", *common])
    uniform = cli_round(["--algo", "unidp", *common, "--batch-size", str(batch)])
    return {
        "train_rpdp_s": round(rpdp, 4),
        "train_unidp_s": round(uniform, 4),
        "train_ratio": round(rpdp / uniform, 3),
    }


def rate_times(records: int, distribution: str, repeat: int = 3) -> dict[str, object]:
    """Best of `repeat` of `record_rates` for `records` budgets drawn from `distribution`
    (T = 15 rounds, tau = 10, lambda = 1, sigma calibrated, delta 1e-5)."""
    budgets = Budgets(drawn_budgets(distribution, records, 0), distribution)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        rates = record_rates(
            budgets, uniform=False, sigma=None, local_steps=10, rounds=15, silo_q=1.0, delta=1e-5
        )
        best = min(best, time.perf_counter() - start)
    return {
        "records": records,
        "distribution": distribution,
        "distinct_budgets": int(np.unique(budgets.values).size),
        "sigma": round(rates.sigma, 4),
        "seconds": round(best, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds per sampler (median)")
    parser.add_argument("--local-steps", type=int, default=10, help="DP-SGD steps tau per silo and round")
    parser.add_argument("--format", choices=["table", "json"], default="table")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the two cores are shared: one thread is the steady figure
    rounds = []
    for label, dataset, silos, model_name in SETTINGS:
        row = {"setting": label} | round_times(dataset, silos, model_name, args.rounds, args.local_steps)
        batch = row["unidp_batch_size"]
        assert isinstance(batch, int)
        row |= end_to_end(dataset, silos, model_name, args.local_steps, batch)
        rounds.append(row)
        if args.format == "table":
            for kind, a, b, r in (
                ("dp_sgd", "rpdp_s", "uniform_s", "ratio"),
                ("uldp train", "train_rpdp_s", "train_unidp_s", "train_ratio"),
            ):
                verdict = "met" if row[r] <= LIMIT else "NOT met"  # type: ignore[operator]
                print(
                    f"{label:58} {kind:10} rpdp {row[a]:.4f} s  uniform {row[b]:.4f} s  "
                    f"ratio {row[r]:.3f} ({verdict}, limit {LIMIT})",
                    flush=True,
                )
            print(
                f"{'':58} expected batch per step: rpdp {row['expected_batch_per_step']}, unidp "
                f"--batch-size {batch}: {row['unidp_expected_batch_per_step']}",
                flush=True,
            )
    rates = []
    for records in (1_000, 100_000):
        for distribution in ("three-levels", "bounded-mix-gauss"):
            row = rate_times(records, distribution)
            rates.append(row)
            if args.format == "table":
                print(
                    f"record_rates: {records:>7} records, {distribution:17} "
                    f"({row['distinct_budgets']} distinct budgets)  {row['seconds']:.4f} s",
                    flush=True,
                )
    machine = describe_machine()
    if args.format == "json":
        print(
            json.dumps(
                {
                    "machine": machine,
                    "torch_threads": 1,
                    "rounds": args.rounds,
                    "local_steps": args.local_steps,
                    "round_times": rounds,
                    "rate_times": rates,
                },
                indent=2,
            )
        )
    else:
        print(f"{machine}, torch {torch.__version__}, 1 torch thread")


if __name__ == "__main__":
    main()
