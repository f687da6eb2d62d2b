"""`rpdp`: rPDP-FL, DP-SGD with a sampling rate per record (rPDP-FL slides ch. 3 I, Algorithm 2).

Before round 1 every record j gets its sampling rate q_j from its own budget (line 2), by the
exact inverse `uldp personalize` uses (`trainers.rates.personalize_data`). Every round the
server Poisson-samples the silos with rate lambda (`--silo-q`, line 5); each sampled silo runs
tau = `--local-steps` DP-SGD steps (lines 7-10), each keeping record j with probability q_j
(one vectorised draw, `dp_sgd`), clipping every kept record's gradient to C, adding
N(0, sigma^2 C^2) to the sum and dividing by the silo's expected batch sum_j q_j (fixed, as
Opacus's `expected_batch_size`, which the reference code uses; the realised batch would leak).
The server averages the sampled silos' deltas with equal weights (slides ch. 2 I, p_k = 1/K, over
the silos that took part; the reference code weights them by their sizes):
x_{t+1} = x_t + eta_g / |C^t| sum_{s in C^t} Delta_s.

Privacy is per record: `accountants.personalized.record_spend.RecordSampledFL` at the record's q_j (slides
ch. 3 II), printed per budget tier for both threat models by `trainers.personal_accounting`. The spec has
no user-level plan (`record_level`): `uldp personalize` is its accounting command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uldp.errors import InvalidParameter

from .registry import AlgorithmSpec
from .server import BaseAlgorithm

if TYPE_CHECKING:
    import numpy as np
    import torch

    from .base import Context, RoundPlan, SiloData, SiloDelta, TrainConfig


class RecordSampledDpSgd(BaseAlgorithm):
    """rpdp and unidp: the same rounds; they differ only in the rates q the records were given
    (`trainers.rates`): each its own (rpdp), or one rate for all (unidp)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def plan_round(self, round: int, ctx: Context, cfg: TrainConfig, rng: np.random.Generator) -> RoundPlan:
        import numpy as np

        from .base import RoundPlan

        # Algorithm 2 line 5: client-level Poisson sampling; users are not sampled.
        silos = np.ones(ctx.n_silos, dtype=bool) if cfg.silo_q >= 1 else rng.random(ctx.n_silos) < cfg.silo_q
        return RoundPlan(round, np.ones(ctx.n_users, dtype=bool), None, silos)

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

        from ..per_user import flat_parameters
        from .base import SiloDelta, zero_delta
        from .dp_sgd import dp_sgd

        if silo.q is None or len(silo.q) != silo.size:
            raise ValueError(f"silo {silo.silo}: {self.name} needs one sampling rate per record")
        lot = float(silo.q.sum())
        taking_part = plan.silos is None or bool(plan.silos[silo.silo])
        if not taking_part or lot <= 0:  # not sampled, or every record excluded (q = 0)
            return SiloDelta(silo.silo, zero_delta(params, ctx.n_params))
        local = dp_sgd(
            ctx,
            params,
            silo.x,
            silo.y,
            np.arange(silo.size),
            gamma=silo.q,
            lot_size=lot,
            steps=cfg.local_steps,
            cfg=cfg,
            rng=rng,
            silo=silo.silo,
            canary=silo.canary,
        )
        return SiloDelta(silo.silo, flat_parameters(local) - flat_parameters(params))

    def aggregate(
        self,
        params: dict[str, torch.Tensor],
        messages: list[SiloDelta],
        plan: RoundPlan,
        ctx: Context,
        cfg: TrainConfig,
    ) -> dict[str, torch.Tensor]:
        import torch

        from .base import apply_delta

        taking_part = ctx.n_silos if plan.silos is None else int(plan.silos.sum())
        if taking_part == 0:
            return params  # no silo sampled: the model stays (and nothing was released)
        total = torch.stack([m.delta for m in messages]).sum(dim=0)  # the others sent zeros
        return apply_delta(params, total, cfg.global_lr / taking_part)

    def plan_params(self, cfg: TrainConfig, rounds: int, n_silos: int) -> dict[str, Any]:
        return {}  # accounted per record (trainers/personal_accounting.py), not by a user-level plan

    def account_flags(self, cfg: TrainConfig, n_silos: int) -> list[str]:
        return []

    def run_assumptions(self, cfg: TrainConfig, n_silos: int) -> dict[str, str]:
        return {
            "noise": (
                f"every DP-SGD step adds N(0, (sigma C)^2) = std {cfg.sigma * cfg.clip:.4g} to the "
                "sum of the kept records' clipped gradients, divided by the silo's expected batch "
                "sum_j q_j"
            ),
            "aggregation": (
                "the server averages the sampled silos' deltas with equal weights (p_k = 1/K); "
                "record-level DP needs no secure aggregation: a record is in one silo, and the "
                "epsilon covers every message its silo sends"
            ),
        }

    def summary_fields(self) -> dict[str, object]:
        return {}


def check_task(name: str, task: str) -> None:
    if task == "survival":
        raise InvalidParameter(
            f"{name} clips per-record gradients, and the Cox partial likelihood does not split "
            "into per-record losses; use another --algo for survival data"
        )


def build(cfg: TrainConfig, silos: list[SiloData], task: str) -> RecordSampledDpSgd:
    check_task("rpdp", task)
    return RecordSampledDpSgd("rpdp")


SPEC = AlgorithmSpec(
    name="rpdp",
    help="rPDP-FL, DP-SGD with each record sampled at the rate its own budget allows "
    "(rPDP-FL Algorithm 2; --distribution, --epsilon-csv or --epsilon-column).",
    build=build,
    options=frozenset(("sigma", "clip", "lr", "global_lr", "local_steps", "silo_q")),
    plan_options=frozenset(),
    record_level=True,
)
