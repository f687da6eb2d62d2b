"""Timing Protocol 1 phase by phase on synthetic data, as Fig. 11 of ULDP-FL does.

One `benchmark_run` is a fresh setup (Paillier and DH keys, blinded histograms) and `rounds`
weighting rounds at a given |S|, |U| and d; every round's decoded aggregate is checked against
the plaintext weighted sum. With `sampling` (private user-level sub-sampling, issue 36) each
round is `private_weighting_round`, its sampling phases timed too, and the aggregate is checked
against the plaintext sum over the sample the oblivious transfer realised (`realized_sample`).
Used by `uldp bench protocol` and benchmarks/bench_protocol.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from uldp.crypto.encoding import (
    DEFAULT_N_MAX,
    DEFAULT_PRECISION,
    DEFAULT_VALUE_BOUND,
    Encoding,
    largest_n_max,
)
from uldp.crypto.protocol.params import ProtocolParams
from uldp.crypto.protocol.run import (
    SAMPLING_PHASES,
    largest_value,
    plaintext_weighted_sum,
    private_weighting_round,
    realized_sample,
    rounding_tolerance,
    setup,
    weighting_round,
)
from uldp.crypto.protocol.sampling import SamplingParams
from uldp.crypto.weighting import encrypted_weighted_sum
from uldp.errors import InvalidParameter

PHASES = ("key_exchange", "blinded_histograms", "server_weights", "silo_weighting", "aggregation")
ROUND_PHASES = ("server_weights", "silo_weighting", "aggregation")
OT_PHASE = SAMPLING_PHASES
"""The oblivious transfer's share of a private-sampling round: the server's offer and transfer,
and the mean silo's choice, retrieval and audit (`BenchmarkRun.ot_seconds` adds them up)."""


@dataclass(frozen=True)
class BenchmarkRun:
    """Seconds per phase (rounds averaged; silo weighting is the mean over silos) and checks."""

    params: int
    users: int
    silos: int
    key_bits: int
    rounds: int
    n_max: int
    precision: float
    seconds: dict[str, float]
    max_error: float
    tolerance: float
    verified: bool
    straightforward_seconds: float | None = None
    straightforward_matches: bool | None = None
    authentication_seconds: float = 0.0
    """Seconds all parties together spent keying, tagging and verifying messages (`crypto.channel`)."""
    sampling: SamplingParams | None = None
    """Private sampling's P, m and audit rate, or None for Protocol 1 with the sample in the clear."""
    sampled_users: float | None = None
    """Under private sampling: the mean number of users the transfer put in a round's sample."""

    @property
    def ot_seconds(self) -> float | None:
        """The OT phase of a round (`OT_PHASE`: server plus mean silo), None without private sampling."""
        if self.sampling is None:
            return None
        return sum(self.seconds[phase] for phase in OT_PHASE)

    @property
    def ot_seconds_per_user(self) -> float | None:
        """`ot_seconds` / |U|: every user costs the same transfer, sampled or not."""
        total = self.ot_seconds
        return None if total is None else total / self.users


def synthetic_inputs(silos: int, users: int, d: int, seed: int = 0):
    """Counts n_{s,u} in [1, 20] (every user in every silo: the costliest case), clipped deltas
    in [-1, 1] and Gaussian noise shares."""
    rng = np.random.default_rng(seed)
    counts = _synthetic_counts(rng, silos, users)
    deltas = [np.clip(rng.normal(scale=0.1, size=(users, d)), -1.0, 1.0) for _ in range(silos)]
    noise = [rng.normal(scale=0.5, size=d) for _ in range(silos)]
    return counts, deltas, noise


def _synthetic_counts(rng: np.random.Generator, silos: int, users: int) -> np.ndarray:
    return rng.integers(1, 21, size=(silos, users))


def check_synthetic_counts(silos: int, users: int, encoding: Encoding, seed: int = 0) -> None:
    """`InvalidParameter` if `synthetic_inputs`' counts break `encoding`'s N_max, as Protocol 1's
    setup would find (each n_{s,u}, each user's N_u): said before any key is made or any progress
    is shown, so that a bad --n-max is one error line."""
    counts = _synthetic_counts(np.random.default_rng(seed), silos, users)
    for (silo, user), count in np.ndenumerate(counts):
        encoding.check_count(int(count), f"n_(s={silo},u={user})")
    for user, total in enumerate(counts.sum(axis=0)):
        encoding.check_count(int(total), f"N_u for user {user}")


