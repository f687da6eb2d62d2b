"""Protocol 1 end to end in one process: the parties, the message flow, and the phase times.

`setup` runs setup (a)-(f) and `weighting_round` runs round (a)-(c) by passing each message to
its recipient, exactly as a networked deployment would, and times every phase (as in Fig. 11
of ULDP-FL). `secure_weighted_sum` is the one-call entry point for training code.

Every message passes through `Federation.network`, a function from envelope to envelope that
stands for the wire: the identity by default; tests put an attacker there (a man in the middle
who alters, replays or re-addresses messages) and check that the recipient names it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from uldp.crypto.channel import Envelope
from uldp.crypto.encoding import (
    DEFAULT_N_MAX,
    DEFAULT_PRECISION,
    DEFAULT_VALUE_BOUND,
    Encoding,
    largest_n_max,
)
from uldp.crypto.paillier import PrivateKey, PublicKey, generate_keypair
from uldp.crypto.protocol.params import ProtocolParams
from uldp.crypto.protocol.sampling import SamplingParams
from uldp.crypto.protocol.server import AggregationServer
from uldp.crypto.protocol.silo import SEED_OWNER, Silo
from uldp.errors import InvalidParameter, ProtocolError

Network = Callable[[Envelope], Envelope]
"""What happens to a message between two parties: the identity on an honest wire."""


def honest_network(envelope: Envelope) -> Envelope:
    return envelope


@dataclass
class Federation:
    """The server and the silos after setup, the seconds each setup phase took, and the wire."""

    server: AggregationServer
    silos: list[Silo]
    seconds: dict[str, float] = field(default_factory=dict)
    network: Network = honest_network

    @property
    def authentication_seconds(self) -> float:
        """Seconds all parties spent so far keying, tagging and verifying messages (`crypto.channel`)."""
        return self.server.channels.seconds + sum(silo.channels.seconds for silo in self.silos)

    @property
    def authentication_cpu_seconds(self) -> float:
        """The same in CPU time (which other jobs on a loaded machine do not inflate)."""
        return self.server.channels.cpu_seconds + sum(silo.channels.cpu_seconds for silo in self.silos)


@dataclass(frozen=True)
class RoundResult:
    """The decoded aggregate of one round and the seconds of its phases.

    `silo_seconds` lists each silo's round (b)-(c) time; `seconds["silo_weighting"]` is their
    mean, the per-silo cost Fig. 11 reports.
    """

    aggregate: np.ndarray
    seconds: dict[str, float]
    silo_seconds: tuple[float, ...]


def setup(
    counts: np.ndarray,
    params: ProtocolParams,
    keypair: tuple[PublicKey, PrivateKey] | None = None,
    *,
    network: Network = honest_network,
) -> Federation:
    """Setup (a)-(f) of Protocol 1 for `counts` (|S|, |U|) = n_{s,u}; each silo sees only its row.

    Every message crosses `network`. The server's DH public key reaches the silos directly, not
    through `network`: it stands for the key distributed out of band before the protocol.
    """
    counts = np.asarray(counts)
    if counts.shape != (params.silos, params.users):
        raise InvalidParameter(f"counts must have shape ({params.silos}, {params.users}), got {counts.shape}")
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    server = AggregationServer(params, keypair)
    anchor = server.dh_public  # out of band: configured at every silo before the protocol starts
    silos = [Silo(s, counts[s], params, server_key=anchor) for s in range(params.silos)]
    # (a) DH keys to the server (each keys its channel with the server), the Paillier key to the silos.
    for silo in silos:
        server.receive_dh_key(network(silo.dh_key()))
    for silo, envelope in zip(silos, server.paillier_key()):
        silo.receive_paillier_key(network(envelope))
    # (b) the server broadcasts the DH keys; each pair derives sk_{s,s'}.
    for silo, envelope in zip(silos, server.broadcast_dh_keys()):
        silo.receive_dh_keys(network(envelope))
    # (c) silo 0 sends R sealed to each silo, through the server.
    if params.silos > 1:
        for envelope in silos[SEED_OWNER].sealed_seeds():
            relayed = network(server.relay(network(envelope)))
            silos[_silo_index(relayed.receiver, params.silos)].receive_sealed_seed(relayed)
    seconds["key_exchange"] = time.perf_counter() - start
    start = time.perf_counter()
    # (d)-(e) blinded, then doubly blinded histograms; (f) inverses at the server.
    for silo in silos:
        server.receive_histogram(network(silo.blinded_histogram()))
    server.compute_inverses()
    seconds["blinded_histograms"] = time.perf_counter() - start
    return Federation(server, silos, seconds, network)


def _silo_index(name: str, silos: int) -> int:
    """The silo a relayed envelope is delivered to: the one its header names (the server routes by it)."""
    prefix = "silo "
    if name.startswith(prefix) and name[len(prefix) :].isdigit() and int(name[len(prefix) :]) < silos:
        return int(name[len(prefix) :])
    raise ProtocolError(f"the server cannot route a message addressed to {name!r}")


def weighting_round(
    federation: Federation,
    round_index: int,
    silo_deltas: Sequence[np.ndarray],
    silo_noise: Sequence[np.ndarray],
    sampled: np.ndarray,
    *,
    method: str = "fast",
    workers: int | None = None,
) -> RoundResult:
    """Round (a)-(c): encrypted weights, each silo's masked encrypted sum, decryption."""
    server, silos = federation.server, federation.silos
    if len(silo_deltas) != len(silos) or len(silo_noise) != len(silos):
        raise InvalidParameter(f"need one delta array and one noise share per silo ({len(silos)})")
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    weights = server.encrypted_weights(round_index, sampled)
    seconds["server_weights"] = time.perf_counter() - start
    return _weighted_sums(federation, round_index, weights, silo_deltas, silo_noise, seconds, method, workers)


