"""`uldp-group`: ULDP-GROUP-k (ULDP-FL Algorithm 2, Theorem 2).

Flags B keep at most k records of every user across all silos (line 8), drawn once at random
and kept for every round (§3.3: "these flags must be consistent across all rounds"); k is given,
or `max` / `median` of the records per user (§5.1). Each silo then runs DP-SGD [Abadi et al.,
Algorithm 1] on its kept records D'_s: ceil(Q / gamma_s) steps per round, each Poisson-sampling
the kept records with rate gamma_s = min(1, batch / |D_s|), clipping every record's gradient to
C, adding N(0, sigma^2 C^2) to the sum and dividing by the lot size `batch` (fixed, as Abadi et
al.'s L: dividing by gamma_s |D'_s| instead would scale the noise of a small silo by 1/|D'_s|
and reveal that count in the update). The server averages:
x_{t+1} = x_t + eta_g / |S| sum_s Delta_t^s.

gamma_s and the steps come from the silo's size |D_s| before bounding (public, what
`uldp account / calibrate --silo-sizes` are given), not from the kept size |D'_s|: every kept
record is then sampled at gamma_s for the same steps whichever records the random flags keep, so
the guarantee (and a sigma calibrated for it) does not depend on the draw (issue 11 point 12;
with |D'_s| the same settings printed 37.4 or 44.1 depending on the draw). A silo is sampled at
the same rate as its full data would be; it just holds fewer records.

Accounting (`group_plan`): DP-SGD with record sampling rate gamma_s and Q local epochs per round
is ceil(Q / gamma_s) steps per round; silos hold disjoint records, so the federation's
record-level RDP is the maximum over silos (§D.2); flags B keep at most k records per user, and
group privacy of k records gives user-level DP (Proposition 1). User sampling, if asked, only
removes users' records from a round; it is not credited.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from uldp.errors import InvalidParameter

from .dp_sgd import dp_sgd
from .registry import AlgorithmSpec, PlanInputs
from .server import SiloAveraging

if TYPE_CHECKING:
    import numpy as np
    import torch

    from uldp.accountants.events import Mechanism
    from uldp.accountants.plan import Plan

    from .base import Context, RoundPlan, SiloData, SiloDelta, TrainConfig


def group_plan(inputs: PlanInputs) -> Plan:
    """Per silo, T ceil(Q / gamma_s) DP-SGD steps; group privacy of k records (Theorem 2)."""
    # Imported here: `uldp train --help` lists the algorithms without loading the accountants.
    from uldp.accountants.events import ParallelSilos, SubsampledGaussian
    from uldp.accountants.plan import Plan, dp_sgd_fraction, dp_sgd_steps

    sigma, rounds, k, local_epochs = inputs.sigma, inputs.rounds, inputs.k, inputs.local_epochs
    batch_size, record_q, silo_sizes = inputs.batch_size, inputs.record_q, inputs.silo_sizes
    if k is None or k < 1:
        raise InvalidParameter("uldp-group needs --k, the most records kept per user (k >= 1)")
    if local_epochs < 1:
        raise InvalidParameter(f"local epochs must be >= 1, got {local_epochs}")
    if (batch_size is None) == (record_q is None):
        raise InvalidParameter(
            "uldp-group needs exactly one of --batch-size (with --silo-sizes) or --record-q"
        )
    if record_q is not None:
        if not 0 < record_q <= 1:
            raise InvalidParameter(f"record-q must be in (0, 1], got {record_q}")
        exact: list[float | Fraction] = [record_q] * (inputs.silos or 1)
        sampling = f"Poisson, gamma = {record_q:g} in every silo"
    else:
        if silo_sizes is None:
            raise InvalidParameter("--batch-size needs --silo-sizes (the record count of each silo)")
        if batch_size is None or batch_size < 1:
            raise InvalidParameter(f"batch size must be >= 1, got {batch_size}")
        exact = [dp_sgd_fraction(batch_size, n) for n in silo_sizes]  # the steps count exactly
        sampling = (
            f"Poisson, gamma_s = min(1, B / |D_s|) with B = {batch_size}, |D_s| = "
            f"{', '.join(str(n) for n in silo_sizes)}: "
            f"gamma_s = {', '.join(f'{float(g):.4g}' for g in exact)}"
        )
    mechanisms = tuple(
        SubsampledGaussian(sigma, float(g), rounds * dp_sgd_steps(local_epochs, g)) for g in exact
    )
    unique = tuple(dict.fromkeys(mechanisms))
    mechanism: Mechanism = unique[0] if len(unique) == 1 else ParallelSilos(unique)
    steps = ", ".join(str(m.steps) for m in unique)
    assumptions = {
        "algorithm": "uldp-group (Theorem 2, group privacy of k records)",
        "noise": "DP-SGD per silo, per-record clipping C, noise N(0, sigma^2 C^2) per step",
        "record sampling": sampling,
        "mechanism": (
            f"per silo T ceil(Q / gamma_s) steps with T = {rounds}, Q = {local_epochs}: {steps} "
            f"steps of a subsampled Gaussian with noise multiplier {sigma:g}"
        ),
        "silos": (
            "disjoint records: record-level RDP is the maximum over silos (parallel composition); "
            + (
                "the PLD group bound accounts each silo's own mechanism and takes the worst split "
                "of the k records over the silos"
                if len(unique) > 1
                else "the PLD group bound counts the k records in one silo (no split is worse)"
            )
        ),
        "contribution bound": (
            f"flags B keep at most k = {k} records per user across all silos; gamma_s and the "
            "steps come from the silo sizes before bounding, so the guarantee holds for every "
            "draw of the flags"
        ),
        "neighbouring": "add or remove up to k records of one user",
    }
    if inputs.user_q < 1:
        assumptions["user sampling"] = "not used by uldp-group (Algorithm 2 has none)"
    return Plan("uldp-group", mechanism, k, assumptions)


def resolve_group_k(group_k: int | str, records_per_user: np.ndarray) -> int:
    """k as an integer: given, or the max / median of N_u over users with records (at least 1)."""
    import numpy as np

    if not isinstance(group_k, str):
        if group_k < 1:
            raise InvalidParameter(f"group-k must be >= 1, got {group_k}")
        return int(group_k)
    present = records_per_user[records_per_user > 0]
    if len(present) == 0:
        return 1
    if group_k == "max":
        return int(present.max())
    if group_k == "median":
        return max(1, int(math.ceil(np.median(present))))
    raise InvalidParameter(f"group-k must be an integer >= 1, max or median, got {group_k!r}")


def contribution_flags(users: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Flags b: True for the records kept, at most k per user over all silos, chosen at random.

    `users` lists the owner of every training record of the federation (all silos together).
    """
    from ..per_user import ranks_within_user

    ranks = ranks_within_user(users, rng.random(len(users)))
    return ranks < k


