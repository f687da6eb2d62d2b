"""What every algorithm shares: its settings, a silo's data, the round's instructions, and the
messages silos send the server.

Each algorithm is a silo-side update and a server-side aggregation (as a Flower `Strategy`
splits `configure_fit` / client fit / `aggregate_fit`): the server first decides the round
(`RoundPlan`: which users are sampled, each silo's weights w_s), every silo turns the global
model and its own records into one message, and the server turns the messages into the next
global model. Nothing else passes between them, so the encrypted weighting protocol (Protocol 1)
can replace the plaintext aggregation without touching the silo side.

The algorithm modules import this module inside their methods only (its dataclasses cost a few
milliseconds to build), and it imports torch and numpy inside the functions that compute:
`uldp account` reads the algorithms' names and plans without loading any of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from uldp.errors import InvalidParameter

from .faults import FAULTS
from .secure_algorithms import secure_names

if TYPE_CHECKING:
    import numpy as np
    import torch
    from torch import nn

    from uldp.crypto.protocol.sampling import SamplingParams

    from ..models import LossFn
    from ..per_user import LocalTraining
    from .dirac_rows import DiracRows


#: Where a participant of dp-fedavg-robust may drop out: before its upload (Algorithm 2 line 16,
#: the local update) or after it, before its calibration share (line 22; Baek et al. §V-B).
DROPOUT_PHASES = ("upload", "calibration")


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one run (ULDP-FL Table 1)."""

    algo: str
    rounds: int
    sigma: float = 5.0  # noise multiplier
    clip: float = 1.0  # clipping bound C
    local_epochs: int = 1  # Q
    lr: float = 0.05  # local learning rate eta_l
    global_lr: float = 1.0  # global learning rate eta_g
    user_q: float = 1.0  # user-level sub-sampling probability q (Algorithm 4)
    batch_size: int = 32  # silo-level SGD / DP-SGD batch (default, naive, group)
    local_batch_size: int | None = None  # per-user SGD batch (avg / sgd); None: all the user's records
    group_k: int | str = "median"  # uldp-group: int, "max" or "median"
    delta: float = 1e-5
    seed: int = 0  # data allocation, initial model (public choices)
    # Noise, user and record sampling, flags: None draws fresh OS entropy (`secrets`) per run.
    # An integer makes them reproducible, and then anyone who knows it can remove the noise.
    noise_seed: int | None = None
    secure: bool = False  # uldp-avg-w / uldp-sgd-w: Protocol 1 instead of plaintext weighting
    key_bits: int = 3072
    test_keys: bool = False  # small Paillier keys, for tests only
    # --secure: the user sample drawn by oblivious transfer (ULDP-FL §4.1), so that the server
    # does not know it; user_q must then be m / P for P = sampling_slots (`crypto.protocol.sampling`).
    private_sampling: bool = False
    sampling_slots: int = 100
    audit_rate: float = 0.05
    requested_user_q: float | None = None  # the user q asked for, before rounding to m / P
    batched: bool = True  # per-user training vectorised (trainers/per_user.py)
    local_steps: int = 50  # rpdp / unidp: tau DP-SGD steps per round on a sampled silo
    silo_q: float = 1.0  # rpdp / unidp: lambda, Poisson sampling rate of a silo per round
    threat_model: str = "untrusted"  # rpdp: the threat model the rates q are computed for
    # dp-fedavg-robust (Baek et al. 2021, Algorithms 2-3): participants are the silos.
    dropout: float = 0.0  # probability that a sampled participant drops out, i.i.d. per round
    dropout_at: str = "upload"  # where: before its upload, or after it and before calibration
    dropout_schedule: str | None = None  # a CSV (round, participant, at) of the dropouts to replay
    calibration: bool = True  # the noise calibration step (Algorithm 2 lines 20-22)
    min_weight_sum: float | None = None  # n_0 (Algorithm 3); None: shares drawn for n (Algorithm 2)
    n_max: int | None = None  # w_i = min(n_i / n_max, 1); None: every weight 1 (McMahan et al.)
    threshold: int | None = None  # --secure: Shamir's k; None: a majority of each round's sample
    # Subject-level algorithms (Marathe & Kanani): each item's Poisson rate per mini-batch, set by
    # `trainers.subject_accounting.prepare_subject_run` (or the runner, from --batch-size), and
    # the federation-wide epsilon the noise was calibrated to (None: --sigma given).
    item_q: float | None = None
    target_epsilon: float | None = None
    group_budget: float | None = None  # localgroupdp: Corollary 3.5's per-member E behind sigma_Z
    # `uldp audit --break-mechanism` only: a fault the trainers run on purpose (`faults.FAULTS`).
    fault: str | None = None

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise InvalidParameter(f"rounds must be >= 1, got {self.rounds}")
        if not self.sigma > 0:
            raise InvalidParameter(f"sigma must be > 0, got {self.sigma}")
        if not self.clip > 0:
            raise InvalidParameter(f"clip must be > 0, got {self.clip}")
        if not 0 < self.user_q <= 1:
            raise InvalidParameter(f"user-q must be in (0, 1], got {self.user_q}")
        if not 0 < self.delta < 1:
            raise InvalidParameter(f"delta must be in (0, 1), got {self.delta}")
        if self.batch_size < 1:
            raise InvalidParameter(f"batch size must be >= 1, got {self.batch_size}")
        if isinstance(self.group_k, int) and not isinstance(self.group_k, bool):
            if self.group_k < 1:
                raise InvalidParameter(f"group-k must be an integer >= 1, max or median, got {self.group_k}")
        elif self.group_k not in ("max", "median"):
            raise InvalidParameter(f"group-k must be an integer >= 1, max or median, got {self.group_k!r}")
        if self.local_steps < 1:
            raise InvalidParameter(f"local steps must be >= 1, got {self.local_steps}")
        if not 0 < self.silo_q <= 1:
            raise InvalidParameter(f"silo-q must be in (0, 1], got {self.silo_q}")
        if self.threat_model not in ("untrusted", "server"):
            raise InvalidParameter(f"threat model must be untrusted or server, got {self.threat_model!r}")
        if not 0 <= self.dropout < 1:
            raise InvalidParameter(f"dropout rate must be in [0, 1), got {self.dropout}")
        if self.dropout_at not in DROPOUT_PHASES:
            raise InvalidParameter(f"dropout-at must be upload or calibration, got {self.dropout_at!r}")
        if self.min_weight_sum is not None and not self.min_weight_sum > 0:
            raise InvalidParameter(f"min-weight-sum n_0 must be > 0, got {self.min_weight_sum}")
        if self.n_max is not None and self.n_max < 1:
            raise InvalidParameter(f"n-max must be >= 1, got {self.n_max}")
        if self.threshold is not None and self.threshold < 2:
            raise InvalidParameter(
                f"threshold k must be >= 2 (Shamir's (k, n) sharing), got {self.threshold}"
            )
        if self.item_q is not None and not 0 < self.item_q <= 1:
            raise InvalidParameter(f"item q must be in (0, 1], got {self.item_q}")
        if self.target_epsilon is not None and not self.target_epsilon > 0:
            raise InvalidParameter(f"--epsilon must be > 0, got {self.target_epsilon:g}")
        if self.fault is not None and self.fault not in FAULTS:
            raise InvalidParameter(f"fault must be one of {', '.join(FAULTS)}, got {self.fault!r}")
        if self.secure and self.algo not in secure_names():
            raise InvalidParameter(
                f"--secure applies to {' and '.join(secure_names())} (Protocol 1 weighting)"
            )
        if self.private_sampling:
            self.sampling_params()  # refuses P, m and the audit rate it cannot take

    def sampling_params(self) -> SamplingParams:
        """P slots, m = q P real ones and the audit rate of private sampling (--private-sampling)."""
        from uldp.crypto.protocol.sampling import SamplingParams

        from .secure_algorithms import private_sampling_names

        if not self.secure or self.algo not in private_sampling_names():
            raise InvalidParameter(
                "--private-sampling applies to uldp-avg-w and uldp-sgd-w with --secure: Protocol 1 "
                "carries the oblivious transfer"
            )
        real = round(self.user_q * self.sampling_slots)
        if abs(real - self.user_q * self.sampling_slots) > 1e-9 or not 0 < real < self.sampling_slots:
            raise InvalidParameter(
                f"--private-sampling draws at rates m/P in (0, 1): user-q {self.user_q:g} is not one for "
                f"P = {self.sampling_slots} slots"
            )
        return SamplingParams(self.sampling_slots, real, self.audit_rate)

    @property
    def local(self) -> LocalTraining:
        from ..per_user import LocalTraining

        return LocalTraining(self.local_epochs, self.lr, self.local_batch_size)


