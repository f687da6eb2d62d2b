"""The dropout tables: epsilon per round count and most rounds per budget, per dropout rate.

Baek et al. 2021 (§IV-V) for the released model, with and without the calibration step; the
server's and a coalition's views (`accountants.dropout.rounds`'s module docstring); given `paper`
accounting, the figures as the paper's Table 2 computed them. Plain dicts, one per table row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

from .accounting import dropout_epsilon, max_rounds, server_epsilon, server_max_rounds
from .rounds import DropoutRound


def dropout_report(
    z: float,
    q: float,
    scenarios: dict[float, DropoutRound],
    rounds: Sequence[int],
    budgets: Sequence[float],
    delta: float,
    *,
    accounting: dict,
    paper: dict | None = None,
    coalition: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[dict], list[dict]]:
    """Epsilon after each round count and the most rounds per budget, per dropout rate, both without
    and with calibration.

    Returns (results, limits): one entry per (dropout, rounds | budget, calibrated) with the
    multiplier of the released model and its `epsilon` / `max_rounds` (Poisson-subsampled: an
    observer who does not know U^t), the server's view (`server_multiplier`, `server_epsilon` /
    `server_max_rounds`: no amplification, the server draws U^t; the calibration messages exist
    only when calibrating), given `paper` accounting, `paper_epsilon` / `paper_max_rounds`, and
    given a `coalition` weight k, what surviving participants of that weight see
    (`coalition_multiplier`, `coalition_epsilon` / `coalition_max_rounds`), accounted like the
    server: in Algorithm 3 they know U^t, and the known-participation figure bounds the other case
    too (forgetting K is post-processing).

    At q = 1 every view is a composition of plain Gaussians and its figures are exact
    (`accountants.tight.gaussian`); each result then also carries the accountant's epsilon as the
    cross-check (`accountant_epsilon`, `server_accountant_epsilon`, `coalition_accountant_epsilon`).
    The paper's figures are always the paper's method.
    """
    accountings = {"ours": accounting, **({"paper": paper} if paper else {})}
    exact = q >= 1.0

    @cache
    def eps(multiplier: float, t: int, which: str) -> float:
        return dropout_epsilon(multiplier, q, t, delta, exact=which == "ours", **accountings[which])

    @cache
    def most(multiplier: float, budget: float, which: str) -> int:
        return max_rounds(multiplier, q, budget, delta, exact=which == "ours", **accountings[which])

    @cache
    def cross_check(multiplier: float, t: int, server: bool) -> float:
        of = server_epsilon if server else dropout_epsilon
        return of(multiplier, q, t, delta, exact=False, **accounting)

    @cache
    def server_eps(multiplier: float, t: int) -> float:
        return server_epsilon(multiplier, q, t, delta, **accounting)

    @cache
    def server_most(multiplier: float, budget: float) -> int:
        return server_max_rounds(multiplier, q, budget, delta, **accounting)

    results: list[dict] = []
    limits: list[dict] = []
    for dropout, rd in scenarios.items():
        if progress:
            progress(f"dropout {dropout:g}")
        for calibrated in (False, True):
            m = rd.calibrated_multiplier(z) if calibrated else rd.uncalibrated_multiplier(z)
            server = rd.server_view_multiplier(z) if calibrated else m
            colluding = None if coalition is None else rd.coalition_multiplier(z, coalition, calibrated)

            def entry(key: str, value: float, released: Callable, seen: Callable, name: str) -> dict:
                """One result (name "epsilon", per round count) or limit ("max_rounds", per budget)."""
                out = {
                    "dropout": dropout,
                    key: value,
                    "calibrated": calibrated,
                    "multiplier": m,
                    name: released(m, value, "ours"),
                    "server_multiplier": server,
                    f"server_{name}": seen(server, value),
                }
                if paper:
                    out[f"paper_{name}"] = released(m, value, "paper")
                if colluding is not None:
                    out["coalition_multiplier"] = colluding
                    out[f"coalition_{name}"] = seen(colluding, value)
                if exact and name == "epsilon":
                    out["accountant_epsilon"] = cross_check(m, value, False)
                    out["server_accountant_epsilon"] = cross_check(server, value, True)
                    if colluding is not None:
                        out["coalition_accountant_epsilon"] = cross_check(colluding, value, True)
                return out

            results += [entry("rounds", t, eps, server_eps, "epsilon") for t in rounds]
            limits += [entry("budget", b, most, server_most, "max_rounds") for b in budgets]
    return results, limits