class UldpGroup(SiloAveraging):
    name = "uldp-group"

    def __init__(self, k: int, kept: list[np.ndarray]) -> None:
        self.k = k
        self.kept = dict(enumerate(kept))  # silo -> bool mask over the silo's records
        # |D_s| before bounding: they set gamma_s and the steps, whatever the flags keep.
        self.sizes = [len(m) for m in kept]

    @classmethod
    def prepare(cls, silos: list[SiloData], cfg: TrainConfig) -> UldpGroup:
        import numpy as np

        if not silos:  # a silo's own copy (trainers/flower): the server sends its flags
            return cls(1, [])
        owners = np.concatenate([s.users for s in silos])
        n_users = silos[0].n_users if silos else 0
        k = resolve_group_k(cfg.group_k, np.bincount(owners, minlength=n_users))
        flags = contribution_flags(
            owners, k, np.random.default_rng(None if cfg.noise_seed is None else [cfg.noise_seed, 7, 1])
        )
        bounds = np.cumsum([0] + [s.size for s in silos])
        return cls(k, [flags[a:b] for a, b in zip(bounds[:-1], bounds[1:])])

    def kept_sizes(self) -> list[int]:
        return [int(m.sum()) for _, m in sorted(self.kept.items())]

    def silo_state(self, silo: int) -> dict[str, np.ndarray]:
        """Silo s's flags (which of its records it keeps) and k: drawn by the server over all
        silos' record owners before round 1, the same for every round (§3.3)."""
        import numpy as np

        return {"kept": self.kept[silo], "k": np.asarray([self.k], dtype=np.int64)}

    def load_silo_state(self, silo: int, state: dict[str, np.ndarray]) -> None:
        import numpy as np

        if set(state) != {"kept", "k"}:
            raise ValueError(f"uldp-group's silo state holds kept and k, got {sorted(state)}")
        self.kept[silo] = np.asarray(state["kept"], dtype=bool)
        self.k = int(state["k"][0])

    def plan_params(self, cfg: TrainConfig, rounds: int, n_silos: int) -> dict[str, Any]:
        # The sizes before bounding |D_s| set each silo's sampling rate and steps (so the
        # guarantee does not depend on the flags' draw); silos without records run nothing.
        return dict(
            sigma=cfg.sigma,
            rounds=rounds,
            silo_sizes=[n for n in self.sizes if n > 0],
            batch_size=cfg.batch_size,
            local_epochs=cfg.local_epochs,
            k=self.k,
            user_q=cfg.user_q,
        )

    def account_flags(self, cfg: TrainConfig, n_silos: int) -> list[str]:
        sizes = ",".join(str(n) for n in self.sizes if n > 0)
        return [
            f"--silo-sizes {sizes} --batch-size {cfg.batch_size} "
            f"--local-epochs {cfg.local_epochs} --group-k {self.k} --group-method rdp"
        ]

    def run_assumptions(self, cfg: TrainConfig, n_silos: int) -> dict[str, str]:
        used = 1 << (self.k - 1).bit_length()
        rounding = (
            f", accounted as a group of {used} (Lemma 6 covers powers of two)" if used != self.k else ""
        )
        return {
            "group size": (
                f"k = {self.k} ({cfg.group_k}){rounding}; kept records per silo "
                f"{', '.join(str(n) for n in self.kept_sizes())} of "
                f"{', '.join(str(n) for n in self.sizes)} (the sampling rate and steps come from "
                "the sizes before bounding, so the epsilon is the same for every draw of the flags)"
            ),
            "flags": (
                "chosen from the data (k from max/median, and which records to keep) without "
                "privacy, as the paper's baseline does (§3.3); the epsilon covers the training only"
            ),
        }

    def summary_fields(self) -> dict[str, object]:
        return {"group_k": self.k}

    def silo_update(
        self,
        silo: SiloData,
        params: dict[str, torch.Tensor],
        plan: RoundPlan,
        ctx: Context,
        cfg: TrainConfig,
        rng: np.random.Generator,
    ) -> SiloDelta:
        import numpy as np

        from uldp.accountants.plan import dp_sgd_fraction, dp_sgd_rate, dp_sgd_steps

        from ..per_user import flat_parameters
        from .base import SiloDelta, zero_delta

        kept = self.kept[silo.silo]
        if len(kept) != silo.size:
            raise ValueError(f"silo {silo.silo}: {len(kept)} flags for {silo.size} records")
        if len(kept) == 0:
            return SiloDelta(silo.silo, zero_delta(params, ctx.n_params))
        # |D_s|, not the kept count: the schedule the accountant counts does not depend on the
        # flags (a silo whose records were all dropped still adds its noise every step).
        gamma = dp_sgd_rate(cfg.batch_size, len(kept))
        # The schedule the accountant counts, in the counts' exact ratio.
        steps = dp_sgd_steps(cfg.local_epochs, dp_sgd_fraction(cfg.batch_size, len(kept)))
        usable = np.flatnonzero(kept & plan.sampled[silo.users])
        local = dp_sgd(
            ctx,
            params,
            silo.x,
            silo.y,
            usable,
            gamma=gamma,
            lot_size=cfg.batch_size,
            steps=steps,
            cfg=cfg,
            rng=rng,
            silo=silo.silo,
            canary=silo.canary,
        )
        return SiloDelta(silo.silo, flat_parameters(local) - flat_parameters(params))


def build(cfg: TrainConfig, silos: list[SiloData], task: str) -> UldpGroup:
    """UldpGroup with its flags drawn for these silos; refuses survival data (no per-record loss)."""
    if task == "survival":
        raise InvalidParameter(
            "uldp-group clips per-record gradients, and the Cox partial likelihood "
            "does not split into per-record losses; use another --algo for survival data"
        )
    return UldpGroup.prepare(silos, cfg)


SPEC = AlgorithmSpec(
    name="uldp-group",
    help="ULDP-GROUP-k, DP-SGD in every silo on at most k "
    "records per user, group privacy (Algorithm 2, Theorem 2).",
    build=build,
    plan=group_plan,
    options=frozenset(("sigma", "clip", "lr", "global_lr", "local_epochs", "batch_size", "group_k")),
    # Algorithm 2 samples records, not users: no user_q.
    plan_options=frozenset(("silos", "silo_sizes", "batch_size", "record_q", "local_epochs", "k")),
    server_reads_owners=True,  # the flags keep at most k records per user across all silos
)
