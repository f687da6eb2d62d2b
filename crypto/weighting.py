"""The silo's encrypted weighted sum of Protocol 1, round (b) (ULDP-FL §4.1).

For silo s and coordinate j the protocol computes

    Enc(Delta_s)_j = prod_u Enc(B_inv(N_u)) ^ (E_{u,j} n_{s,u} r_u C_LCM mod n)    (mod n^2)

with E_{u,j} = Encode(delta_{s,u,j}) (Algorithm 5). `straightforward_products` does exactly that:
|U| d exponentiations by full-size (|n|-bit) exponents -- the reference.

`fast_products` computes the same plaintexts with far less work:

1. the per-user factor k_u = n_{s,u} r_u C_LCM mod n does not depend on j, so each user's
   ciphertext is raised to it once per round: G_u = Enc(B_inv(N_u))^{k_u} = Enc(k_u B_inv(N_u));
2. every coordinate then needs only G_u^{E_{u,j}}, whose exponent is the small signed fixed-point
   value (|E| <= value_bound / P, tens of bits); the sign is handled without a full-size exponent
   by gathering positive and negative exponents in two products and dividing once per
   coordinate: prod G^{E+} * (prod G^{|E-|})^{-1};
3. the d exponentiations of one base G_u share a fixed-base windowed table (G_u^{v 2^{wk}}), so
   each G_u^{E} costs about bits(E) / w multiplications;
4. users are split across processes (both cores), each returning its partial products.

Both paths leave the ciphertexts un-randomized; the silo adds its plaintext offset and fresh
randomness afterwards (`finish`), also spread over the processes in the fast path.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import gmpy2

from uldp.crypto.paillier import PublicKey
from uldp.errors import InvalidParameter


def user_factors(counts: Sequence[int], blinds: Sequence[int], c_lcm: int, modulus: int) -> list[gmpy2.mpz]:
    """k_u = n_{s,u} r_u C_LCM mod n for each user (the per-user part of Protocol 1, round (b))."""
    c = gmpy2.mpz(c_lcm) % modulus
    return [gmpy2.mpz(n_su) * r % modulus * c % modulus for n_su, r in zip(counts, blinds)]


def straightforward_products(
    public_key: PublicKey,
    weights: Sequence[int],
    factors: Sequence[int],
    fixed: Sequence[Sequence[int]],
) -> list[gmpy2.mpz]:
    """prod_u Enc(w_u)^{E_{u,j} k_u mod n} for each coordinate j: |U| d full-size exponentiations."""
    n, nsq = public_key.n, public_key.nsquare
    d = len(fixed[0]) if fixed else 0
    out = []
    for j in range(d):
        acc = gmpy2.mpz(1)
        for c, k, row in zip(weights, factors, fixed):
            acc = acc * gmpy2.powmod(c, gmpy2.mpz(row[j]) * k % n, nsq) % nsq
        out.append(acc)
    return out


def window_size(bits: int, uses: int) -> int:
    """The table width w minimising windows * (table entries + uses) multiplications."""
    if bits <= 0:
        return 1
    return min(range(1, 11), key=lambda w: math.ceil(bits / w) * ((1 << w) - 1 + uses))


def _user_chunk_products(
    nsquare: int,
    modulus: int,
    weights: Sequence[int],
    factors: Sequence[int],
    fixed: Sequence[Sequence[int]],
    d: int,
) -> tuple[list[gmpy2.mpz], list[gmpy2.mpz]]:
    """Partial products over some users: (prod G_u^{E+}, prod G_u^{|E-|}) per coordinate."""
    nsq, n = gmpy2.mpz(nsquare), gmpy2.mpz(modulus)
    positive = [gmpy2.mpz(1)] * d
    negative = [gmpy2.mpz(1)] * d
    for c, k, row in zip(weights, factors, fixed):
        if k == 0 or not any(row):
            continue
        base = gmpy2.powmod(gmpy2.mpz(c), gmpy2.mpz(k) % n, nsq)
        bits = max(abs(e).bit_length() for e in row)
        w = window_size(bits, sum(1 for e in row if e))
        digit_mask = (1 << w) - 1
        tables = []
        for _ in range(math.ceil(bits / w)):
            table = [gmpy2.mpz(1), base]
            for _ in range((1 << w) - 2):
                table.append(table[-1] * base % nsq)
            tables.append(table)
            base = table[-1] * base % nsq  # base^(2^w): the next window's generator
        for j, e in enumerate(row):
            if e == 0:
                continue
            acc = positive if e > 0 else negative
            value, magnitude, window = acc[j], abs(e), 0
            while magnitude:
                digit = magnitude & digit_mask
                if digit:
                    value = value * tables[window][digit] % nsq
                magnitude >>= w
                window += 1
            acc[j] = value
    return positive, negative


def _obfuscators(modulus: int, count: int) -> list[gmpy2.mpz]:
    public_key = PublicKey(gmpy2.mpz(modulus))
    return [public_key.obfuscator() for _ in range(count)]


#: The signals that end a run: the parent's to handle (uldp.cli.signals), never a worker's.
_INTERRUPTS = {getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)}


def _leave_signals_to_parent() -> None:
    """A worker's start: Ctrl-C and SIGTERM are the parent's to handle, once.

    A forked worker inherits the parent's handlers (the CLI's prints "Stopped by SIGTERM"), so a
    signal sent to the whole process group (Ctrl-C, a closing terminal, `kill -- -PGID`) would
    be reported once per worker. Workers ignore SIGINT and die quietly on SIGTERM and SIGHUP; the
    parent, interrupted, terminates them.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _INTERRUPTS)  # blocked by the parent while forking


