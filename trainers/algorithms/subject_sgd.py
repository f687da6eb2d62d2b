"""What the subject-level algorithms share (Marathe & Kanani §3): a member's T local mini-batches,
Poisson-sampled, and the server's plain average of the members' models.

Every member (silo) trains every round (the paper's 16 of 16; the accounting takes each member
to take part in every round, the worst case of any selection, §3.5). A member runs T =
`--local-steps` steps; each keeps every item independently with probability q (`item_q`, one
rate for every member), so a subject with m items there is drawn at 1 - (1 - q)^m, as
`accountants.subject.horizontal` accounts it. The noised sum is divided by the member's expected batch
q |D_i|, fixed (the realised batch size would reveal it). What differs between the algorithms is
how a mini-batch becomes one noised gradient (`combine`):

- `item` (LocalItemDP, LocalGroupDP; Algorithm 2 lines 4-10): clip each item's gradient to C,
  sum, add N(0, sigma^2 C^2), divide by the expected batch (DP-SGD, Abadi et al.).
- `subject` (HiGradAvgDP, Algorithm 3 lines 4-12): clip each item's gradient to C, average the
  clipped gradients of each subject in the batch, sum those averages, add N(0, sigma^2 C^2),
  divide by the expected batch. The per-subject average is one weighted sum (each item weighted
  by 1 / its subject's count in the batch): segment sums, no loop over subjects.
- `batch` (UserLDP, Algorithm 1 lines 3-10): the mini-batch's mean-loss gradient clipped to C
  as a whole, plus N(0, sigma^2 C^2); theta <- theta - eta g~ (no division, the gradient is a
  mean already).

The server averages: theta <- theta + eta_g / N sum_i (theta_i - theta) (line 18 of each
algorithm, theta = 1/s sum_i theta_i at eta_g = 1).

torch and numpy are imported inside the functions: `uldp account` reads the registry.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from uldp.errors import InvalidParameter

from .server import SiloAveraging

if TYPE_CHECKING:
    import numpy as np
    import torch

    from .base import Context, RoundPlan, SiloData, SiloDelta, TrainConfig

COMBINES = ("item", "subject", "batch")


def subject_steps(
    ctx: Context,
    params: dict[str, torch.Tensor],
    silo: SiloData,
    *,
    combine: str,
    q: float,
    steps: int,
    cfg: TrainConfig,
    rng: np.random.Generator,
    stats: Counter | None = None,
) -> dict[str, torch.Tensor]:
    """`steps` noised mini-batch steps of one member on its items; `stats` (when given) counts
    each batch's largest subject group ("z", Fig. 1(c)) and its distinct subjects ("subjects",
    Fig. 1(d)), as (kind, value) keys."""
    import numpy as np
    import torch
    from torch.func import functional_call, grad

    from ..per_record import per_record_gradients
    from .base import apply_delta

    if combine not in COMBINES:
        raise InvalidParameter(f"combine must be one of {', '.join(COMBINES)}, got {combine!r}")
    model, loss_fn = ctx.model, ctx.loss_fn
    lot = q * silo.size  # the expected batch, public: q and |D_i|

    def batch_loss(p, xb, yb):
        return loss_fn(
            functional_call(model, p, (xb,)), yb, torch.ones(len(xb), dtype=xb.dtype, device=xb.device)
        )

    per_item = per_record_gradients(model, loss_fn)
    whole = grad(batch_loss)
    local = {k: v.detach().clone() for k, v in params.items()}
    like = next(iter(local.values()))
    for _ in range(steps):
        chosen = np.flatnonzero(rng.random(silo.size) < q)
        noise = torch.as_tensor(
            rng.normal(0.0, cfg.sigma * cfg.clip, size=ctx.n_params), dtype=like.dtype, device=like.device
        )
        owners = silo.users[chosen]
        if stats is not None and len(chosen):
            _, counts = np.unique(owners, return_counts=True)
            stats[("z", int(counts.max()))] += 1
            stats[("subjects", len(counts))] += 1
        total = noise
        if len(chosen):
            idx = torch.as_tensor(chosen, device=silo.x.device)
            if combine == "batch":
                g = whole(local, silo.x[idx], silo.y[idx])
                signal = batch_signal(torch.cat([v.reshape(-1) for v in g.values()]), cfg.clip)
            else:
                grads = per_item(local, silo.x[idx], silo.y[idx])
                flat = torch.cat([g.reshape(len(chosen), -1) for g in grads.values()], dim=1)
                signal = item_signal(flat, cfg.clip, owners if combine == "subject" else None)
            total = signal + noise
        # UserLDP steps by its noised batch gradient (a mean already); the others divide the
        # noised sum by the expected batch.
        local = apply_delta(local, total, -cfg.lr if combine == "batch" else -cfg.lr / lot)
    return local


def item_signal(flat: torch.Tensor, clip: float, owners: np.ndarray | None = None) -> torch.Tensor:
    """The sum of a batch's per-item gradients (rows of `flat`), each clipped to `clip`; with
    `owners`, each subject's clipped gradients averaged first (HiGradAvgDP, Algorithm 3 lines
    9-11: a subject then adds at most `clip` to the sum, Lemma 3.7)."""
    import torch

    norms = torch.linalg.vector_norm(flat, dim=1, keepdim=True)
    factor = torch.clamp(clip / norms.clamp(min=1e-12), max=1.0)
    if owners is not None:
        factor = factor / subject_counts(owners, flat)
    return (flat * factor).sum(dim=0)


def batch_signal(gradient: torch.Tensor, clip: float) -> torch.Tensor:
    """UserLDP (Algorithm 1 line 6): the whole mini-batch's gradient clipped to `clip`."""
    import torch

    norm = torch.linalg.vector_norm(gradient)
    return gradient * torch.clamp(clip / norm.clamp(min=1e-12), max=1.0)