def _weighted_sums(
    federation: Federation,
    round_index: int,
    weights: Sequence[Envelope],
    silo_deltas: Sequence[np.ndarray],
    silo_noise: Sequence[np.ndarray],
    seconds: dict[str, float],
    method: str,
    workers: int | None,
) -> RoundResult:
    """Round (b)-(c) once each silo has its round (a) message `weights`: the masked sums, then
    the server's decryption. Under private sampling a silo's `masked_sum` first checks the
    openings; that check is timed apart (`sampling_audit`), not as weighting."""
    server, network = federation.server, federation.network
    private = federation.server.params.sampling is not None
    spent, audits = [], []
    for silo, envelope, deltas, noise in zip(federation.silos, weights, silo_deltas, silo_noise):
        delivered = network(envelope)
        start = time.perf_counter()
        message = silo.masked_sum(delivered, deltas, noise, method=method, workers=workers)
        audit = silo.audit_seconds if private else 0.0
        spent.append(time.perf_counter() - start - audit)
        audits.append(audit)
        server.receive_masked_sum(network(message))
    seconds["silo_weighting"] = float(np.mean(spent))
    if private:
        seconds["sampling_audit"] = float(np.mean(audits))
    start = time.perf_counter()
    aggregate = server.aggregate(round_index)
    seconds["aggregation"] = time.perf_counter() - start
    return RoundResult(aggregate, seconds, tuple(spent))


SAMPLING_PHASES = (
    "sampling_offer",
    "sampling_choice",
    "sampling_transfer",
    "sampling_retrieve",
    "sampling_audit",
)
"""The phases private sampling adds to a round (server: offer, transfer; silos: the rest)."""


def oblivious_transfer(federation: Federation, round_index: int) -> tuple[list[Envelope], dict[str, float]]:
    """Sampling steps (1)-(4) of `crypto.protocol.sampling`, and the server's openings (5), one
    envelope per silo, not yet delivered; the seconds of the phases so far (the silos' means)."""
    server, silos, network = federation.server, federation.silos, federation.network
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    offers = server.sampling_offer(round_index)
    seconds["sampling_offer"] = time.perf_counter() - start
    spent = []
    for silo, envelope in zip(silos, offers):
        start = time.perf_counter()
        reply = silo.sampling_choice(network(envelope))
        spent.append(time.perf_counter() - start)
        server.receive_sampling_choice(network(reply))
    seconds["sampling_choice"] = float(np.mean(spent))
    start = time.perf_counter()
    transfers = server.sampling_transfer(round_index)
    seconds["sampling_transfer"] = time.perf_counter() - start
    spent, relayed = [], []
    for silo, envelope in zip(silos, transfers):
        start = time.perf_counter()
        request, *digests = silo.sampling_audit(network(envelope))
        spent.append(time.perf_counter() - start)
        server.receive_sampling_audit(network(request))
        relayed += [network(server.relay(network(d))) for d in digests]
    seconds["sampling_retrieve"] = float(np.mean(spent))
    for envelope in relayed:
        silos[_silo_index(envelope.receiver, len(silos))].receive_sampling_digest(envelope)
    start = time.perf_counter()
    openings = server.sampling_openings(round_index)
    seconds["server_weights"] = time.perf_counter() - start
    return openings, seconds