def _terminate_workers(pool: ProcessPoolExecutor) -> None:
    """SIGTERM every worker of `pool` (Python 3.14's `terminate_workers`, by hand before it)."""
    terminate = getattr(pool, "terminate_workers", None)
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        if process.is_alive():
            process.terminate()


def default_workers() -> int:
    """Processes for the fast path: one per available core."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _chunks(count: int, parts: int) -> list[range]:
    parts = max(1, min(parts, count))
    edges = [round(i * count / parts) for i in range(parts + 1)]
    return [range(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def fast_products(
    public_key: PublicKey,
    weights: Sequence[int],
    factors: Sequence[int],
    fixed: Sequence[Sequence[int]],
    *,
    workers: int | None = None,
    obfuscator_count: int = 0,
) -> tuple[list[gmpy2.mpz], list[gmpy2.mpz]]:
    """The same products as `straightforward_products`, and `obfuscator_count` fresh r^n.

    Returns (products, obfuscators). With `workers` > 1 the users (and the obfuscators) are
    spread over that many processes; `workers=1` computes everything in this process.
    """
    n, nsq = int(public_key.n), int(public_key.nsquare)
    d = len(fixed[0]) if fixed else 0
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise InvalidParameter(f"workers must be >= 1, got {workers}")
    if len(weights) + obfuscator_count < 4 * workers:
        workers = 1  # too little work to pay for starting processes
    user_parts = _chunks(len(weights), 2 * workers if workers > 1 else 1)
    obf_parts = _chunks(obfuscator_count, workers) if obfuscator_count else []
    if workers == 1:
        partials = [
            _user_chunk_products(
                nsq, n, [weights[i] for i in part], [factors[i] for i in part], [fixed[i] for i in part], d
            )
            for part in user_parts
        ]
        obfuscators = [o for part in obf_parts for o in _obfuscators(n, len(part))]
    else:
        pool = ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("fork"), initializer=_leave_signals_to_parent
        )
        # The workers are forked by the first submit: a signal handled in the middle of a fork
        # would be lost in its after-fork hooks, so it waits (blocked) until they all exist.
        interrupts = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
        try:
            try:
                user_jobs = [
                    pool.submit(
                        _user_chunk_products,
                        nsq,
                        n,
                        [int(weights[i]) for i in part],
                        [int(factors[i]) for i in part],
                        [list(fixed[i]) for i in part],
                        d,
                    )
                    for part in user_parts
                ]
                obf_jobs = [pool.submit(_obfuscators, n, len(part)) for part in obf_parts]
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, interrupts)
            partials = [job.result() for job in user_jobs]
            obfuscators = [o for job in obf_jobs for o in job.result()]
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM): end the workers now rather than wait for their
            # chunks, which at 3072 bits can take minutes.
            _terminate_workers(pool)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    nsq_m = gmpy2.mpz(nsq)
    products = []
    for j in range(d):
        positive, negative = gmpy2.mpz(1), gmpy2.mpz(1)
        for pos, neg in partials:
            positive = positive * pos[j] % nsq_m
            negative = negative * neg[j] % nsq_m
        products.append(positive * gmpy2.invert(negative, nsq_m) % nsq_m if negative != 1 else positive)
    return products, obfuscators


def finish(
    public_key: PublicKey,
    products: Sequence[int],
    offsets: Sequence[int],
    obfuscators: Sequence[int] | None = None,
) -> list[gmpy2.mpz]:
    """Enc(product + offset) under fresh randomness, per coordinate.

    `offsets` are plaintexts in F_n (the encoded noise share times C_LCM plus the pairwise mask,
    Protocol 1 round (b)-(c)). Without `obfuscators` fresh ones are computed here.
    """
    if obfuscators is None:
        obfuscators = [public_key.obfuscator() for _ in products]
    if not len(products) == len(offsets) == len(obfuscators):
        raise InvalidParameter("products, offsets and obfuscators must have the same length")
    return [
        public_key.add_plain(c, m) * r % public_key.nsquare for c, m, r in zip(products, offsets, obfuscators)
    ]


def encrypted_weighted_sum(
    public_key: PublicKey,
    weights: Sequence[int],
    factors: Sequence[int],
    fixed: Sequence[Sequence[int]],
    offsets: Sequence[int],
    *,
    method: str = "fast",
    workers: int | None = None,
) -> list[gmpy2.mpz]:
    """One silo's Enc(sum_u E_{u,j} k_u w_u + offset_j) per coordinate j, freshly randomized.

    `weights` are the ciphertexts Enc(B_inv(N_u)) (round (a)), `factors` the k_u of
    `user_factors`, `fixed` the |U| x d signed fixed-point deltas. `method` is "fast" or
    "straightforward" (the reference); both give the same plaintexts.
    """
    if not len(weights) == len(factors) == len(fixed):
        raise InvalidParameter(f"{len(weights)} weights, {len(factors)} factors, {len(fixed)} delta rows")
    if method == "straightforward":
        return finish(public_key, straightforward_products(public_key, weights, factors, fixed), offsets)
    if method != "fast":
        raise InvalidParameter(f"method must be 'fast' or 'straightforward', got {method!r}")
    products, obfuscators = fast_products(
        public_key, weights, factors, fixed, workers=workers, obfuscator_count=len(offsets)
    )
    return finish(public_key, products, offsets, obfuscators)
