"""Secure aggregation with dropouts: uldp.crypto.secagg against Flower's SecAgg+, per round and party.

    python benchmarks/bench_secagg.py [--n 10 50 100] [--d 10000 100000] [--dropout 0 0.1]
        [--repeat 3] [--no-flower] [--no-sparse] [--quick] [--format table|json]

For each number of participants n, vector length d and dropout rate (participants that share their
keys, then drop before uploading their masked input: the case that makes the server rebuild their
s^SK and strip their pairwise masks), one round of each implementation, every party in this
process, one after the other, with the same inputs, the same threshold k = n // 2 + 1 and the same
dropped participants (every 1/rate-th id, so that no two are neighbours on Flower's sparse ring):

- ours: `SecAggServer` and `SecAggParticipant` (docs/secagg.md). The server's time is its four
  steps; a participant's is its four steps; the figure is the median over the participants that
  run all four. "wire" is the time to put every message of the round through `to_bytes` and
  `from_bytes` (not in the step times: Flower's figures below leave out its record encoding too).
- Flower 1.41's SecAgg+, full (num_shares = n: every participant shares with every other, the
  same graph as ours) and, unless --no-sparse, sparse with the setting of Flower's secure
  aggregation example (num_shares = 3, reconstruction_threshold = 2: each participant shares with
  its two ring neighbours only, a weaker protocol with another dropout tolerance). Flower's
  workflow needs a running federation, so the client side calls `secaggplus_mod`'s own stage
  functions (`_setup`, `_share_keys`, `_collect_masked_vectors`, `_unmask`) and the server side
  reproduces `SecAggPlusWorkflow`'s computation per stage with Flower's primitives (neighbour
  graph, routing, summing the masked vectors, `combine_shares`, `pseudo_rand_gen`,
  `generate_shared_key`, dequantisation), leaving out message passing.

Flower's key and share steps do not depend on d or the dropouts, and its share reconstruction
(`combine_shares`, minutes at n = 100) not on d: they run once per n (per n and dropout rate for
the reconstruction) and their time is added to every point that shares them; everything else
runs per point, once. Ours runs every step at every point, `--repeat` times (default 3), and
reports the median of each figure.

Both results are checked: ours against the float64 sum (within the fixed-point bound), Flower's
mean times the number of survivors against the same sum (within its quantisation step).
Figures go to docs/performance.md and docs/secagg.md.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uldp.cli.machine import describe_machine  # noqa: E402
from uldp.crypto.secagg import SecAggParams, SecAggParticipant, SecAggServer  # noqa: E402

CLIPPING_RANGE = 8.0
"""Flower's default clipping range; ours uses the same bound |x| <= 8."""

QUICK: dict[str, list[Any]] = {"n": [5, 8], "d": [1000], "dropout": [0.0, 0.2]}


def threshold_for(n: int) -> int:
    return n // 2 + 1