def private_weighting_round(
    federation: Federation,
    round_index: int,
    silo_deltas: Sequence[np.ndarray],
    silo_noise: Sequence[np.ndarray],
    *,
    method: str = "fast",
    workers: int | None = None,
) -> RoundResult:
    """Round (a)-(c) with private sampling (`crypto.protocol.sampling`): round (a)'s weights go
    by oblivious transfer, checked by the silos' audit; then (b)-(c) as `weighting_round`.

    The silos' seconds are means over silos, as for `silo_weighting` (which here excludes the
    check of the openings, `sampling_audit`).
    """
    silos = federation.silos
    if len(silo_deltas) != len(silos) or len(silo_noise) != len(silos):
        raise InvalidParameter(f"need one delta array and one noise share per silo ({len(silos)})")
    openings, seconds = oblivious_transfer(federation, round_index)
    return _weighted_sums(
        federation, round_index, openings, silo_deltas, silo_noise, seconds, method, workers
    )


def realized_sample(federation: Federation, round_index: int) -> np.ndarray:
    """Who took part in a private-sampling round: c_u in S_u, and u not audited.

    It takes the server's S_u and the silos' seed R together, which no party holds: for tests
    and benchmarks only (the server's secrets are kept for the last aggregated round).
    """
    state = federation.server.sampling_secrets(round_index)
    choices, audited = federation.silos[0].sampling_draws(round_index)
    taken = np.array([c in set(state.subsets[u]) for u, c in enumerate(choices)], dtype=bool)
    taken[list(audited)] = False
    return taken


def plaintext_weighted_sum(
    silo_deltas: Sequence[np.ndarray],
    counts: np.ndarray,
    sampled: np.ndarray,
    silo_noise: Sequence[np.ndarray],
) -> np.ndarray:
    """sum_s sum_u sampled_u (n_{s,u} / N_u) delta_{s,u} + sum_s z_s in floating point (Eq. (3))."""
    counts = np.asarray(counts, dtype=float)
    totals = counts.sum(axis=0)
    weights = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
    weights = weights * np.asarray(sampled, dtype=bool)[None, :]
    result = sum(np.asarray(noise, dtype=float) for noise in silo_noise)
    for s, deltas in enumerate(silo_deltas):
        result = result + weights[s] @ np.asarray(deltas, dtype=float)
    return np.asarray(result, dtype=float)


FLOAT64_UNIT_ROUNDOFF = 2.0**-53
"""u: a float64 operation is exact up to a factor (1 + delta), |delta| <= u."""


