"""The assumptions of `dropout_report`'s figures, built next to the accounting (issue 10).

`uldp dropout` only renders them (table, JSON).
"""

from __future__ import annotations

from ..assumptions import AssumptionLines, accounting_label, uses_rdp
from ..orders import orders_label
from .accounting import PAPER_ACCOUNTING


def dropout_assumptions(
    z: float,
    q: float,
    delta: float,
    *,
    accountant: str,
    conversion: str,
    orders: str,
    paper: bool = False,
    participants: int | None = None,
    examples: int = 0,
    n_max: float | None = None,
    n0: float | None = None,
    clip: float = 1.0,
    coalition: float | None = None,
) -> AssumptionLines:
    """What `dropout_report`'s figures rest on, in the order `uldp dropout` prints them.

    `participants` of weight 1, or `examples` participants weighted by their example counts
    against `n_max`, or neither (rates only); `n0` is Algorithm 3's reference weight (None:
    Algorithm 2); `coalition` the colluding survivors' weight, if any. The lines name the
    command's options where they tell the reader what to give.
    """
    ours = {"accountant": accountant, "conversion": conversion, "orders": orders}
    server_accounting = (
        "RDP T/(a-1) ln(1 - q + q e^{(a-1) a/(2 m^2)}), converted as ours"
        if uses_rdp(ours["accountant"])
        else "exact delta(eps) = E_K[delta_Gauss(eps; sqrt(K)/m)], K ~ Bin(T, q), inverted by "
        "bisection (no PLD/PRV discretisation needed)"
    )
    if q >= 1:
        # Every view is a composition of plain Gaussians: the exact curve, not the accountant's.
        server_accounting = "exact, as the model rows (q = 1, see exact)"
    out = {
        "mechanism": (
            f"each round every participant is sampled with probability q = {q:g} "
            f"(Poisson), intended noise multiplier z = {z:g}; the same dropout rate in every round"
        ),
        "neighbouring": (
            "one participant's update replaced by another of the same weight, weight sum public "
            "(Propositions 1-2): sensitivity 2C/n' of the weighted average, weights <= 1; "
            "accounted as the add/remove pair with shift 2C/n' (the replace pair has both "
            "shifts |a|, |b| <= C/n')"
        ),
        "released model (model rows)": (
            "one Poisson-subsampled Gaussian step per round at rate q: subsampling "
            "amplification holds only for observers who do not know the sample "
            "U^t (outsiders who see the released models)"
        ),
        "server view (server rows)": (
            "no amplification: the server draws U^t itself (Algorithm 2 line 11, "
            "Algorithm 3 line 16), so it sees a plain Gaussian of multiplier m in "
            "the K ~ Bin(T, q) rounds the user takes part in, K known to it; " + server_accounting
        ),
        "no calibration": "multiplier z sqrt(n'/n_ref) (shares drawn for n_ref, sensitivity 2C/n', §IV-B)",
        "calibrated, released model": (
            "multiplier z: outsiders who see the released models only (Algorithm 2 lines 21-24)"
        ),
        "calibrated, server view": (
            "multiplier z / sqrt(1 + n_ref/n'): the honest-but-curious server holds "
            "the uncalibrated aggregate (line 19) and every calibration message "
            "(line 22), two independent noisy copies of the same average"
        ),
        "colluding participants": (
            "not covered by the z figure: surviving participants of weight k know "
            "their own shares and see multiplier z sqrt((n'-k)/n') calibrated, "
            "z sqrt((n'-k)/n_ref) uncalibrated; in Algorithm 3 they also know U^t, "
            "so they are accounted like the server (no amplification); "
            + (
                f"coalition rows: k = {coalition:g}"
                if coalition is not None
                else "give --colluding K for their rows"
            )
        ),
        "dropouts": (
            "not data-dependent and not part of the sampling; the heaviest participants drop "
            "(worst case) when weights are given; no dropouts during the calibration step "
            "(lines 21-22, §V-B)"
        ),
        "delta": f"{delta:g}",
        "accounting (ours)": accounting_label(**ours),
        "calibration column": (
            "none / yes = without / with calibration; model = released model "
            "(outsiders); server = the server's view; coalition = colluding survivors"
        ),
    }
    if q >= 1:
        out["exact"] = (
            "q = 1: no sub-sampling, so every row (model, server, coalition) is a composition of "
            "plain Gaussians, mu-GDP with mu = sqrt(T)/m, and its epsilon is exact (Balle & Wang "
            "2018 Thm. 8, inverted by bisection and rounded up; accountants/tight/gaussian.py), below "
            "every accountant's; the accountant's figure is the cross-check "
            "(JSON: accountant_epsilon, server_accountant_epsilon)"
        )
    if uses_rdp(ours["accountant"]):
        out["orders"] = orders_label(ours["orders"])
    if paper:
        out["accounting (paper)"] = (
            "as the paper's Table 2: TF-Privacy RDP, classic conversion "
            "eps = rho + log(1/delta)/(alpha-1), "
            + orders_label(PAPER_ACCOUNTING["orders"])
            + "; released model only"
        )
    if participants is not None:
        out["participants"] = f"{participants} sampled per round, weight 1 each"
    elif examples:
        out["participants"] = f"{examples} sampled per round, w_i = min(n_i/{n_max}, 1)"
    else:
        out["participants"] = (
            "rates only: n'/n = 1 - dropout exactly; with N participants of weight 1 "
            "the real n'/n is floor((1 - dropout) N)/N (6/7 for 7 at 10%): give "
            "--silos-per-round for that"
        )
    out["n_ref"] = (
        f"n_0 = {n0:g} (Algorithm 3)" if n0 is not None else "n, the sampled weight sum (Algorithm 2)"
    )
    out["clip"] = f"C = {clip:g} (variances per coordinate)"
    out["bound"] = "every epsilon is an upper bound at this delta under these assumptions"
    return AssumptionLines(
        tuple(out.items()),
        _brief(out, q, delta, ours, paper=paper, weighted=bool(examples), coalition=coalition),
    )