@dataclass
class SiloData:
    """One silo's training records as tensors, with their users."""

    silo: int
    x: torch.Tensor
    y: torch.Tensor
    users: np.ndarray  # (n,) int64 owner of each record
    n_users: int
    q: np.ndarray | None = None  # (n,) each record's sampling rate (rpdp, unidp), else None
    # (n,) `uldp audit`: each record's canary coordinate in the flat parameters, -1 for the data's
    # own records (trainers/canaries.py); None: no canaries.
    canary: np.ndarray | None = None

    @property
    def size(self) -> int:
        return len(self.users)


@dataclass(frozen=True)
class Context:
    """What both sides know of the setting: the model, its loss, the federation's size."""

    model: nn.Module
    loss_fn: LossFn
    n_users: int
    n_silos: int
    n_params: int
    # (silos, users) n_{s,u}, where this party may know it: the server of an in-process run, or a
    # Flower server whose algorithm needs it (plaintext -w weights, uldp-group's flags). None at a
    # silo (it reads its own records) and on a Flower server under --secure (Protocol 1 hides it).
    counts: np.ndarray | None
    # (users,) each user's own sampling rate q_u (`uldp train --user-budgets`), known to the
    # server that samples; None: every user at TrainConfig.user_q.
    user_q: np.ndarray | None = None