def rounding_tolerance(encoding: Encoding, users: int, silos: int, max_abs: float | None = None) -> float:
    """Worst-case |secure - plaintext| per coordinate: fixed-point rounding plus float64 error.

    Fixed point (Theorem 4): each encoded value is off by at most P / 2; user u's terms carry
    weights summing to 1 over the silos, so the users add at most |U| P / 2 and the noise
    shares |S| P / 2.

    float64: the encoder's x / P, the decoder's two operations and `plaintext_weighted_sum`
    (n_su / N_u, the product, a dot product over |U| users, then |S| noise shares and |S| silo
    sums) each round, and so does the final subtraction. No term passes through more than
    k = |U| + 2|S| + 6 roundings (one spare), and the terms' absolute values sum to at most
    (|U| + |S|) (max|value| + P / 2) (the weights again sum to 1), so the standard bound
    (Higham, Accuracy and Stability of Numerical Algorithms, §3.1 and §4.2: gamma_k =
    k u / (1 - k u), u = 2^-53) adds gamma_k (|U| + |S|) (max|value| + P / 2). Near the value
    bound 1e10 this term dominates P / 2 by orders of magnitude.

    `max_abs` is the largest |value| of any delta or noise coordinate in the round; it defaults
    to the encoding's value bound (the worst case the encoding allows).
    """
    bound = encoding.value_bound if max_abs is None else float(max_abs)
    if not (np.isfinite(bound) and bound >= 0):
        raise InvalidParameter(f"max_abs must be a finite number >= 0, got {max_abs!r}")
    k = users + 2 * silos + 6
    gamma = k * FLOAT64_UNIT_ROUNDOFF / (1 - k * FLOAT64_UNIT_ROUNDOFF)
    half = encoding.precision / 2
    return (users + silos) * (half + gamma * (bound + half))


def largest_value(silo_deltas: Sequence[np.ndarray], silo_noise: Sequence[np.ndarray]) -> float:
    """max |value| over every delta and noise coordinate: the `max_abs` of `rounding_tolerance`."""
    return float(
        max(
            (np.max(np.abs(np.asarray(a, dtype=float)), initial=0.0) for a in [*silo_deltas, *silo_noise]),
            default=0.0,
        )
    )


def secure_weighted_sum(
    silo_deltas: list[np.ndarray],  # per silo, (users, d) clipped per-user deltas (float)
    counts: np.ndarray,  # (silos, users) int, n_{s,u}
    sampled: np.ndarray,  # (users,) bool, user-level sub-sampling
    silo_noise: list[np.ndarray],  # per silo, (d,) Gaussian noise share (float)
    *,
    key_bits: int = 3072,
    test_keys: bool = False,
    precision: float | None = None,
    n_max: int | None = None,
) -> np.ndarray:
    """Runs Protocol 1 end to end.

    Returns sum_s sum_u sampled_u * n_su/N_u * delta_su + sum_s noise_s (to within the encoding
    precision).

    A fresh setup (keys, DH, histograms) and one weighting round. `precision` defaults to
    P = 1e-10; `n_max` defaults to the largest N_max <= 2000 that the key can hold (all 2000 at
    3072 bits). Raises ValueError for inconsistent shapes, a count N_u above N_max, a value
    above 1e10 in absolute value, or a key too small for the encoding.
    """
    silos = np.shape(counts)[0] if np.ndim(counts) == 2 else None
    if len(silo_deltas) != silos or len(silo_noise) != silos:
        raise InvalidParameter(
            f"counts must be (silos, users) with one delta array and one noise share "
            f"per silo; got counts of shape {np.shape(counts)}, {len(silo_deltas)} "
            f"delta arrays and {len(silo_noise)} noise shares"
        )
    first = np.asarray(silo_deltas[0])
    if first.ndim != 2:
        raise InvalidParameter(f"each silo's deltas must be a (users, d) array, got shape {first.shape}")
    session = WeightingSession(
        counts, first.shape[1], key_bits=key_bits, test_keys=test_keys, precision=precision, n_max=n_max
    )
    return session.round(silo_deltas, sampled, silo_noise)


