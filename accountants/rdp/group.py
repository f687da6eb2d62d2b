"""Group privacy: from a record-level guarantee to one for any k records (ULDP-FL §2.2).

Two conversions from the paper, both valid for every mechanism accounted by RDP:
- Lemma 6 (Mironov 2017, Prop. 2): (alpha, rho)-RDP with alpha >= 2^(c+1) gives
  (alpha / 2^c, 3^c rho)-RDP for groups of 2^c records. A group of k records is also a group
  of at most 2^ceil(log2 k) records, so k that is not a power of two uses the next power.
- Lemma 5 (Kasiviswanathan & Smith): (eps, delta')-DP gives (k eps, k e^{(k-1) eps} delta')-DP
  for groups of k. The delta' fed to the RDP conversion is searched (the bisection under
  Fig. 2) so that k e^{(k-1) eps(delta')} delta' <= delta, entirely in log space, then solved
  again at the real orders next to the best grid order.
The tight PLD group bound lives in `accountants.tight.pld`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from uldp.errors import InvalidParameter

from ..conversion import epsilon_curve, golden_order, rdp_to_dp, refine
from ..orders import DEFAULT_ORDERS, Orders, OrdersSpec
from .curves import MAX_EXACT_ORDER
from .profile import RdpProfile


@dataclass(frozen=True)
class GroupBound:
    epsilon: float
    order: float | None  # the order of the group guarantee that gave epsilon
    base_order: float | None  # the order of the record-level RDP it came from
    group_size_used: int  # k rounded up to a power of two for Lemma 6, else k
    record_log_delta: float | None = None  # Lemma 5: ln of the record-level delta' used
    note: str = ""


def doubling_exponent(k: int) -> int:
    """c = ceil(log2 k): the number of doublings Lemma 6 needs to cover k records."""
    if k < 1:
        raise InvalidParameter(f"k must be >= 1, got {k}")
    return (k - 1).bit_length()


def lemma6_orders(orders_spec: OrdersSpec, c: int) -> tuple[np.ndarray, np.ndarray]:
    """(base orders alpha, group orders alpha / 2^c) with alpha >= 2^(c+1) as Lemma 6 requires.

    With the default set we place the group orders on the dense grid itself (alpha = 2^c beta),
    so the group guarantee is optimised as finely as a record-level one; a named or listed set
    is taken as the base orders, and those below 2^(c+1) are dropped rather than misused (the
    published Fig. 2 values for k >= 16 came from such orders).
    """
    scale = float(2**c)
    orders = Orders.parse(orders_spec)
    if orders.preset == "default":
        # Base orders above MAX_EXACT_ORDER would only get the plain Gaussian RDP, and the
        # 3^c factor keeps the optimal group order small, so the grid stops there.
        beta = DEFAULT_ORDERS[(DEFAULT_ORDERS >= 2.0) & (DEFAULT_ORDERS * scale <= MAX_EXACT_ORDER)]
        if beta.size == 0:
            beta = DEFAULT_ORDERS[DEFAULT_ORDERS >= 2.0][:16]
        return beta * scale, beta
    base = orders.grid
    base = base[base >= 2.0 * scale]
    return base, base / scale


def rdp_group(
    profile: RdpProfile,
    k: int,
    log_delta: float,
    orders_spec: OrdersSpec = "default",
    conversion: str = "improved",
) -> GroupBound:
    """Group-k epsilon by Lemma 6 then Lemma 2 (Theorem 2's expression for ULDP-GROUP-k)."""
    c = doubling_exponent(k)
    base, beta = lemma6_orders(orders_spec, c)
    if base.size == 0:
        return GroupBound(
            math.inf,
            None,
            None,
            2**c,
            note=f"no order >= {2 ** (c + 1)} in the order set (Lemma 6 needs alpha >= 2^(c+1))",
        )
    orders = Orders.parse(orders_spec)

    def group_rdp(stage: np.ndarray) -> np.ndarray:
        return (3.0**c) * profile.at(stage * 2**c)

    conv = orders.best(lambda stage: rdp_to_dp(stage, group_rdp(stage), log_delta, conversion), grid=beta)
    if orders.preset == "default":  # real group orders between the grid's (>= 2: alpha >= 2^(c+1))
        conv = refine(conv, beta, group_rdp, log_delta, conversion, lowest=2.0)
    base_order = None if conv.order is None else conv.order * 2**c
    note = "" if k == 2**c else f"k={k} accounted as a group of {2**c} (next power of two)"
    return GroupBound(conv.epsilon, conv.order, base_order, 2**c, note=note)


def normal_group(
    profile: RdpProfile,
    k: int,
    log_delta: float,
    orders_spec: OrdersSpec = "default",
    conversion: str = "improved",
) -> GroupBound:
    """Group-k epsilon by Lemma 5 on the RDP guarantee, with delta' searched in log space.

    Any delta' with log k + (k-1) eps(delta') + log delta' <= log delta gives the valid
    guarantee (k eps(delta'), delta); since eps(delta') falls as delta' grows we want the
    largest feasible delta'. The constraint need not be monotone in delta', so we scan a
    log grid for the largest feasible point and then bisect towards its infeasible neighbour,
    always keeping a feasible end (the returned bound is checked feasible, never interpolated).
    With the default orders the split is then solved again at the real orders next to the best
    grid order (`_real_order_group`).
    """
    orders_set = Orders.parse(orders_spec)
    found = orders_set.best(lambda orders: _normal_group_at(profile, k, log_delta, orders, conversion))
    if orders_set.preset != "default" or found.record_log_delta is None or found.order is None:
        return found
    return _real_order_group(profile, k, log_delta, conversion, orders_set.grid, found)


def _real_order_group(
    profile: RdpProfile, k: int, log_delta: float, conversion: str, grid: np.ndarray, found: GroupBound
) -> GroupBound:
    """`found` (Lemma 5 at the best grid order) improved over the real orders next to its order.

    At each real order alpha the delta' split is solved again (`_normal_group_at` with that order
    alone): a smaller eps_alpha(delta') loosens the constraint, so a larger delta' becomes
    feasible and lowers eps_alpha once more. Each candidate is a complete Lemma 5 bound, its
    delta' checked feasible at its own order from the RDP at that real order (Mironov et al. 2019
    §3.3's fractional series, an upper bound), so the smallest of them and `found` is valid
    whatever the shape of the curve; golden-section search as `conversion.refine`.
    """
    assert found.order is not None  # the caller checked
    if not math.isfinite(found.epsilon) or found.epsilon == 0:
        return found

    def at(alpha: float) -> GroupBound:
        return _normal_group_at(profile, k, log_delta, np.array([alpha]), conversion)

    # solved again at the rounded order: the printed order is the one the bound holds at
    alpha = golden_order(grid, found.order, lambda a: at(a).epsilon)
    if alpha is None:
        return found
    candidate = at(alpha)
    return candidate if candidate.epsilon < found.epsilon else found


def _normal_group_at(
    profile: RdpProfile, k: int, log_delta: float, orders: np.ndarray, conversion: str
) -> GroupBound:
    rdp = profile.at(orders)
    if k == 1:
        conv = rdp_to_dp(orders, rdp, log_delta, conversion)
        return GroupBound(conv.epsilon, conv.order, conv.order, 1, record_log_delta=log_delta)
    log_k = math.log(k)

    def slack(ld: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        eps_grid = epsilon_curve(orders, rdp, ld, conversion)
        eps = np.maximum(np.min(eps_grid, axis=0), 0.0)
        return log_k + (k - 1) * eps + ld - log_delta, eps

    top = log_delta - log_k  # delta' can never exceed delta / k
    grid = top - np.geomspace(1e-9, 1e12, 4000)
    grid = np.concatenate([[top], grid])
    s, _ = slack(grid)
    feasible = np.flatnonzero(s <= 0)
    if feasible.size == 0:
        return GroupBound(
            math.inf, None, None, k, note="no record-level delta' meets the group delta with these orders"
        )
    i = feasible[0]
    lo = grid[i]  # feasible
    if i > 0:
        hi = grid[i - 1]  # infeasible, larger delta'
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            if slack(np.array([mid]))[0][0] <= 0:
                lo = mid
            else:
                hi = mid
            if hi - lo < 1e-12 * max(1.0, abs(lo)):
                break
    eps_grid = epsilon_curve(orders, rdp, lo, conversion)[:, 0]
    best = int(np.argmin(eps_grid))
    eps_record = max(0.0, float(eps_grid[best]))
    return GroupBound(k * eps_record, float(orders[best]), float(orders[best]), k, record_log_delta=float(lo))
