"""`default`: FedAVG with global and local learning rates, no privacy (ULDP-FL §5.1, [55]).

Each silo runs Q epochs of minibatch SGD from x_t on its records; the server moves
x_{t+1} = x_t + eta_g / |S| sum_s Delta_t^s (Algorithm 1 line 6 without clipping or noise).
Not private: it has no plan, so `uldp account` and `uldp calibrate` do not offer it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .registry import AlgorithmSpec
from .server import SiloAveraging

if TYPE_CHECKING:
    import numpy as np
    import torch

    from .base import Context, RoundPlan, SiloData, SiloDelta, TrainConfig


def silo_sgd_delta(
    silo: SiloData,
    params: dict[str, torch.Tensor],
    keep: np.ndarray,
    ctx: Context,
    cfg: TrainConfig,
    rng: np.random.Generator,
) -> torch.Tensor:
    """Delta x_s - x_t after Q epochs of SGD on the silo's records selected by `keep`."""
    import numpy as np
    import torch

    from ..per_user import flat_parameters
    from .base import sgd_epochs, zero_delta

    if not keep.any():
        return zero_delta(params, ctx.n_params)
    idx = torch.as_tensor(np.flatnonzero(keep))
    local = sgd_epochs(
        ctx.model,
        params,
        silo.x[idx],
        silo.y[idx],
        ctx.loss_fn,
        epochs=cfg.local_epochs,
        lr=cfg.lr,
        batch_size=cfg.batch_size,
        rng=rng,
    )
    return flat_parameters(local) - flat_parameters(params)


class FedAvg(SiloAveraging):
    """Non-private baseline; user sampling (if asked) only thins the records trained on."""

    name = "default"

    def silo_update(
        self,
        silo: SiloData,
        params: dict[str, torch.Tensor],
        plan: RoundPlan,
        ctx: Context,
        cfg: TrainConfig,
        rng: np.random.Generator,
    ) -> SiloDelta:
        from .base import SiloDelta

        return SiloDelta(silo.silo, silo_sgd_delta(silo, params, plan.sampled[silo.users], ctx, cfg, rng))


def build(cfg: TrainConfig, silos: list[SiloData], task: str) -> FedAvg:
    return FedAvg()


SPEC = AlgorithmSpec(
    name="default",
    help="FedAVG, no privacy (the non-private baseline, §5.1).",
    build=build,
    options=frozenset(("lr", "global_lr", "local_epochs", "batch_size")),  # no clipping, no noise
)