class WeightingSession:
    """Protocol 1 set up once for fixed counts, then one `round` per training round.

    The setup (keys, DH, blinded histograms) is what the paper runs "only once during the
    entire training process"; `secure_weighted_sum` is a session of one round. Arguments as in
    `secure_weighted_sum`; `dimension` is d.
    """

    def __init__(
        self,
        counts: np.ndarray,
        dimension: int,
        *,
        key_bits: int = 3072,
        test_keys: bool = False,
        precision: float | None = None,
        n_max: int | None = None,
        workers: int | None = None,
        sampling: SamplingParams | None = None,
    ) -> None:
        counts = np.asarray(counts)
        if counts.ndim != 2 or not np.issubdtype(counts.dtype, np.integer):
            raise InvalidParameter(
                f"counts must be a (silos, users) integer array, got {counts.dtype} {counts.shape}"
            )
        silos, users = counts.shape
        self.params, keypair = session_params(
            silos,
            users,
            dimension,
            key_bits=key_bits,
            test_keys=test_keys,
            precision=precision,
            n_max=n_max,
            sampling=sampling,
        )
        for u, total in enumerate(counts.sum(axis=0).tolist()):
            self.params.encoding.check_count(int(total), f"N_u for user {u}")
        self.federation = setup(counts, self.params, keypair=keypair)
        self.workers = workers
        self.rounds_done = 0
        self._last_index: int | None = None

    @property
    def last_sample(self) -> np.ndarray | None:
        """The realised sample of the last private-sampling round (`realized_sample`: it joins the
        server's secrets and the silos' seed, for tests; computed only when asked), else None."""
        if self._last_index is None:
            return None
        return realized_sample(self.federation, self._last_index)

    def round(
        self,
        silo_deltas: Sequence[np.ndarray],
        sampled: np.ndarray | None,
        silo_noise: Sequence[np.ndarray],
        *,
        round_index: int | None = None,
    ) -> np.ndarray:
        """One weighting round (a)-(c): the decoded weighted sum plus the noise shares.

        Under private sampling (`sampling` given) `sampled` is None: the oblivious transfer draws
        the sample, and `last_sample` gives the realised one (`realized_sample`, for tests: no
        party of a real deployment can compute it). `round_index` numbers the round (each index
        once, increasing: the training round, so that every engine derives the same draws from
        it); by default the rounds done so far.
        """
        p = self.params
        if len(silo_deltas) != p.silos or len(silo_noise) != p.silos:
            raise InvalidParameter(
                f"counts has {p.silos} silos but got {len(silo_deltas)} delta arrays "
                f"and {len(silo_noise)} noise shares"
            )
        for deltas in silo_deltas:
            if np.shape(deltas) != (p.users, p.dimension):
                raise InvalidParameter(
                    f"each silo's deltas must be ({p.users}, {p.dimension}), got {np.shape(deltas)}"
                )
        index = self.rounds_done if round_index is None else round_index
        if self.params.sampling is not None:
            if sampled is not None:
                raise InvalidParameter("under private sampling the server draws no sample: pass sampled=None")
            result = private_weighting_round(
                self.federation, index, silo_deltas, silo_noise, workers=self.workers
            )
            self._last_index = index
        else:
            if sampled is None:
                raise InvalidParameter("sampled is needed unless private sampling draws it")
            result = weighting_round(
                self.federation, index, silo_deltas, silo_noise, sampled, workers=self.workers
            )
        self.rounds_done += 1
        return result.aggregate


def session_params(
    silos: int,
    users: int,
    dimension: int,
    *,
    key_bits: int = 3072,
    test_keys: bool = False,
    precision: float | None = None,
    n_max: int | None = None,
    sampling: SamplingParams | None = None,
) -> tuple[ProtocolParams, tuple[PublicKey, PrivateKey]]:
    """The server's fresh Paillier key pair and the protocol's parameters for it.

    `precision` defaults to P = 1e-10; `n_max` to the largest N_max <= 2000 the key can hold
    with values up to 1e10 (all 2000 at 3072 bits), as `secure_weighted_sum` documents. The
    server alone knows no N_u, so the check N_u <= N_max is the caller's where it knows them.
    """
    precision = DEFAULT_PRECISION if precision is None else precision
    public, private = generate_keypair(key_bits, test_keys=test_keys)
    if n_max is None:
        n_max = largest_n_max(
            public.n,
            users,
            silos,
            precision=precision,
            value_bound=DEFAULT_VALUE_BOUND,
            ceiling=DEFAULT_N_MAX,
        )
        if n_max < 1:
            raise InvalidParameter(
                f"a {key_bits}-bit key cannot hold values of 1e10 at precision "
                f"{precision:g}; use a larger key or a coarser precision"
            )
    encoding = Encoding(precision=precision, n_max=n_max, value_bound=DEFAULT_VALUE_BOUND)
    params = ProtocolParams(
        silos=silos,
        users=users,
        dimension=dimension,
        key_bits=key_bits,
        encoding=encoding,
        test_keys=test_keys,
        sampling=sampling,
    )
    return params, (public, private)
