"""What a guarantee rests on, built by the library next to the number; the CLI only renders it.

One structured record per accounting request: the delta, the accountants that produced the
numbers, the RDP conversion and orders where RDP was used, and each plan's own assumptions
(algorithm, noise, mechanism, neighbouring relation: `plan.Plan.assumptions`).
`as_dict` gives the labelled lines the CLI prints as the assumptions block and writes to JSON.

Commands whose block has its own order (`uldp dropout`, `uldp subject`, `uldp personalize`) get an
`AssumptionLines`, built the same way by the library function next to their accounting.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .orders import Orders, OrdersSpec
from .plan import Plan
from .registry import accountant_named

ACCOUNTANT_TEXT = {
    "rdp": "RDP (Mironov et al. 2019, log-space)",
    "pld": "PLD (dp-accounting, pessimistic)",
    "prv": "PRV (prv-accountant, upper estimate)",
}
CONVERSION_TEXT = {"improved": "improved, Lemma 2", "classic": "classic, eps = rho + log(1/delta)/(alpha-1)"}


@dataclass(frozen=True)
class Assumptions:
    """The delta, accountants, RDP conversion and orders, then further labelled lines in order."""

    delta: float
    accountants: tuple[str, ...]
    conversion: str
    orders: Orders
    lines: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, str]:
        out = {
            "delta": f"{self.delta:g}",
            "accountant": "; ".join(ACCOUNTANT_TEXT[a] for a in self.accountants),
        }
        if any(accountant_named(a).converts_rdp for a in self.accountants):
            out["conversion"] = CONVERSION_TEXT[self.conversion]
            out["orders"] = self.orders.label
        out["bound"] = "every epsilon is an upper bound at this delta"
        out.update(self.lines)
        return out


@dataclass(frozen=True)
class AssumptionLines:
    """Labelled assumption lines in the order they are printed; `as_dict` as for `Assumptions`.

    `brief`, where a command's full block is too long to read first (issue 34: `uldp dropout`'s
    ran to ~55 lines), is the handful of lines a person needs (delta, accounting, the model in
    one line, what an epsilon means, where the rest is); `shown` picks what the table prints.
    JSON always gets every line (`as_dict`).
    """

    lines: tuple[tuple[str, str], ...]
    brief: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, str]:
        return dict(self.lines)

    def shown(self, verbose: bool) -> dict[str, str]:
        """The lines a table prints: every line with `verbose` (or with no brief), else the brief."""
        return dict(self.lines if verbose or not self.brief else self.brief)

    def get(self, label: str) -> str | None:
        return dict(self.lines).get(label)


def uses_rdp(accountant: str) -> bool:
    """Whether the accountant's figures depend on the RDP conversion and orders."""
    return accountant_named(accountant).converts_rdp


def accounting_label(accountant: str, conversion: str, orders: str) -> str:
    """'rdp, improved conversion, default orders' or 'pld'."""
    if not uses_rdp(accountant):
        return accountant
    return f"rdp, {conversion} conversion, {orders} orders"


def accounting_assumptions(
    plans: Sequence[Plan],
    *,
    delta: float,
    accountants: Iterable[str],
    conversion: str,
    orders: OrdersSpec,
    extra: Iterable[tuple[str, str]] = (),
) -> Assumptions:
    """The assumptions of accounting `plans` with these accountants (those that produced numbers).

    With several plans each plan's lines are prefixed by its algorithm's name.
    """
    lines: list[tuple[str, str]] = []
    for plan in plans:
        prefix = "" if len(plans) == 1 else f"{plan.algorithm}: "
        lines += [(prefix + key, value) for key, value in plan.assumptions.items()]
    return Assumptions(
        delta,
        tuple(dict.fromkeys(accountants)),
        conversion,
        Orders.parse(orders),
        tuple(lines) + tuple(extra),
    )
