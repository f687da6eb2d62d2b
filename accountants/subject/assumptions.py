"""The assumptions of `account_subjects`' figures, built next to the accounting (issue 10).

`uldp subject` only renders them (table, JSON).
"""

from __future__ import annotations

from ..assumptions import AssumptionLines, accounting_label, uses_rdp
from ..orders import orders_label
from .horizontal import MECHANISMS, FederationRun

#: How the paper spells each subject-level algorithm (`horizontal.MECHANISMS`).
ALGORITHM_NAMES = {
    "higradavgdp": "HiGradAvgDP",
    "userldp": "UserLDP",
    "localgroupdp": "LocalGroupDP",
    "localitemdp": "LocalItemDP",
}
assert tuple(ALGORITHM_NAMES) == MECHANISMS

_SAMPLED = "a member holding m of its items samples it at 1 - (1 - q)^m per mini-batch (Poisson sampling)"
_PER_ITEM = (
    "per-item clipping to C and the clipped gradients summed (DP-SGD), each of a subject's m items "
    "at a member drawn on its own at rate q (Poisson sampling), so a mini-batch moves by B C, "
    "B ~ Binomial(m, q) (the group-of-k step with k = m): by PLD that mixture of Gaussians exactly; "
    "by RDP m sub-sampled steps at rate q of multiplier sigma / sqrt(m) (the step's noise split "
    "over the m items, a post-processing); the cross-check (JSON, notes) is the older bound, "
    "multiplier sigma / m at 1 - (1 - q)^m"
)

#: The "local mechanism" line: what one member's mini-batch releases about a subject.
LOCAL_MECHANISM = {
    "higradavgdp": "HiGradAvgDP: a subject's per-mini-batch contribution bounded by C (Lemma 3.7); "
    + _SAMPLED,
    "userldp": (
        "UserLDP: the mini-batch's gradient clipped to C as a whole (Algorithm 1), so a subject's "
        "items can turn it into any other vector of norm <= C: sensitivity 2C, multiplier sigma / 2 "
        "(the replacement bound of Lemma 3.2's clipping; the lemma's C holds only against an "
        "empty batch); " + _SAMPLED
    ),
    "localgroupdp": "LocalGroupDP (Algorithm 2) at the given sigma: " + _PER_ITEM,
    "localitemdp": "LocalItemDP: " + _PER_ITEM,
}

#: The "algorithm" line (printed for an --algo other than the default HiGradAvgDP).
ALGORITHM = {
    "higradavgdp": "HiGradAvgDP (Algorithm 3, §3.3): every row accounts its mechanism",
    "userldp": "UserLDP (Algorithm 1, §3.1): every row accounts its mechanism",
    "localgroupdp": (
        "LocalGroupDP (Algorithm 2, §3.2): every row accounts its DP-SGD mechanism at the given "
        "sigma directly, by each subject's items at a member; --k's sigma_Z table bounds it by "
        "group privacy instead (Corollary 3.5), which can be the smaller bound"
    ),
    "localitemdp": (
        "LocalItemDP (DP-SGD in FL, the paper's item-level baseline): every row accounts it for "
        "a subject's items, by their count at a member"
    ),
}


def subject_assumptions(
    run: FederationRun,
    delta: float,
    *,
    accountant: str,
    conversion: str,
    orders: str,
    holdings: str | None = None,
    subject_items: int | None = None,
    distribution: str = "uniform",
    alpha: float | None = None,
    subject_members: int | None = None,
    items_per_member: int = 1,
    group: bool = False,
) -> AssumptionLines:
    """What `account_subjects`' figures rest on, in the order `uldp subject` prints them.

    The holdings are read from the file `holdings`, or `subject_items` are spread over the
    members (`distribution`, `alpha`), or `subject_members` members (None: all) hold
    `items_per_member` items each; `group`: LocalGroupDP noise was calibrated too.
    The mechanism is `run.mechanism`'s; an "algorithm" line names it unless it is the default
    HiGradAvgDP (whose block is as it was before the other algorithms were accounted).
    """
    accounting = {"accountant": accountant, "conversion": conversion, "orders": orders}
    how = "RDP curves added" if uses_rdp(accounting["accountant"]) else "one composed PLD"
    theorem = "Theorem 3.8" if run.mechanism == "higradavgdp" else "as Theorem 3.8 has it for HiGradAvgDP"
    out = {
        "run": (
            f"N = {run.members} members, s = {run.per_round} per round, R = {run.rounds} rounds, "
            f"T = {run.local_steps} local mini-batches, item rate q = {run.q:g}, "
            f"sigma = {run.sigma:g}"
        ),
    }
    if run.mechanism != "higradavgdp":
        out["algorithm"] = ALGORITHM[run.mechanism]
    out |= {
        "neighbouring": "every item of one subject added or removed, wherever held (Definition 2.3)",
        "local guarantee": (
            f"per member, locally enforced in the paper's sense ({theorem}): the subject's "
            "items at one member change, every other member's data fixed; a member's "
            "updates carry the global model, which depends on the subject's items at the "
            "other members, so it is a Definition 2.3 (subject-level) bound only for a "
            "subject held by one member (the federation-wide rows bound the others)"
        ),
        "local mechanism": LOCAL_MECHANISM[run.mechanism],
    }
    if run.mechanism == "userldp":
        out["user-level LDP"] = (
            "per member (Definition 3.1, Theorem 3.3): its whole data set replaced by any other, "
            "R x T Gaussian steps of multiplier sigma / 2 (two clipped batch gradients differ by "
            "<= 2C), no sampling amplification (every mini-batch is the member's); it implies "
            "subject-level DP at that member for any subject (Theorem 3.1)"
        )
    out |= {
        "member selection": (
            "no amplification: the server selects the members and knows who took part; "
            "a member may take part in every round"
        ),
        "federation-wide": (
            "horizontal composition (Theorem 3.9), worst case: every round the "
            "min(s, k) holders with most items take part; their mechanisms are composed "
            f"exactly ({how})"
        ),
        "rule of thumb": (
            "Theorem 3.10's R/sqrt(s) rounds is a heuristic from epsilon ~ sqrt(steps), "
            "not a bound; the exact composition is shown beside it"
        ),
        "delta": f"{delta:g}",
        "accounting": accounting_label(**accounting),
    }
    if uses_rdp(accounting["accountant"]):
        out["orders"] = orders_label(accounting["orders"])
    if holdings is not None:
        out["holdings"] = (
            f"from {holdings}; epsilons of the worst subject at R rounds (per subject in "
            "JSON); round limits and rule of thumb hold for every subject (the least "
            "over their holdings)"
        )
    elif subject_items is not None:
        shape = "uniform" if distribution == "uniform" else f"power, alpha = {alpha:g}"
        out["holdings"] = (
            f"{subject_items} items spread over the members ({shape}, expected shares "
            "rounded): a model of the spread, not its worst case"
        )
    else:
        k = subject_members or run.members
        out["holdings"] = f"{k} member(s) hold {items_per_member} item(s) each" + (
            " (default: every member holds the subject, one item each; not a worst case over items)"
            if subject_members is None
            else ""
        )
    if group:
        out["LocalGroupDP"] = (
            "per member: sigma_Z for item-level (E/Z, Delta/(Z e^((Z-1)E/Z))) over "
            "R x T steps at rate q (Corollary 3.5) gives (E, Delta) at one member for "
            "a subject with at most Z items there (locally enforced; it composes "
            "across the members holding the subject like the rows above)"
        )
    out["bound"] = "every epsilon is an upper bound at this delta under these assumptions"
    return AssumptionLines(tuple(out.items()))
