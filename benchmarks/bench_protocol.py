"""Protocol 1's per-silo weighting phase: the fast path against the straightforward one.

    python benchmarks/bench_protocol.py [--silos 3] [--users 100] [--params 100]
        [--key-bits 3072 [--test-keys]] [--straightforward-users 10] [--workers N]
        [--format table|json]

Keys below 2048 bits are insecure and refused unless `--test-keys` is given (tests only).

Runs Protocol 1 (setup and one round, fast path, all silos) at the given size, checks the decoded
aggregate against the plaintext weighted sum, then times silo 0's round (b) on the same inputs
three ways, side by side in this one process:

- fast, with `--workers` processes (default: one per core), as the protocol runs it;
- fast, in one process;
- straightforward (|U| d full-size exponentiations), the reference. At full size it takes
  minutes, so it is timed on the first `--straightforward-users` users (all coordinates) and
  scaled linearly in |U| (each user costs the same d exponentiations); the re-randomisation of
  the d outputs, which does not depend on |U|, is timed once and added. Its plaintexts on that
  subset are checked equal to the fast path's.

It also reports the cost of authenticating the messages (issue 12): the seconds all parties
together spent keying their channels (one DH exponentiation per silo at each end of the
server-silo channels, HKDF), tagging and verifying, against the wall time of setup and the
round (every party runs in this process, one after the other), split into setup and round.

Figures go to docs/protocol.md (and docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uldp.cli.machine import describe_machine  # noqa: E402
from uldp.crypto.encoding import Encoding, largest_n_max  # noqa: E402
from uldp.crypto.paillier import check_key_bits, generate_keypair  # noqa: E402
from uldp.crypto.protocol import (  # noqa: E402
    ProtocolParams,
    largest_value,
    plaintext_weighted_sum,
    rounding_tolerance,
    setup,
    weighting_round,
)
from uldp.crypto.protocol.benchmark import synthetic_inputs  # noqa: E402
from uldp.crypto.weighting import (  # noqa: E402
    default_workers,
    encrypted_weighted_sum,
    fast_products,
    finish,
    straightforward_products,
)


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--silos", type=int, default=3)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--params", type=int, default=100, help="model parameters d")
    parser.add_argument(
        "--key-bits", type=int, default=3072, help="Paillier modulus size; >= 2048 unless --test-keys"
    )
    parser.add_argument(
        "--test-keys", action="store_true", help="allow keys below 2048 bits: INSECURE, for tests only"
    )
    parser.add_argument("--straightforward-users", type=int, default=10)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    try:
        check_key_bits(args.key_bits, test_keys=args.test_keys)
    except ValueError as error:
        parser.error(f"argument --key-bits: {error}".replace("test_keys=True", "--test-keys"))
    workers = args.workers or default_workers()
    silos, users, d = args.silos, args.users, args.params
    sub = min(args.straightforward_users, users)

    # Every user has records in every silo: each (u, j) then costs an exponentiation (worst case).
    counts, deltas, noise = synthetic_inputs(silos, users, d)
    sampled = np.ones(users, dtype=bool)
    test_keys = args.test_keys
    keypair, keygen_s = timed(generate_keypair, args.key_bits, test_keys=test_keys)
    # P = 1e-10, |values| <= 1e10, N_max = 2000 (or the most a smaller test key can hold).
    encoding = Encoding(n_max=largest_n_max(keypair[0].n, users, silos))
    params = ProtocolParams(
        silos=silos, users=users, dimension=d, key_bits=args.key_bits, encoding=encoding, test_keys=test_keys
    )
    start = time.perf_counter()
    federation = setup(counts, params, keypair=keypair)
    setup_authentication_s = federation.authentication_seconds
    setup_authentication_cpu_s = federation.authentication_cpu_seconds
    result = weighting_round(federation, 0, deltas, noise, sampled, workers=workers)
    protocol_s = time.perf_counter() - start
    # Every party runs in this process, one after the other: the sum of their authentication
    # work (keying the channels, tagging, verifying) against the wall time of setup and a round.
    authentication_s = federation.authentication_seconds
    plain = plaintext_weighted_sum(deltas, counts, sampled, noise)
    error = float(np.max(np.abs(result.aggregate - plain)))
    tolerance = rounding_tolerance(encoding, users, silos, largest_value(deltas, noise))
    verified = error <= tolerance

    public, private = keypair
    silo = federation.silos[0]
    message = federation.server.encrypted_weights(1, sampled)[0]  # silo 0's copy
    weights, factors, fixed, offsets = silo.weighting_inputs(message, deltas[0], noise[0])
    _, fast_s = timed(encrypted_weighted_sum, public, weights, factors, fixed, offsets, workers=workers)
    _, fast_one_s = timed(encrypted_weighted_sum, public, weights, factors, fixed, offsets, workers=1)
    products, sub_products_s = timed(
        straightforward_products, public, weights[:sub], factors[:sub], fixed[:sub]
    )
    _, finish_s = timed(finish, public, products, offsets)
    straightforward_s = sub_products_s * users / sub + finish_s
    fast_sub, _ = fast_products(public, weights[:sub], factors[:sub], fixed[:sub], workers=1)
    same = [private.decrypt(c) for c in products] == [private.decrypt(c) for c in fast_sub]

    report = {
        "machine": describe_machine(),
        "silos": silos,
        "users": users,
        "params": d,
        "key_bits": args.key_bits,
        "test_keys": test_keys,
        "workers": workers,
        "precision": encoding.precision,
        "n_max": encoding.n_max,
        "keygen_seconds": keygen_s,
        "protocol_seconds": {**federation.seconds, **result.seconds},
        "silo_seconds": list(result.silo_seconds),
        "authentication": {
            "seconds": authentication_s,
            "setup_seconds": setup_authentication_s,
            "round_seconds": authentication_s - setup_authentication_s,
            "cpu_seconds": federation.authentication_cpu_seconds,
            "setup_cpu_seconds": setup_authentication_cpu_s,
            "round_cpu_seconds": federation.authentication_cpu_seconds - setup_authentication_cpu_s,
            "protocol_seconds": protocol_s,
            "fraction": authentication_s / protocol_s,
            "messages": _message_count(silos),
        },
        "aggregate_max_error": error,
        "tolerance": tolerance,
        "verified": bool(verified and same),
        "silo_phase": {
            "fast_seconds": fast_s,
            "fast_one_process_seconds": fast_one_s,
            "straightforward_seconds": straightforward_s,
            "straightforward_measured_users": sub,
            "straightforward_measured_seconds": sub_products_s + finish_s,
            "speedup": straightforward_s / fast_s,
            "speedup_one_process": straightforward_s / fast_one_s,
        },
    }
    if args.format == "json":
        print(json.dumps(report, indent=2))
        return
    phase = report["silo_phase"]
    print(f"machine: {report['machine']}")
    key = f"{args.key_bits}-bit key" + (" (TEST KEY, INSECURE)" if test_keys else "")
    print(
        f"|S| = {silos}, |U| = {users}, d = {d}, {key}, P = "
        f"{encoding.precision:g}, N_max = {encoding.n_max}, workers = {workers}"
    )
    print(
        "protocol phases (s): "
        + ", ".join(f"{k} {v:.2f}" for k, v in report["protocol_seconds"].items())
        + f"  (key generation {keygen_s:.2f} s, not in key_exchange here)"
    )
    print(
        f"verified against plaintext: {report['verified']} (max error {error:.3g}, tolerance {tolerance:.3g})"
    )
    auth = report["authentication"]
    print(
        f"authentication (all parties: keying channels, tagging, verifying {auth['messages']} messages): "
        f"{auth['seconds']:.3f} s of {auth['protocol_seconds']:.2f} s for setup and one round "
        f"({100 * auth['fraction']:.2f}%; setup {auth['setup_seconds']:.3f} s, the round "
        f"{auth['round_seconds']:.4f} s; CPU time {auth['setup_cpu_seconds']:.3f} s and "
        f"{auth['round_cpu_seconds']:.4f} s)"
    )
    print(f"silo phase, fast ({workers} processes):  {phase['fast_seconds']:9.2f} s")
    print(f"silo phase, fast (1 process):    {phase['fast_one_process_seconds']:9.2f} s")
    print(
        f"silo phase, straightforward:     {phase['straightforward_seconds']:9.2f} s "
        f"(measured on {sub} of {users} users: {phase['straightforward_measured_seconds']:.2f} s, "
        f"scaled linearly)"
    )
    print(f"speedup: {phase['speedup']:.1f}x ({phase['speedup_one_process']:.1f}x in one process)")


def _message_count(silos: int) -> int:
    """Messages of setup and one round: per silo a DH key, the Paillier key, the DH keys, a
    histogram, the weights and a masked sum; and the sealed seed to each other silo, twice
    (silo 0 -> server -> silo)."""
    return 6 * silos + 2 * (silos - 1)


if __name__ == "__main__":
    main()