def default_n_max(key_bits: int, users: int, silos: int, precision: float) -> int:
    """The largest N_max <= 2000 that any `key_bits`-bit modulus (>= 2^(bits-1)) can hold."""
    n_max = largest_n_max(
        2 ** (key_bits - 1),
        users,
        silos,
        precision=precision,
        value_bound=DEFAULT_VALUE_BOUND,
        ceiling=DEFAULT_N_MAX,
    )
    if n_max < 1:
        raise InvalidParameter(
            f"a {key_bits}-bit key cannot hold values of {DEFAULT_VALUE_BOUND:g} at "
            f"precision {precision:g}; use a larger key or a coarser precision"
        )
    return n_max


def run_steps(silos: int, rounds: int, compare_straightforward: bool) -> int:
    """How many times `benchmark_run` calls `progress`."""
    return 2 + rounds * (silos + 2) + (1 if compare_straightforward else 0)


def benchmark_run(
    *,
    params: int,
    users: int,
    silos: int,
    key_bits: int,
    rounds: int = 1,
    test_keys: bool = False,
    precision: float = DEFAULT_PRECISION,
    n_max: int | None = None,
    compare_straightforward: bool = False,
    workers: int | None = None,
    seed: int = 0,
    sampling: SamplingParams | None = None,
    progress: Callable[[str], None] = lambda step: None,
) -> BenchmarkRun:
    """Setup and `rounds` rounds of Protocol 1 on synthetic data, timed per phase and verified.

    The key exchange phase includes generating the Paillier key (setup (a)). With
    `compare_straightforward`, silo 0's last round is also computed by the straightforward
    path at full size, timed, and its plaintexts compared with the fast path's.

    With `sampling`, every round draws its sample by oblivious transfer (`private_weighting_round`;
    `compare_straightforward` is then refused: round (a)'s weights come from the transfer).
    """
    if sampling is not None and compare_straightforward:
        raise InvalidParameter(
            "compare_straightforward times plain round (a) weights: not with private sampling"
        )
    n_max = default_n_max(key_bits, users, silos, precision) if n_max is None else n_max
    encoding = Encoding(precision=precision, n_max=n_max, value_bound=DEFAULT_VALUE_BOUND)
    protocol = ProtocolParams(
        silos=silos,
        users=users,
        dimension=params,
        key_bits=key_bits,
        encoding=encoding,
        test_keys=test_keys,
        sampling=sampling,
    )
    counts, deltas, noise = synthetic_inputs(silos, users, params, seed)
    sampled = np.ones(users, dtype=bool)
    federation = setup(counts, protocol)
    progress("setup (a)-(c): keys")
    progress("setup (d)-(f): blinded histograms")
    seconds = dict(federation.seconds)
    plain = plaintext_weighted_sum(deltas, counts, sampled, noise)
    tolerance = rounding_tolerance(encoding, users, silos, largest_value(deltas, noise))
    round_seconds: list[dict[str, float]] = []
    sample_sizes: list[int] = []
    max_error = 0.0
    for t in range(rounds):
        if sampling is None:
            result = weighting_round(federation, t, deltas, noise, sampled, workers=workers)
            expected = plain
        else:
            result = private_weighting_round(federation, t, deltas, noise, workers=workers)
            sample = realized_sample(federation, t)
            sample_sizes.append(int(sample.sum()))
            expected = plaintext_weighted_sum(deltas, counts, sample, noise)
        round_seconds.append(result.seconds)
        max_error = max(max_error, float(np.max(np.abs(result.aggregate - expected))))
        for _ in range(silos + 2):
            progress(f"round {t + 1}/{rounds}")
    for phase in ROUND_PHASES + (SAMPLING_PHASES if sampling is not None else ()):
        seconds[phase] = float(np.mean([r[phase] for r in round_seconds]))
    verified = max_error <= tolerance
    authentication_seconds = federation.authentication_seconds
    straightforward_seconds = matches = None
    if compare_straightforward:
        server, silo = federation.server, federation.silos[0]
        public, private = server.public_key, server.private_key
        message = server.encrypted_weights(rounds, sampled)[0]  # silo 0's copy
        inputs = silo.weighting_inputs(message, deltas[0], noise[0])
        start = time.perf_counter()
        slow = encrypted_weighted_sum(public, *inputs, method="straightforward")
        straightforward_seconds = time.perf_counter() - start
        fast = encrypted_weighted_sum(public, *inputs, method="fast", workers=workers)
        matches = [private.decrypt(c) for c in slow] == [private.decrypt(c) for c in fast]
        verified = verified and matches
        progress("straightforward silo phase")
    return BenchmarkRun(
        params=params,
        users=users,
        silos=silos,
        key_bits=key_bits,
        rounds=rounds,
        n_max=n_max,
        precision=precision,
        seconds=seconds,
        max_error=max_error,
        tolerance=tolerance,
        verified=bool(verified),
        straightforward_seconds=straightforward_seconds,
        straightforward_matches=matches,
        authentication_seconds=authentication_seconds,
        sampling=sampling,
        sampled_users=float(np.mean(sample_sizes)) if sample_sizes else None,
    )