def subject_counts(owners: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    """(b, 1): for each item of the batch, how many items of its subject the batch holds."""
    import numpy as np
    import torch

    _, inverse, counts = np.unique(owners, return_inverse=True, return_counts=True)
    return torch.as_tensor(counts[inverse], dtype=like.dtype, device=like.device).unsqueeze(1)


class SubjectSgd(SiloAveraging):
    """A subject-level algorithm: every member trains every round with `combine`; the server
    averages (`SiloAveraging`, no user sampling). Its run is accounted per subject
    (`trainers.subject_accounting`), not by a user-level plan."""

    def __init__(self, name: str, combine: str) -> None:
        if combine not in COMBINES:
            raise InvalidParameter(f"combine must be one of {', '.join(COMBINES)}, got {combine!r}")
        self.name = name
        self.combine = combine
        self.stats: Counter = Counter()  # in this process only: a member's batches stay its own

    def silo_update(
        self,
        silo: SiloData,
        params: dict[str, torch.Tensor],
        plan: RoundPlan,
        ctx: Context,
        cfg: TrainConfig,
        rng: np.random.Generator,
    ) -> SiloDelta:
        from ..per_user import flat_parameters
        from .base import SiloDelta, zero_delta

        if cfg.item_q is None:
            raise InvalidParameter(f"{self.name} needs the items' sampling rate (TrainConfig.item_q)")
        if silo.size == 0:
            return SiloDelta(silo.silo, zero_delta(params, ctx.n_params))
        local = subject_steps(
            ctx,
            params,
            silo,
            combine=self.combine,
            q=cfg.item_q,
            steps=cfg.local_steps,
            cfg=cfg,
            rng=rng,
            stats=self.stats,
        )
        return SiloDelta(silo.silo, flat_parameters(local) - flat_parameters(params))

    def plan_params(self, cfg: TrainConfig, rounds: int, n_silos: int) -> dict[str, Any]:
        return {}  # accounted per subject (trainers/subject_accounting.py)

    def account_flags(self, cfg: TrainConfig, n_silos: int) -> list[str]:
        return []

    def run_assumptions(self, cfg: TrainConfig, n_silos: int) -> dict[str, str]:
        what = {
            "item": "each item's gradient clipped to C, summed",
            "subject": "each item's gradient clipped to C, averaged per subject in the batch, the "
            "averages summed (Lemma 3.7: a subject moves the sum by <= C)",
            "batch": "the mini-batch's gradient clipped to C as a whole (Lemma 3.2)",
        }[self.combine]
        divided = "" if self.combine == "batch" else ", divided by the member's expected batch q |D_i|"
        return {
            "training": (
                f"every member, every round: {cfg.local_steps} mini-batches, each item kept with "
                f"probability q = {cfg.item_q:.4g} (Poisson); {what}; plus N(0, (sigma C)^2) = std "
                f"{cfg.sigma * cfg.clip:.4g}{divided}"
            ),
            "aggregation": (
                "the server averages the members' models (theta = 1/N sum_i theta_i at global lr 1), "
                "in the clear: each member enforces its guarantee locally and trusts no one (§3)"
            ),
        }

    def summary_fields(self) -> dict[str, object]:
        if not self.stats:
            return {}
        out: dict[str, object] = {}
        for kind in ("z", "subjects"):
            seen = {value: n for (k, value), n in self.stats.items() if k == kind}
            if seen:
                out[f"batch_{kind}"] = {str(v): seen[v] for v in sorted(seen)}
        return out


def check_task(name: str, task: str) -> None:
    if task == "survival":
        raise InvalidParameter(
            f"{name} clips per-item gradients, and the Cox partial likelihood does not split "
            "into per-item losses; use another --algo for survival data"
        )
