"""What dp-fedavg-robust's accounting costs per round: `run_epsilons` after every round of a run
whose rounds each lost their own weight (no calibration: one multiplier z sqrt(n'/n) per
distinct n'), with and without the real-order refinement of the released model.

    python benchmarks/bench_dropout_run.py [--rounds 100] [--sampled 50] [--format table|json]

The run is simulated (Poisson sample of about `--sampled` participants of weight 1, 30% lost
before their upload, seeded): only the accounting is timed, as `uldp train` does it after each
round. Each timing is fresh: the accountants' caches are cleared first.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from uldp.accountants.dropout import run_spend as dropout_run
from uldp.accountants.dropout.rounds import DropoutRound
from uldp.accountants.dropout.run_spend import ObservedRound, run_epsilons
from uldp.accountants.rdp import curves as rdp


def simulated_rounds(rounds: int, sampled: int, seed: int = 0) -> list[ObservedRound]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(rounds):
        n = max(2, int(rng.poisson(sampled)))
        alive = max(1, int(rng.binomial(n, 0.7)))
        out.append(ObservedRound(DropoutRound(float(n), float(alive), float(n)), calibrated=False))
    return out


def time_run(rounds: list[ObservedRound], refined_parts: int) -> tuple[float, float, float]:
    """(seconds for every round's accounting, final model epsilon, final server epsilon)."""
    rdp._step_curve.cache_clear()
    saved = dropout_run.REFINED_PARTS
    dropout_run.REFINED_PARTS = refined_parts
    try:
        start = time.perf_counter()
        for t in range(1, len(rounds) + 1):
            model, server = run_epsilons(rounds[:t], 1.0, 0.1, 1e-5, secure=True)
        return time.perf_counter() - start, model, server
    finally:
        dropout_run.REFINED_PARTS = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--sampled", type=int, default=50)
    parser.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args()
    rounds = simulated_rounds(args.rounds, args.sampled)
    distinct = len({r.model_multiplier(1.0) for r in rounds})
    rows = []
    for label, parts in (
        ("grid orders above 4 multipliers (uldp)", dropout_run.REFINED_PARTS),
        ("refined always", 10**9),
    ):
        seconds, model, server = time_run(rounds, parts)
        rows.append(
            {
                "accounting": label,
                "seconds": seconds,
                "per_round_s": seconds / len(rounds),
                "epsilon": model,
                "server_epsilon": server,
            }
        )
    if args.format == "json":
        print(
            json.dumps({"rounds": args.rounds, "distinct_multipliers": distinct, "results": rows}, indent=2)
        )
        return
    print(f"{args.rounds} rounds, {distinct} distinct multipliers, accounted after every round")
    print(f"{'accounting':42} {'seconds':>9} {'per round':>10} {'epsilon':>10} {'server':>10}")
    for row in rows:
        print(
            f"{row['accounting']:42} {row['seconds']:9.2f} {row['per_round_s']:10.4f} "
            f"{row['epsilon']:10.4f} {row['server_epsilon']:10.4f}"
        )


if __name__ == "__main__":
    main()
