"""Linking records to users and silos: the uniform and zipf allocations of ULDP-FL §5.1, and
the power allocation of subject-level DP-FL (Marathe & Kanani §4.2).

Two settings, as in ULDP-FL:

- *free silos* (MNIST, Creditcard, and GBSG2 here): every record gets a user and a silo.
  `uniform`: each record goes to a user and to a silo with equal probability (we deal them out
  evenly, so counts differ by at most one). `zipf`: the records per user follow a bounded Zipf
  law of exponent `alpha_records` (0.5); then each user ranks the silos in a random order of
  its own and sends each of its records to the silo of rank r with probability proportional to
  r^-alpha_silos (2.0). `power` (free silos only): records are dealt to users as `uniform` does;
  then each user ranks the silos in a random order of its own and sends each of its records to
  the silo of rank floor(N U^(1/alpha)) (U uniform on [0, 1)), i.e. at position x ~ P(x; alpha)
  = alpha x^(alpha-1) on [0, 1]: Marathe & Kanani's §4.2 model, with their subjects our users
  and their members our silos. alpha = 1 is an even spread; a larger alpha puts more of a
  user's records on fewer silos (rank j gets F((j+1)/N) - F(j/N), F(x) = x^alpha, in
  expectation: `accountants.subject.holdings.allocate_items`).
- *fixed silos* (HeartDisease: its four hospitals): the silo of every record is given, only users
  are drawn. `uniform`: each record goes to a user with equal probability. `zipf`: the records
  per user follow the Zipf law; `main_share` (80%) of a user's records sit in one main silo and
  the rest spread evenly over the other silos.

All functions take a `numpy.random.Generator`, so one seed reproduces an allocation.
"""

from __future__ import annotations

import numpy as np

from uldp.errors import DataError

#: The CLI's --allocation choices.
ALLOCATIONS = ("uniform", "zipf", "power")
#: --alpha of the power allocation; the range `uldp subject --alpha` takes (beyond it, every
#: record of a user lands in one silo, or the draw underflows).
ALPHA_MIN, ALPHA_MAX = 1e-3, 1e3
ALPHA_RECORDS = 0.5
ALPHA_SILOS = 2.0
MAIN_SILO_SHARE = 0.8


def zipf_weights(n: int, alpha: float) -> np.ndarray:
    """Bounded Zipf law of §5.1: p_r = r^-alpha / sum_{j=1..n} j^-alpha for ranks r = 1..n."""
    if n < 1:
        raise DataError(f"a Zipf law needs at least one rank, got {n}")
    weights = np.arange(1, n + 1, dtype=np.float64) ** (-float(alpha))
    return weights / weights.sum()


def check_alpha(method: str, alpha: object) -> float | None:
    """`alpha` as a float for the power allocation (required, in [ALPHA_MIN, ALPHA_MAX]), or None
    for the others (which refuse it); a DataError naming --alpha otherwise."""
    if method != "power":
        if alpha is not None:
            raise DataError(f"--alpha applies to --allocation power (got --allocation {method})")
        return None
    if alpha is None:
        raise DataError(
            f"--alpha is required by --allocation power: the power distribution's alpha, "
            f"a number in [{ALPHA_MIN:g}, {ALPHA_MAX:g}] (1 spreads a user's records evenly)"
        )
    if (
        isinstance(alpha, bool)
        or not isinstance(alpha, (int, float, np.integer, np.floating))
        or not ALPHA_MIN <= alpha <= ALPHA_MAX
    ):
        raise DataError(f"--alpha must be a number in [{ALPHA_MIN:g}, {ALPHA_MAX:g}], got {alpha!r}")
    return float(alpha)