def _brief(
    out: dict[str, str],
    q: float,
    delta: float,
    ours: dict[str, str],
    *,
    paper: bool,
    weighted: bool,
    coalition: float | None,
) -> tuple[tuple[str, str], ...]:
    """The lines `uldp dropout` prints without --verbose: what a reader needs to read the
    tables, a line each, and nothing a bound depends on left unsaid (the neighbouring relation,
    the dropout model, who is not covered, how the paper rows are accounted)."""
    accounting = accounting_label(**ours)
    if paper:
        accounting += "; paper rows: classic conversion, tf-privacy orders (the paper's Table 2)"
    if q >= 1:
        accounting += "; q = 1: every row is exact (Gaussian composition, Balle & Wang 2018)"
    # Which participants drop matters only where their weights differ (--examples).
    lost = "the heaviest first (worst case), " if weighted else ""
    colluding = (
        f"coalition rows: colluding survivors of weight {coalition:g}; no other coalition is covered"
        if coalition is not None
        else "not covered by the z figure; --colluding K adds their rows"
    )
    return (
        ("delta", f"{delta:g}"),
        ("accounting", accounting),
        ("neighbouring", "replace one participant's update (same weight; the weight sum public)"),
        (
            "dropouts",
            f"participants sampled with q = {q:g} (Poisson); in each row a fraction r (its dropout "
            f"column) of them is lost before sending, {lost}the same r every round, not "
            "data-dependent; none during calibration",
        ),
        (
            "epsilon",
            "an upper bound; model rows: outsiders who see the released models; server rows: the "
            "server, which draws the sample",
        ),
        ("colluding", colluding),
        ("calibration", "none / yes = without / with Algorithm 2's re-drawn noise"),
        ("participants", out["participants"]),
        ("more", "--verbose for every assumption; --format json has them all"),
    )