def dropped_ids(n: int, rate: float) -> list[int]:
    count = round(n * rate)
    return [i * n // count for i in range(count)] if count else []


class Clock:
    """Adds up the seconds spent in `timed` calls, per (party, step)."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[Any, str], float] = {}

    def timed(self, key: tuple[Any, str], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        value = fn(*args, **kwargs)
        self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - start
        return value

    def total(self, party: Any) -> float:
        return sum(seconds for (who, _), seconds in self.seconds.items() if who == party)


# -- ours -----------------------------------------------------------------------------------------------


def run_ours(vectors: dict[int, np.ndarray], d: int, dropped: list[int]) -> dict[str, Any]:
    n = len(vectors)
    params = SecAggParams(threshold=threshold_for(n), dimension=d, bound=CLIPPING_RANGE)
    clock = Clock()
    server = clock.timed(("server", "init"), SecAggServer, params, round=0, participants=list(vectors))
    parties = {i: clock.timed((i, "init"), SecAggParticipant, i, params, round=0) for i in vectors}
    adverts = [clock.timed((i, "advertise"), p.advertise) for i, p in parties.items()]
    broadcast = clock.timed(("server", "collect_keys"), server.collect_keys, adverts)
    outs = [clock.timed((i, "share_keys"), p.share_keys, broadcast) for i, p in parties.items()]
    inboxes = clock.timed(("server", "route_shares"), server.route_shares, outs)
    survivors = [i for i in vectors if i not in dropped]
    masked = [
        clock.timed((i, "masked_input"), parties[i].masked_input, vectors[i], inboxes[i]) for i in survivors
    ]
    request = clock.timed(("server", "unmask_request"), server.unmask_request, masked)
    responses = [clock.timed((i, "unmask"), parties[i].unmask, request) for i in survivors]
    total = clock.timed(("server", "aggregate"), server.aggregate, responses)
    expected = np.sum([vectors[i] for i in survivors], axis=0)
    error = float(np.abs(total - expected).max())
    return {
        "server_s": clock.total("server"),
        "participant_s": statistics.median(clock.total(i) for i in survivors),
        "participant_mask_s": statistics.median(clock.seconds[(i, "masked_input")] for i in survivors),
        "wire_server_s": wire_seconds([broadcast, *inboxes.values(), request]),
        "wire_participant_s": wire_seconds([*adverts, *outs, *masked, *responses]) / n,
        "max_error": error,
        "verified": error <= params.fixed_point.rounding_error_bound(len(survivors)),
    }


def wire_seconds(messages: list[Any]) -> float:
    """Seconds to write every message as bytes and read it back (once each, as sent and received)."""
    start = time.perf_counter()
    for message in messages:
        type(message).from_bytes(message.to_bytes())
    return time.perf_counter() - start


# -- Flower's SecAgg+ -----------------------------------------------------------------------------------


def flower_share_phase(n: int, num_shares: int, threshold: int) -> dict[str, Any]:
    """Flower's setup and share-keys stages, client functions and the server's work between them."""
    from flwr.client.mod.secure_aggregation.secaggplus_mod import SecAggPlusState, _setup, _share_keys
    from flwr.common.secure_aggregation.secaggplus_constants import Key

    clock = Clock()
    nids = list(range(1, n + 1))

    def neighbour_graph() -> dict[int, set[int]]:
        # SecAggPlusWorkflow.setup_stage, with the ring in id order (Flower shuffles it) so that
        # the dropped ids, spread out, are never neighbours.
        shares = num_shares + (num_shares < n and num_shares % 2 == 0)
        half = shares >> 1
        if shares >= n:
            return {nid: set(nids) for nid in nids}
        return {
            nid: {nids[(idx + off) % n] for off in range(-half, half + 1)} for idx, nid in enumerate(nids)
        }

    neighbours = clock.timed(("server", "setup"), neighbour_graph)
    setup = {
        Key.SAMPLE_NUMBER: n,
        Key.SHARE_NUMBER: min(num_shares, n),
        Key.THRESHOLD: threshold,
        Key.CLIPPING_RANGE: CLIPPING_RANGE,
        Key.TARGET_RANGE: 2**22,
        Key.MOD_RANGE: 2**32,
        Key.MAX_WEIGHT: 1.0,
    }
    states, publics = {}, {}
    for nid in nids:
        state = SecAggPlusState()
        state.nid = nid
        keys = clock.timed((nid, "setup"), _setup, state, dict(setup))
        states[nid], publics[nid] = state, [keys[Key.PUBLIC_KEY_1], keys[Key.PUBLIC_KEY_2]]
    outs = {}
    for nid in nids:
        configs = clock.timed(
            ("server", "share_keys"), lambda nid=nid: {str(m): publics[m] for m in neighbours[nid]}
        )
        outs[nid] = clock.timed((nid, "share_keys"), _share_keys, states[nid], configs)

    def route() -> tuple[dict[int, list[bytes]], dict[int, list[int]]]:
        ciphertexts: dict[int, list[bytes]] = {nid: [] for nid in nids}
        sources: dict[int, list[int]] = {nid: [] for nid in nids}
        for src, out in outs.items():
            for dst, ciphertext in zip(out[Key.DESTINATION_LIST], out[Key.CIPHERTEXT_LIST], strict=True):
                ciphertexts[dst].append(ciphertext)
                sources[dst].append(src)
        return ciphertexts, sources

    ciphertexts, sources = clock.timed(("server", "share_keys"), route)
    return {
        "states": states,
        "publics": publics,
        "neighbours": neighbours,
        "ciphertexts": ciphertexts,
        "sources": sources,
        "threshold": threshold,
        "seconds": clock.seconds,
        "combined": {},
    }


def run_flower(phase: dict[str, Any], vectors: dict[int, np.ndarray], dropped: list[int]) -> dict[str, Any]:
    """Flower's collect-masked-vectors and unmask stages on the states `flower_share_phase` left."""
    from flwr.client.mod.secure_aggregation.secaggplus_mod import _collect_masked_vectors, _unmask
    from flwr.common import bytes_to_ndarray, ndarrays_to_parameters
    from flwr.common.secure_aggregation.crypto.shamir import combine_shares
    from flwr.common.secure_aggregation.ndarrays_arithmetic import parameters_addition, parameters_mod
    from flwr.common.secure_aggregation.secaggplus_constants import Key

    clock = Clock()
    clock.seconds.update(phase["seconds"])
    nids = sorted(phase["states"])
    dead = {nid for nid in nids if nid - 1 in dropped}
    active = [nid for nid in nids if nid not in dead]
    states = {nid: copy.deepcopy(phase["states"][nid]) for nid in active}
    masked = {}
    for nid in active:
        configs = {Key.CIPHERTEXT_LIST: phase["ciphertexts"][nid], Key.SOURCE_LIST: phase["sources"][nid]}
        parameters = ndarrays_to_parameters([vectors[nid - 1]])
        masked[nid] = clock.timed(
            (nid, "collect_masked_vectors"), _collect_masked_vectors, states[nid], configs, 1, parameters
        )

    def sum_masked() -> list[np.ndarray]:  # SecAggPlusWorkflow.collect_masked_vectors_stage
        total = None
        for out in masked.values():
            vector = [bytes_to_ndarray(b) for b in out[Key.MASKED_PARAMETERS]]
            total = vector if total is None else parameters_addition(total, vector)
        assert total is not None
        return parameters_mod(total, 2**32)

    masked_sum = clock.timed(("server", "collect_masked_vectors"), sum_masked)
    active_set, neighbours = set(active), phase["neighbours"]
    responses = {}
    for nid in active:
        request = {
            Key.ACTIVE_NODE_ID_LIST: list(neighbours[nid] & active_set),
            Key.DEAD_NODE_ID_LIST: list(neighbours[nid] & dead),
        }
        responses[nid] = clock.timed((nid, "unmask"), _unmask, states[nid], request)

    def combine() -> dict[int, bytes]:  # SecAggPlusWorkflow.unmask_stage, the reconstruction
        collected: dict[int, list[bytes]] = {nid: [] for nid in nids}
        for out in responses.values():
            for owner, share in zip(out[Key.NODE_ID_LIST], out[Key.SHARE_LIST], strict=True):
                collected[owner].append(share)
        secrets = {}
        for nid, shares in collected.items():
            if len(shares) < phase["threshold"]:
                raise RuntimeError(f"Flower: not enough shares to rebuild the secret of node {nid}")
            secrets[nid] = combine_shares(shares)
        return secrets

    # The reconstruction does not depend on d: once per dropout set, its time added to each point.
    key = tuple(sorted(dead))
    if key not in phase["combined"]:
        inner = Clock()
        phase["combined"][key] = (inner.timed(("server", "combine"), combine), inner.total("server"))
    secrets, combine_seconds = phase["combined"][key]
    clock.seconds[("server", "unmask: combine_shares")] = combine_seconds
    result = clock.timed(
        ("server", "unmask"), flower_strip, masked_sum, secrets, active_set, neighbours, phase["publics"]
    )
    survivors = [nid - 1 for nid in active]
    expected = np.sum([vectors[i] for i in survivors], axis=0)
    error = float(np.abs(result[0] * len(active) - expected).max())
    step = 2 * CLIPPING_RANGE / 2**22
    return {
        "server_s": clock.total("server"),
        "server_combine_s": combine_seconds,
        "participant_s": statistics.median(clock.total(nid) for nid in active),
        "participant_mask_s": statistics.median(
            clock.seconds[(nid, "collect_masked_vectors")] for nid in active
        ),
        "max_error": error,
        "verified": error <= len(active) * step,
    }


def flower_strip(
    masked_vector: list[np.ndarray],
    secrets: dict[int, bytes],
    active: set[int],
    neighbours: dict[int, set[int]],
    publics: dict[int, list[bytes]],
) -> list[np.ndarray]:
    """SecAggPlusWorkflow.unmask_stage after the reconstruction: strip the masks, dequantise."""
    from flwr.common.secure_aggregation.crypto.symmetric_encryption import generate_shared_key
    from flwr.common.secure_aggregation.ndarrays_arithmetic import (
        factor_extract,
        get_parameters_shape,
        parameters_addition,
        parameters_mod,
        parameters_subtraction,
    )
    from flwr.common.secure_aggregation.quantization import dequantize
    from flwr.common.secure_aggregation.secaggplus_utils import pseudo_rand_gen
    from flwr.supercore.primitives.asymmetric import bytes_to_private_key, bytes_to_public_key

    mod_range, target_range = 2**32, 2**22
    for nid, secret in secrets.items():
        if nid in active:
            private_mask = pseudo_rand_gen(secret, mod_range, get_parameters_shape(masked_vector))
            masked_vector = parameters_subtraction(masked_vector, private_mask)
        else:
            for neighbor_nid in neighbours[nid] - {nid}:
                shared_key = generate_shared_key(
                    bytes_to_private_key(secret), bytes_to_public_key(publics[neighbor_nid][0])
                )
                pairwise_mask = pseudo_rand_gen(shared_key, mod_range, get_parameters_shape(masked_vector))
                if nid > neighbor_nid:
                    masked_vector = parameters_addition(masked_vector, pairwise_mask)
                else:
                    masked_vector = parameters_subtraction(masked_vector, pairwise_mask)
    recon_parameters = parameters_mod(masked_vector, mod_range)
    q_total_ratio, recon_parameters = factor_extract(recon_parameters)
    inv_dq_total_ratio = target_range / q_total_ratio
    aggregated = dequantize(recon_parameters, CLIPPING_RANGE, target_range)
    offset = -(len(active) - 1) * CLIPPING_RANGE
    for vec in aggregated:
        vec += offset
        vec *= inv_dq_total_ratio
    return aggregated


# -- the report -----------------------------------------------------------------------------------------


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each timing's median over the runs; `verified` only if every run was."""
    merged: dict[str, Any] = {}
    for key in runs[0]:
        if key == "verified":
            merged[key] = all(run[key] for run in runs)
        elif key == "max_error":
            merged[key] = max(run[key] for run in runs)
        else:
            merged[key] = statistics.median(run[key] for run in runs)
    return merged


def measure(
    ns: list[int], ds: list[int], rates: list[float], flower: bool, sparse: bool, repeat: int
) -> list[dict[str, Any]]:
    warm_up = np.random.default_rng(0).uniform(-1.0, 1.0, (3, 8))
    run_ours(dict(enumerate(warm_up)), 8, [])  # first calls load code and fill caches: not timed
    points = []
    for n in ns:
        k = threshold_for(n)
        phases = {}
        if flower:
            phases["flower"] = flower_share_phase(n, n, k)
            if sparse and n >= 4:
                phases["flower_sparse"] = flower_share_phase(n, 3, 2)
        for d in ds:
            rng = np.random.default_rng(n * 1_000_003 + d)
            vectors = {i: rng.uniform(-1.0, 1.0, d) for i in range(n)}
            for rate in rates:
                dropped = dropped_ids(n, rate)
                point: dict[str, Any] = {
                    "n": n,
                    "d": d,
                    "dropout": rate,
                    "dropped": len(dropped),
                    "threshold": k,
                }
                point["ours"] = median_of([run_ours(vectors, d, dropped) for _ in range(repeat)])
                for name, phase in phases.items():
                    point[name] = run_flower(phase, vectors, dropped)
                points.append(point)
                print(f"  n={n} d={d} dropout={rate}: done", file=sys.stderr, flush=True)
    return points


def goal(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Ours no slower than Flower's full SecAgg+ anywhere; the participant's masking linear in d."""
    compared = [p for p in points if "flower" in p]
    slower = [
        f"n={p['n']} d={p['d']} dropout={p['dropout']} {side}"
        for p in compared
        for side in ("server", "participant")
        if p["ours"][f"{side}_s"] > p["flower"][f"{side}_s"]
    ]
    return {
        "no_slower_than_flower": not slower if compared else None,
        "slower_points": slower,
        "participant_mask_fit": mask_fit(points),
    }


def mask_fit(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """masked_input's seconds per stream (H(b_i) and n - 1 pairwise) = a + b d, per n and dropout.

    Least squares over the d measured; b is the cost of one word of one stream (AES-CTR and an
    add), a that of one stream whatever d (X25519, HKDF, opening one share).
    """
    fits = []
    for n, rate in sorted({(p["n"], p["dropout"]) for p in points}):
        same = [p for p in points if (p["n"], p["dropout"]) == (n, rate)]
        if len({p["d"] for p in same}) < 2:
            continue
        d = np.array([p["d"] for p in same], dtype=float)
        per_stream = np.array([p["ours"]["participant_mask_s"] / n for p in same])
        slope, intercept = np.polyfit(d, per_stream, 1)
        fits.append(
            {
                "n": n,
                "dropout": rate,
                "ns_per_word_and_stream": round(slope * 1e9, 3),
                "us_per_stream": round(intercept * 1e6, 1),
            }
        )
    return fits


def table(report: dict[str, Any]) -> str:
    has = {name: any(name in p for p in report["points"]) for name in ("flower", "flower_sparse")}
    head = ["n", "d", "drop", "k", "ours server s", "ours participant s", "ours masking s"]
    if has["flower"]:
        head += ["Flower full server s", "Flower full participant s", "server x", "participant x"]
    if has["flower_sparse"]:
        head += ["Flower sparse server s", "Flower sparse participant s"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in report["points"]:
        ours = p["ours"]
        cells = [
            str(p["n"]),
            f"{p['d']:,}",
            f"{p['dropped']} ({p['dropout']:.0%})",
            str(p["threshold"]),
            f"{ours['server_s']:.4f}",
            f"{ours['participant_s']:.4f}",
            f"{ours['participant_mask_s']:.4f}",
        ]
        if has["flower"]:
            fl = p["flower"]
            cells += [
                f"{fl['server_s']:.4f}",
                f"{fl['participant_s']:.4f}",
                f"{fl['server_s'] / ours['server_s']:.0f}",
                f"{fl['participant_s'] / ours['participant_s']:.0f}",
            ]
        if has["flower_sparse"]:
            sp = p.get("flower_sparse")
            cells += [f"{sp['server_s']:.4f}", f"{sp['participant_s']:.4f}"] if sp else ["-", "-"]
        rows.append("| " + " | ".join(cells) + " |")
    lines = [
        f"Secure aggregation, one round, every party in one process ({report['machine']}, {report['date']})",
        f"ours: uldp.crypto.secagg; Flower: flwr {report['flwr']} SecAgg+ (full: num_shares = n; "
        f"sparse: num_shares = 3, threshold 2); k = n // 2 + 1; participant: median over those that finish",
        *rows,
        f"all sums verified: {report['verified']}; ours no slower than Flower's full SecAgg+ at every point: "
        f"{report['goal']['no_slower_than_flower']}",
        *(
            f"ours, masked_input per stream (H(b_i) and n - 1 pairwise), n = {fit['n']}, dropout "
            f"{fit['dropout']:.0%}: {fit['us_per_stream']} us + {fit['ns_per_word_and_stream']} ns x d"
            for fit in report["goal"]["participant_mask_fit"]
        ),
        f"wire (to_bytes + from_bytes of every message), ours, largest point: server "
        f"{report['points'][-1]['ours']['wire_server_s']:.4f} s, participant "
        f"{report['points'][-1]['ours']['wire_participant_s']:.4f} s (not in the step times)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10, 50, 100], help="numbers of participants")
    parser.add_argument("--d", type=int, nargs="+", default=[10_000, 100_000], help="vector lengths")
    parser.add_argument(
        "--dropout", type=float, nargs="+", default=[0.0, 0.1], help="rates of dropout before upload"
    )
    parser.add_argument("--no-flower", action="store_true", help="time ours only")
    parser.add_argument("--no-sparse", action="store_true", help="leave out Flower's sparse setting")
    parser.add_argument("--repeat", type=int, default=3, help="runs of ours per point (medians)")
    parser.add_argument("--quick", action="store_true", help="a small smoke run (n = 5, 8; d = 1000)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    ns, ds, rates = (
        (QUICK["n"], QUICK["d"], QUICK["dropout"]) if args.quick else (args.n, args.d, args.dropout)
    )
    if any(n < 2 for n in ns) or any(d < 1 for d in ds) or any(not 0 <= r < 0.5 for r in rates):
        parser.error("--n must be >= 2, --d >= 1, --dropout in [0, 0.5)")
    too_many = [(n, r) for n in ns for r in rates if len(dropped_ids(n, r)) > n - threshold_for(n)]
    if too_many:
        n, r = too_many[0]
        parser.error(f"--dropout {r} drops more than n - k = {n - threshold_for(n)} participants at n = {n}")
    flower = not args.no_flower
    if flower:
        import flwr

        flwr_version = flwr.__version__ if hasattr(flwr, "__version__") else "?"
    started = datetime.datetime.now(datetime.timezone.utc)
    points = measure(ns, ds, rates, flower, not args.no_sparse, max(1, args.repeat))
    report = {
        "machine": describe_machine(),
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "flwr": flwr_version if flower else None,
        "threshold_rule": "n // 2 + 1",
        "repeat": max(1, args.repeat),
        "points": points,
        "verified": all(
            p[name]["verified"] for p in points for name in ("ours", "flower", "flower_sparse") if name in p
        ),
        "seconds": (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds(),
    }
    report["goal"] = goal(points)
    print(json.dumps(report, indent=2) if args.format == "json" else table(report))


if __name__ == "__main__":
    main()