def proportional_split(total: int, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """`total` items split in proportion to `weights` (largest remainders, ties broken at random).

    Every share is floor or ceil of total * w_i / sum(w), and the shares add up to `total`.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.sum() <= 0:
        weights = np.ones_like(weights)
    exact = total * weights / weights.sum()
    shares = np.floor(exact).astype(np.int64)
    left = int(total - shares.sum())
    if left:
        order = np.lexsort((rng.random(len(weights)), -(exact - shares)))
        shares[order[:left]] += 1
    return shares


def uniform_counts(n_records: int, n_bins: int, rng: np.random.Generator) -> np.ndarray:
    """Records per bin when each record picks a bin with equal probability, dealt out evenly."""
    counts = np.full(n_bins, n_records // n_bins, dtype=np.int64)
    counts[rng.choice(n_bins, size=n_records % n_bins, replace=False)] += 1
    return counts


def zipf_counts(n_records: int, n_users: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Records per user under the bounded Zipf law: user u has rank u + 1 (§5.1).

    When there are at least as many records as users, every user first gets one record (a
    user with no record takes no part in training), and the rest follow the Zipf law.
    """
    weights = zipf_weights(n_users, alpha)
    if n_records >= n_users:
        return 1 + rng.multinomial(n_records - n_users, weights).astype(np.int64)
    return rng.multinomial(n_records, weights).astype(np.int64)


def deal(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Owner of each record, in random order, so that owner i holds counts[i] records."""
    owners = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    return rng.permutation(owners)


def record_counts(
    method: str, n_records: int, n_users: int, alpha: float, rng: np.random.Generator
) -> np.ndarray:
    """Records per user for allocation `method` ('uniform' and 'power' deal evenly, or 'zipf')."""
    if method in ("uniform", "power"):
        return uniform_counts(n_records, n_users, rng)
    if method == "zipf":
        return zipf_counts(n_records, n_users, alpha, rng)
    raise DataError(f"--allocation must be one of {', '.join(ALLOCATIONS)}, got {method!r}")


def users_by_labels(
    labels: np.ndarray, counts: np.ndarray, labels_per_user: int, rng: np.random.Generator
) -> np.ndarray:
    """User of each record when every user holds at most `labels_per_user` labels (non-i.i.d.).

    Each user draws its labels at random; the first users (in a random order) take the labels
    of one random permutation in turn, so that every label has a holder and no record is left
    out. The records of each label are then shared among its holders in proportion to their
    target counts, which keeps the uniform or Zipf shape of records per user.
    """
    classes, codes = np.unique(labels, return_inverse=True)
    n_users, n_classes = len(counts), len(classes)
    per_user = min(labels_per_user, n_classes)
    if n_users * per_user < n_classes:
        raise DataError(
            f"--labels-per-user {labels_per_user} with {n_users} users leaves some of the "
            f"{n_classes} labels without a user; need users x labels-per-user >= {n_classes}"
        )
    holds = np.zeros((n_users, n_classes), dtype=bool)
    covering = rng.permutation(n_users)
    for position, label in enumerate(rng.permutation(n_classes)):
        holds[covering[position // per_user], label] = True
    keys = rng.random((n_users, n_classes))
    keys[holds] = -1.0  # labels already held sort first and are kept
    chosen = np.argsort(keys, axis=1)[:, :per_user]
    holds[np.arange(n_users)[:, None], chosen] = True

    users = np.empty(len(labels), dtype=np.int64)
    for label in range(n_classes):
        records = rng.permutation(np.flatnonzero(codes == label))
        holders = np.flatnonzero(holds[:, label])
        shares = proportional_split(len(records), counts[holders], rng)
        users[records] = np.repeat(holders, shares)
    return users


def uniform_silos(n_records: int, n_silos: int, rng: np.random.Generator) -> np.ndarray:
    """Silo of each record, each silo equally likely and independent of the user (§5.1)."""
    return deal(uniform_counts(n_records, n_silos, rng), rng)


def zipf_silos(
    users: np.ndarray, n_users: int, n_silos: int, alpha: float, rng: np.random.Generator
) -> np.ndarray:
    """Silo of each record: each user ranks the silos at random; rank r weighs r^-alpha (§5.1)."""
    ranks = rng.choice(n_silos, size=len(users), p=zipf_weights(n_silos, alpha))
    priorities = np.argsort(rng.random((n_users, n_silos)), axis=1)
    return priorities[users, ranks].astype(np.int64)


def power_ranks(n_records: int, n_silos: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Rank of each record's silo in its user's order: floor(N U^(1/alpha)), U ~ Uniform[0, 1).

    U^(1/alpha) has density alpha x^(alpha-1) on [0, 1] (the power distribution of Marathe &
    Kanani §4.2), so rank j is drawn with probability (j+1)^alpha/N^alpha - j^alpha/N^alpha.
    """
    position = rng.random(n_records) ** (1.0 / float(alpha))
    return np.minimum(np.floor(n_silos * position).astype(np.int64), n_silos - 1)


def power_silos(
    users: np.ndarray, n_users: int, n_silos: int, alpha: float, rng: np.random.Generator
) -> np.ndarray:
    """Silo of each record: each user orders the silos at random; ranks follow `power_ranks`."""
    ranks = power_ranks(len(users), n_silos, alpha, rng)
    priorities = np.argsort(rng.random((n_users, n_silos)), axis=1)
    return priorities[users, ranks].astype(np.int64)


def users_in_fixed_silos(
    silos: np.ndarray, counts: np.ndarray, n_silos: int, main_share: float, rng: np.random.Generator
) -> np.ndarray:
    """User of each record when silos are fixed: `main_share` of a user's records in one silo.

    A silo only holds the records it has, so users are placed heaviest first: the main silo is
    drawn in proportion to the room left in each silo, round(main_share * N_u) records go there
    (less if it is full), and the others go one by one to a silo other than the main one, each
    with room equally likely. When silo sizes are very unequal (Switzerland holds 6% of
    HeartDisease) a main silo drawn with equal probability could not take its 80%, hence the
    draw in proportion to room.
    """
    room = np.bincount(silos, minlength=n_silos).astype(np.int64)
    if room.sum() != counts.sum():
        raise DataError(f"{counts.sum()} user records for {room.sum()} silo records")
    placed = np.zeros((len(counts), n_silos), dtype=np.int64)
    everywhere = np.arange(n_silos)
    for user in np.lexsort((rng.random(len(counts)), -counts)):
        wanted = int(counts[user])
        if wanted == 0:
            continue
        main = int(rng.choice(n_silos, p=room / room.sum()))
        in_main = min(int(round(main_share * wanted)), int(room[main]))
        placed[user, main] += in_main
        room[main] -= in_main
        for _ in range(wanted - in_main):
            others = everywhere[(room > 0) & (everywhere != main)]
            silo = int(rng.choice(others)) if others.size else main
            placed[user, silo] += 1
            room[silo] -= 1

    users = np.empty(len(silos), dtype=np.int64)
    for silo in range(n_silos):
        records = rng.permutation(np.flatnonzero(silos == silo))
        users[records] = np.repeat(np.arange(len(counts), dtype=np.int64), placed[:, silo])
    return users


def allocate_free(
    n_records: int,
    *,
    n_users: int,
    n_silos: int,
    method: str,
    rng: np.random.Generator,
    labels: np.ndarray | None = None,
    labels_per_user: int | None = None,
    alpha: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(user, silo) of every record when both are drawn (MNIST and Creditcard in §5.1).

    `alpha` is the power allocation's parameter (required for 'power', refused otherwise).
    Users are drawn before silos, so 'power' gives the users 'uniform' gives for the same rng.
    """
    alpha = check_alpha(method, alpha)
    counts = record_counts(method, n_records, n_users, ALPHA_RECORDS, rng)
    if labels_per_user is None:
        users = deal(counts, rng)
    elif labels is None:
        raise DataError("--labels-per-user needs class labels; survival data has none")
    else:
        users = users_by_labels(labels, counts, labels_per_user, rng)
    if method == "zipf":
        silos = zipf_silos(users, n_users, n_silos, ALPHA_SILOS, rng)
    elif method == "power":
        assert alpha is not None  # check_alpha requires it
        silos = power_silos(users, n_users, n_silos, alpha, rng)
    else:
        silos = uniform_silos(n_records, n_silos, rng)
    return users, silos


def allocate_fixed(
    silos: np.ndarray, *, n_users: int, n_silos: int, method: str, rng: np.random.Generator
) -> np.ndarray:
    """User of every record of silos given by the data (HeartDisease and TcgaBrca in §5.1)."""
    if method == "power":
        raise DataError(fixed_power_message("this data set"))
    counts = record_counts(method, len(silos), n_users, ALPHA_RECORDS, rng)
    if method == "uniform":
        return deal(counts, rng)
    return users_in_fixed_silos(silos, counts, n_silos, MAIN_SILO_SHARE, rng)


def fixed_power_message(name: str) -> str:
    """The one-line refusal of --allocation power for data whose silos are given."""
    return (
        f"--allocation power is not available for {name}, whose silos are fixed by the data "
        "(power draws the silo of each record); use uniform or zipf"
    )


def describe(
    method: str,
    *,
    fixed_silos: bool,
    labels_per_user: int | None,
    seed: int,
    alpha: float | None = None,
) -> dict:
    """The `allocation` record of a FederatedData: what was drawn, with which parameters.

    The power allocation adds `alpha` (the key is absent for the others, so that their records,
    and the checkpoints keyed on them, are as before).
    """
    zipf = method == "zipf"
    description = {
        "method": method,
        "alpha_records": ALPHA_RECORDS if zipf else None,
        "alpha_silos": ALPHA_SILOS if zipf and not fixed_silos else None,
        "main_silo_share": MAIN_SILO_SHARE if zipf and fixed_silos else None,
        "labels_per_user": labels_per_user,
        "silos": "fixed by the data" if fixed_silos else "allocated",
        "seed": seed,
    }
    if method == "power":
        description["alpha"] = None if alpha is None else float(alpha)
    return description
