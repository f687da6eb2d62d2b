"""Time and accuracy of the tight accountants at the ULDP-FL Fig. 2 setting.

    python benchmarks/bench_pld_group.py [--k 1,2,4,8,16,32,64] [--format table|json]

For each group size k: the PLD group bound with the default discretisation, its time, and its
relative distance to the same bound on a grid four times finer (the default must stay within
1e-3 of it); then the record-level PRV bound and its time. sigma 5, q 0.01, 1e5 steps,
delta 1e-5. Figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import time

from uldp.accountants.events import SubsampledGaussian
from uldp.accountants.tight.pld import _default_discretization, pld_epsilon
from uldp.accountants.tight.prv import prv_epsilon
from uldp.cli.machine import describe_machine

FIG2 = SubsampledGaussian(sigma=5.0, q=0.01, steps=100_000)
DELTA = 1e-5


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", default="1,2,4,8,16,32,64")
    parser.add_argument("--format", choices=["table", "json"], default="table")
    args = parser.parse_args()
    rows = []
    for k in (int(x) for x in args.k.split(",")):
        eps, seconds = timed(lambda: pld_epsilon(FIG2, DELTA, k=k))
        finer, finer_seconds = timed(
            lambda: pld_epsilon(FIG2, DELTA, k=k, discretization=_default_discretization(FIG2, (k,)) / 4)
        )
        rows.append(
            {
                "accountant": "pld",
                "k": k,
                "epsilon": eps,
                "seconds": seconds,
                "finer_epsilon": finer,
                "finer_seconds": finer_seconds,
                "relative_excess": (eps - finer) / finer,
            }
        )
    eps, seconds = timed(lambda: prv_epsilon(FIG2, DELTA))
    rows.append({"accountant": "prv", "k": 1, "epsilon": eps, "seconds": seconds})
    if args.format == "json":
        print(
            json.dumps(
                {
                    "machine": describe_machine(),
                    "setting": "sigma 5, q 0.01, 1e5 steps, delta 1e-5",
                    "results": rows,
                },
                indent=2,
            )
        )
        return
    print(f"machine: {describe_machine()}; sigma 5, q 0.01, 1e5 steps, delta 1e-5")
    for r in rows:
        extra = (
            f"  finer grid {r['finer_epsilon']:.4f} ({r['finer_seconds']:.2f} s), "
            f"excess {r['relative_excess']:.1e}"
            if "finer_epsilon" in r
            else ""
        )
        print(f"{r['accountant']}  k={r['k']:<3d} epsilon {r['epsilon']:9.4f}  {r['seconds']:6.2f} s{extra}")


if __name__ == "__main__":
    main()