@dataclass(frozen=True)
class RoundPlan:
    """The server's instructions for one round (Algorithm 4 lines 4-7)."""

    round: int
    sampled: np.ndarray  # (users,) bool: user in U_t
    weights: np.ndarray | None  # (silos, users) w_{s,u}, zero for users not sampled; None if unused
    # (silos,) bool: the silos that train this round (rPDP-FL Algorithm 2 line 5, client-level
    # Poisson sampling); None: every silo.
    silos: np.ndarray | None = None


@dataclass(frozen=True)
class SiloDelta:
    """A silo's message: its (clipped, weighted, noised) model delta Delta_t^s, flat."""

    silo: int
    delta: torch.Tensor  # (d,)


@dataclass(frozen=True)
class SiloUserDeltas:
    """A silo's message for the weighting protocol: per-user clipped deltas and its noise.

    Plaintext weighting multiplies row u by w_{s,u} = n_{s,u}/N_u on the server; Protocol 1
    does the same under Paillier encryption so that no party learns n_{s,u} of another silo.
    """

    silo: int
    users: np.ndarray  # (m,) user ids of the rows
    deltas: torch.Tensor  # (m, d) clipped, unweighted
    noise: torch.Tensor  # (d,)
    # `uldp audit`'s canary users' rows, clipped, unweighted, kept sparse (`dirac_rows.DiracRows`);
    # never sent over Flower nor through Protocol 1 (the audit runs neither).
    dirac: DiracRows | None = None


Message = SiloDelta | SiloUserDeltas


