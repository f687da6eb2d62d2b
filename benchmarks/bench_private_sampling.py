"""What private user-level sub-sampling (issue 36, ULDP-FL §4.1) adds to a round of Protocol 1.

    python benchmarks/bench_private_sampling.py [--users 100,1000] [--slots 10,100] [--params 100]
        [--silos 3] [--key-bits 3072 [--test-keys]] [--user-q 0.1] [--audit-rate 0.05]
        [--rounds 1] [--workers N] [--phases-only] [--format table|json]

For each (|U|, P) cell: a fresh setup and --rounds rounds of `private_weighting_round` through
`crypto.protocol.benchmark.benchmark_run` (what `uldp bench protocol --private-sampling` runs),
every aggregate checked against the plaintext sum over the sample the transfer realised. It
prints the OT phase (the five sampling phases: the server's offer and transfer, the mean silo's
choice, retrieval and audit), its cost per user, the round's other phases, and the issue's goal:
at |U| = 1,000 and P = 100 the OT phase costs at most one silo's encrypted weighting
(`silo_weighting`) of the same round.

`--phases-only` times the sampling phases alone, without the weighting (b) and aggregation (c):
for |U| = 10,000, where one silo's weighting alone takes minutes on a small machine (its |U|
full-size exponentiations do not depend on d). It drives the parties as `private_weighting_round`
does up to the openings, then times each silo's check of the openings (`sampling.check_opening`,
the loop `Silo.masked_sum` runs before it weights) on that silo's stored round. The sampling
phases do not depend on d.

Figures go to docs/performance.md ("Private sampling (issue 36)").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uldp.accountants.private_sampling import private_rate  # noqa: E402
from uldp.cli.machine import describe_machine  # noqa: E402
from uldp.crypto.encoding import DEFAULT_VALUE_BOUND, Encoding  # noqa: E402
from uldp.crypto.paillier import check_key_bits  # noqa: E402
from uldp.crypto.protocol import sampling  # noqa: E402
from uldp.crypto.protocol.benchmark import (  # noqa: E402
    OT_PHASE,
    benchmark_run,
    default_n_max,
    synthetic_inputs,
)
from uldp.crypto.protocol.params import ProtocolParams  # noqa: E402
from uldp.crypto.protocol.run import oblivious_transfer, setup  # noqa: E402

GOAL_CELL = (1000, 100)


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def full_cell(args, users: int, slots: int) -> dict:
    rate = private_rate(args.user_q, slots)
    params = sampling.SamplingParams(slots=slots, real=rate.m, audit_rate=args.audit_rate)
    run = benchmark_run(
        params=args.params,
        users=users,
        silos=args.silos,
        key_bits=args.key_bits,
        rounds=args.rounds,
        test_keys=args.test_keys,
        workers=args.workers,
        sampling=params,
    )
    return {
        "users": users,
        "slots": slots,
        "real": rate.m,
        "params": args.params,
        "mode": "full",
        "seconds": dict(run.seconds),
        "ot_seconds": run.ot_seconds,
        "ot_ms_per_user": 1000 * run.ot_seconds_per_user,
        "sampled_users": run.sampled_users,
        "verified": run.verified,
    }


def phases_only_cell(args, users: int, slots: int) -> dict:
    """The five sampling phases of one round, as `private_weighting_round` times them, without
    the weighting: `oblivious_transfer`, then each silo's check of the openings
    (`Silo.audited_weights`, which `masked_sum` runs before the weighting)."""
    rate = private_rate(args.user_q, slots)
    silos = args.silos
    d = args.params
    n_max = default_n_max(args.key_bits, users, silos, 1e-10)
    params = ProtocolParams(
        silos=silos,
        users=users,
        dimension=d,
        key_bits=args.key_bits,
        encoding=Encoding(precision=1e-10, n_max=n_max, value_bound=DEFAULT_VALUE_BOUND),
        test_keys=args.test_keys,
        sampling=sampling.SamplingParams(slots=slots, real=rate.m, audit_rate=args.audit_rate),
    )
    counts, _deltas, _noise = synthetic_inputs(silos, users, d)
    federation = setup(counts, params)
    t = 0
    openings, seconds = oblivious_transfer(federation, t)
    spent = []
    audited = 0
    for silo, envelope in zip(federation.silos, openings):
        # The openings' check alone, on the message's contents (no weighting follows here).
        silo.audited_weights(t, federation.network(envelope).payload)
        spent.append(silo.audit_seconds)
        audited = len(silo.sampling_draws(t)[1])
    seconds["sampling_audit"] = float(np.mean(spent))
    total = sum(seconds[p] for p in OT_PHASE)
    return {
        "users": users,
        "slots": slots,
        "real": rate.m,
        "params": d,
        "mode": "phases only",
        "seconds": seconds,
        "ot_seconds": total,
        "ot_ms_per_user": 1000 * total / users,
        "audited_users": audited,
        "verified": None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=_ints, default=[100, 1000])
    parser.add_argument("--slots", type=_ints, default=[10, 100], help="P, the slots per user")
    parser.add_argument("--params", type=int, default=100, help="model parameters d")
    parser.add_argument("--silos", type=int, default=3)
    parser.add_argument("--key-bits", type=int, default=3072)
    parser.add_argument("--test-keys", action="store_true", help="allow keys below 2048 bits: INSECURE")
    parser.add_argument("--user-q", type=float, default=0.1, help="rounded to m/P")
    parser.add_argument("--audit-rate", type=float, default=sampling.DEFAULT_AUDIT_RATE)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workers", type=int, default=None, help="processes of the silo weighting")
    parser.add_argument("--phases-only", action="store_true", help="time the sampling phases alone")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    try:
        check_key_bits(args.key_bits, test_keys=args.test_keys)
    except ValueError as error:
        parser.error(f"argument --key-bits: {error}".replace("test_keys=True", "--test-keys"))
    cells = []
    for users in args.users:
        for slots in args.slots:
            start = time.perf_counter()
            cell = (phases_only_cell if args.phases_only else full_cell)(args, users, slots)
            cell["wall_seconds"] = time.perf_counter() - start
            cells.append(cell)
            print(f"done |U| = {users}, P = {slots} in {cell['wall_seconds']:.0f} s", file=sys.stderr)
    report = {
        "machine": describe_machine(),
        "silos": args.silos,
        "key_bits": args.key_bits,
        "user_q": args.user_q,
        "audit_rate": args.audit_rate,
        "rounds": args.rounds,
        "cells": cells,
    }
    goal = next((c for c in cells if (c["users"], c["slots"]) == GOAL_CELL and c["mode"] == "full"), None)
    if goal is not None:
        report["goal"] = {
            "ot_seconds": goal["ot_seconds"],
            "silo_weighting_seconds": goal["seconds"]["silo_weighting"],
            "met": goal["ot_seconds"] <= goal["seconds"]["silo_weighting"],
        }
    if args.format == "json":
        print(json.dumps(report, indent=2))
        return
    print(f"machine: {report['machine']}")
    print(
        f"|S| = {args.silos}, {args.key_bits}-bit Paillier"
        + (" (TEST KEY, INSECURE)" if args.test_keys else "")
        + f", user q {args.user_q:g} (m = round(q P)), audit rate {args.audit_rate:g}, "
        f"{args.rounds} round(s)" + (", sampling phases only" if args.phases_only else f", d = {args.params}")
    )
    head = "|U|    P   m  offer  choice  transfer  retrieve  audit   OT s  OT ms/user  silo s  OT/silo  ok"
    print(head)
    for c in cells:
        s = c["seconds"]
        silo = s.get("silo_weighting")
        print(
            f"{c['users']:<6} {c['slots']:>3} {c['real']:>3} {s['sampling_offer']:6.2f} "
            f"{s['sampling_choice']:7.2f} {s['sampling_transfer']:9.2f} {s['sampling_retrieve']:9.2f} "
            f"{s['sampling_audit']:6.2f} {c['ot_seconds']:6.2f} {c['ot_ms_per_user']:11.2f} "
            + (f"{silo:7.2f} {c['ot_seconds'] / silo:8.2f}" if silo else f"{'-':>7} {'-':>8}")
            + f"  {'-' if c['verified'] is None else ('yes' if c['verified'] else 'NO')}"
        )
    if goal is not None:
        g = report["goal"]
        print(
            f"goal (|U| = 1000, P = 100): OT phase {g['ot_seconds']:.2f} s against one silo's weighting "
            f"{g['silo_weighting_seconds']:.2f} s: {'met' if g['met'] else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
