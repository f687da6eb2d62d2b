"""What the trainers share on the server side: the run's report defaults and silo averaging.

Kept apart from `base` (the settings and messages, all dataclasses) so that the algorithm
modules can subclass these at import time while `uldp account`, which only reads their specs,
never builds those dataclasses; `base`, torch and numpy are imported inside the methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import torch

    from .base import Context, RoundPlan, SiloData, SiloDelta, TrainConfig


class BaseAlgorithm:
    """What a run reports about its algorithm, by default: one user-level Gaussian per round.

    `plan_params` are the keyword arguments of `plan_algorithm` for `rounds` rounds of this run,
    `account_flags` the same settings as `uldp account` flags (the run prints that command, which
    gives its epsilon); `run_assumptions` adds to the plan's assumptions what only the run knows
    (the noise std, the weights), `summary_fields` to the run's summary.

    When silos are separate parties (trainers/flower), three more things are explicit:
    `reply_type` is the message class its silos send (anything else is refused by name), and
    `silo_state(s)` is what the server decided before round 1 that silo s needs to run its
    update (uldp-group's flags), which the silo's copy of the algorithm takes in
    `load_silo_state`. The silo's copy is built by the registered factory with no silos.
    """

    #: Its round is message phases that `aggregate` drives through the silos it was bound to
    #: (`bind_silos`, `silo_phase`), not one `silo_update` per silo (dp-fedavg-robust: upload,
    #: then calibration, with secure aggregation's steps around them).
    phased = False

    def bind_silos(self, silos: Any) -> None:
        """Where its phases run (`runner.Silos`: in process, or Flower); phased trainers keep it."""

    def silo_phase(
        self,
        silo: SiloData,
        name: str,
        round: int,
        payload: dict[str, np.ndarray],
        store: dict[str, np.ndarray],
        ctx: Context,
        cfg: TrainConfig,
        rng: np.random.Generator,
    ) -> dict[str, np.ndarray]:
        """A silo's answer to phase `name` of a round; `store` keeps what it needs between phases."""
        raise ValueError(f"{type(self).__name__} runs no phase {name!r}")

    def round_fields(self, plan: RoundPlan) -> dict[str, object]:
        """What a round's row says of who took part."""
        out: dict[str, object] = {"sampled_users": int(plan.sampled.sum())}
        if plan.silos is not None:
            out["sampled_silos"] = int(plan.silos.sum())
        return out

    def spent(self, cfg: TrainConfig) -> tuple[float, float | None]:
        """(released model's, server's) epsilon of the rounds run so far, for an `observed`
        algorithm (registry); the others are accounted by their plan."""
        raise NotImplementedError(f"{type(self).__name__} is accounted by its plan")

    def restore(self, history: list[dict]) -> None:
        """Take back what the rows of a checkpoint's rounds say (an observed algorithm's rounds)."""

    def reply_type(self, cfg: TrainConfig) -> type:
        from .base import SiloDelta

        return SiloDelta

    def silo_state(self, silo: int) -> dict[str, np.ndarray]:
        return {}

    def load_silo_state(self, silo: int, state: dict[str, np.ndarray]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} keeps no silo state, got {sorted(state)}")

    def plan_params(self, cfg: TrainConfig, rounds: int, n_silos: int) -> dict[str, Any]:
        return dict(
            sigma=cfg.sigma, rounds=rounds, user_q=cfg.user_q, silos=n_silos, local_epochs=cfg.local_epochs
        )

    def account_flags(self, cfg: TrainConfig, n_silos: int) -> list[str]:
        flags = [f"--silos {n_silos}"]
        if cfg.user_q < 1:
            flags.append(f"--user-q {cfg.user_q:g}")
        return flags

    def run_assumptions(self, cfg: TrainConfig, n_silos: int) -> dict[str, str]:
        return {}

    def summary_fields(self) -> dict[str, object]:
        return {}


class SiloAveraging(BaseAlgorithm):
    """The server side shared by the algorithms whose silos send one delta each (default,
    uldp-naive, uldp-group): users Poisson-sampled with `user_q`, and
    x_{t+1} = x_t + eta_g / |S| * sum_s Delta_s."""

    def plan_round(self, round: int, ctx: Context, cfg: TrainConfig, rng: np.random.Generator) -> RoundPlan:
        from .base import RoundPlan, sample_users

        return RoundPlan(round, sample_users(ctx.n_users, cfg.user_q, rng), None)

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

        total = torch.stack([m.delta for m in messages]).sum(dim=0)
        return apply_delta(params, total, cfg.global_lr / ctx.n_silos)