class Algorithm(Protocol):
    """A trainer: the server's round plan and aggregation, the silo's update, and what the run
    reports about itself (`server.BaseAlgorithm` gives the defaults)."""

    name: str

    def plan_round(
        self, round: int, ctx: Context, cfg: TrainConfig, rng: np.random.Generator
    ) -> RoundPlan: ...

    def silo_update(
        self,
        silo: SiloData,
        params: dict[str, torch.Tensor],
        plan: RoundPlan,
        ctx: Context,
        cfg: TrainConfig,
        rng: np.random.Generator,
    ) -> Message: ...

    def aggregate(
        self,
        params: dict[str, torch.Tensor],
        messages: list[Any],  # each algorithm reads the message type its silos send
        plan: RoundPlan,
        ctx: Context,
        cfg: TrainConfig,
    ) -> dict[str, torch.Tensor]: ...

    def plan_params(self, cfg: TrainConfig, rounds: int, n_silos: int) -> dict[str, Any]: ...

    def account_flags(self, cfg: TrainConfig, n_silos: int) -> list[str]: ...

    def run_assumptions(self, cfg: TrainConfig, n_silos: int) -> dict[str, str]: ...

    def summary_fields(self) -> dict[str, object]: ...

    def reply_type(self, cfg: TrainConfig) -> type: ...

    def silo_state(self, silo: int) -> dict[str, np.ndarray]: ...

    def load_silo_state(self, silo: int, state: dict[str, np.ndarray]) -> None: ...

    phased: bool

    def bind_silos(self, silos: Any) -> None: ...

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
    ) -> dict[str, np.ndarray]: ...

    def round_fields(self, plan: RoundPlan) -> dict[str, object]: ...

    def spent(self, cfg: TrainConfig) -> tuple[float, float | None]: ...

    def restore(self, history: list[dict]) -> None: ...


def sample_users(n_users: int, q: float | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Poisson sampling of users with probability q (Algorithm 4 line 4); q = 1 keeps everyone.

    `q` may be one rate per user (per-user budgets, issue 14): user u is kept with probability
    q[u], independently, in one vectorised draw.
    """
    import numpy as np

    if np.ndim(q) == 0:
        if q >= 1:
            return np.ones(n_users, dtype=bool)
        return rng.random(n_users) < q
    return rng.random(n_users) < np.asarray(q)


def gaussian(d: int, std: float, rng: np.random.Generator, like: torch.Tensor) -> torch.Tensor:
    """N(0, std^2 I) of dimension d, drawn from the silo's numpy generator (so runs replay)."""
    import torch

    return torch.as_tensor(rng.normal(0.0, std, size=d), dtype=like.dtype, device=like.device)


def clipping_factors(rows: torch.Tensor, cfg: TrainConfig, silo: int) -> torch.Tensor:
    """min(1, C / ||row||) for every row (`per_user.clip_factors`) as silo `silo` applies them:
    per-user deltas, per-record gradients, an audit's Dirac rows (and `cfg.fault`'s, `faults`)."""
    from ..per_user import clip_factors
    from .faults import clip_factors as faulty

    factors, _ = clip_factors(rows, cfg.clip)
    return faulty(factors, cfg.fault, silo)


def zero_delta(params: dict[str, torch.Tensor], n_params: int) -> torch.Tensor:
    """The flat update of a silo with nothing to train on, on the parameters' dtype and device."""
    import torch

    like = next(iter(params.values()))
    return torch.zeros(n_params, dtype=like.dtype, device=like.device)


def apply_delta(params: dict[str, torch.Tensor], step: torch.Tensor, scale: float) -> dict[str, torch.Tensor]:
    """x_{t+1} = x_t + scale * step, with `step` flat."""
    out, start = {}, 0
    for name, p in params.items():
        n = p.numel()
        out[name] = p + scale * step[start : start + n].view_as(p)
        start += n
    return out


def sgd_epochs(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: LossFn,
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    rng: np.random.Generator,
) -> dict[str, torch.Tensor]:
    """Plain minibatch SGD over a silo's records (Algorithm 1 lines 9-11), shuffled per epoch."""
    import torch
    from torch.func import functional_call

    local = {k: v.detach().clone() for k, v in params.items()}
    n = len(x)
    for _ in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            idx = torch.as_tensor(order[start : start + batch_size])
            current = {k: v.requires_grad_(True) for k, v in local.items()}
            loss = loss_fn(
                functional_call(model, current, (x[idx],)),
                y[idx],
                torch.ones(len(idx), dtype=x.dtype, device=x.device),
            )
            grads = torch.autograd.grad(loss, list(current.values()))
            local = {k: (v - lr * g).detach() for (k, v), g in zip(current.items(), grads)}
    return local
