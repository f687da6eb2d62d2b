"""`uldp audit`: one training run with canaries, and an empirical lower bound on its epsilon.

The method (Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023):
m canaries, each included with probability 1/2 (`canaries.plant`), one run, a score per
canary, and from how many of the highest / lowest scores are correctly guessed in / out a lower
bound on epsilon at a stated confidence (`accountants.statements.audit_bound`). The canaries are Dirac
gradient canaries on parameters of their own (`canaries.CanaryBlock`), the strongest a user can
be after clipping, so the scores are white-box:

- released model: canary i's final parameter minus its initial value (0), which is the
  alignment of the model's whole change with the canary's direction (its Dirac vector);
- server: the sum, over the rounds where the server sampled canary i, of the change the round's
  aggregate made to canary i's parameter (the server knows its own user sample; under user
  sampling it is not credited with amplification, so it is audited against its own epsilon).
  Without user sampling the two views coincide and only the released model's is reported.

Each view's lower bound is set beside the upper bound the accountants give the same run (the
tightest of RDP and PLD for that view, as `uldp report` states it). A lower bound above the upper
bound means the code does not do what the accounting assumes; at the stated confidence a correct
implementation shows one in at most 5% of audits (per view).
"""

from __future__ import annotations

import dataclasses
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.accountants.statements.audit_bound import (
    CONFIDENCE,
    AuditBound,
    audit_scores,
    epsilon_lower_bound,
    guess_counts,
)
from uldp.errors import InvalidParameter

from .algorithms import Algorithm, TrainConfig, get_algorithm
from .algorithms.faults import FAULTS
from .canaries import CANARY_NORM, CANARY_PARAMETER, Canaries, mark_silos, plant
from .runner import LocalSilos, TrainResult, accounting_plan, build_silos, run

if TYPE_CHECKING:
    import torch

    from .algorithms import Context, RoundPlan, SiloData

#: The algorithms with a canary construction, and the unit a canary is.
AUDITABLE: dict[str, str] = {
    "uldp-avg": "user",
    "uldp-avg-w": "user",
    "uldp-sgd": "user",
    "uldp-sgd-w": "user",
    "uldp-group": "user",
    "rpdp": "record",
    "unidp": "record",
}
#: The faults each algorithm can run (`faults`): weights exist only where silos weight users.
FAULTS_OF: dict[str, tuple[str, ...]] = {
    name: ("noise", "clip", "weights") if name.startswith(("uldp-avg", "uldp-sgd")) else ("noise", "clip")
    for name in AUDITABLE
}
#: The most canaries an audit may plant (each is a user and a parameter).
MAX_CANARIES = 100_000
DEFAULT_CANARIES = 1000


def check_auditable(algo: str, fault: str | None = None, secure: bool = False) -> None:
    """InvalidParameter (one line) unless `algo` has a canary construction and runs `fault`."""
    spec = get_algorithm(algo)
    if algo not in AUDITABLE:
        kind = (
            "is not private: there is no epsilon to audit"
            if not spec.private
            else "has no canary construction yet"
        )
        raise InvalidParameter(f"--algo {algo} {kind}; uldp audit takes {', '.join(AUDITABLE)}")
    if fault is not None and fault not in FAULTS_OF[algo]:
        raise InvalidParameter(
            f"--break-mechanism {fault} does not apply to {algo}; it takes {', '.join(FAULTS_OF[algo])}"
        )
    if secure:
        raise InvalidParameter(
            "--secure is not audited: Protocol 1 returns the same weighted sum as the plaintext "
            "weighting (tests/crypto), so audit without it"
        )


def canary_count(value: float, users: int) -> int:
    """--canaries as a count: a whole number is taken as is, a fraction in (0, 1) of the users.

    InvalidParameter if the count is below 2 or above the data's users (canaries would then be
    most of the federation, and the model they audit would not be the one trained without)."""
    if 0 < value < 1:
        count = int(round(value * users))
    elif value >= 1 and float(value).is_integer():
        count = int(value)
    else:
        raise InvalidParameter(
            f"--canaries must be a whole count >= 2 or a fraction in (0, 1), got {value:g}"
        )
    if count < 2:
        raise InvalidParameter(
            f"--canaries {value:g} is {count} canaries for {users} users; an audit needs at least 2"
        )
    if count > users:
        raise InvalidParameter(
            f"--canaries {value:g} is more canaries than the data's {users} users; give at most {users} "
            "(or a fraction of them, e.g. 0.5)"
        )
    return count


@dataclass(frozen=True)
class ViewAudit:
    """One attacker's audit: the lower bound from its scores beside the claimed upper bound."""

    view: str  # "released model" or "server"
    score: str  # what the attacker computes, in words
    bound: AuditBound
    claimed: float  # the accountants' epsilon for this view (the tightest)
    claimed_by: str  # which accountant gave it
    ceiling: float  # the largest lower bound these canaries could show (every guess right)

    @property
    def violated(self) -> bool:
        return self.bound.epsilon > self.claimed

    @property
    def verdict(self) -> str:
        if self.violated:
            return "VIOLATED"
        if self.bound.epsilon == 0:
            return "too weak to say anything"
        return "consistent"

    def as_dict(self) -> dict[str, Any]:
        b = self.bound
        return {
            "view": self.view,
            "score": self.score,
            "lower_bound": b.epsilon,
            "upper_bound": self.claimed if math.isfinite(self.claimed) else None,
            "upper_bound_accountant": self.claimed_by,
            "ceiling": self.ceiling,
            "verdict": self.verdict,
            "violated": self.violated,
            "canaries": b.canaries,
            "guesses": b.guesses,
            "correct": b.correct,
            "guess_counts_tried": list(b.guess_counts),
            "confidence": b.confidence,
            "delta": b.delta,
        }


@dataclass
class AuditResult:
    """An audited run: its canaries, each view's audit, the training run, and what it cost."""

    algo: str
    unit: str
    canaries: Canaries
    views: list[ViewAudit]
    scores: dict[str, np.ndarray]  # each view's canary scores (the --plot histogram)
    train: TrainResult
    fault: str | None
    upper_bounds: dict[str, list[tuple[str, float]]]  # each view's bounds, by accountant
    train_s: float  # the training run, canaries included
    audit_s: float  # planting, scoring and the bounds (the upper bound's accounting apart)
    accounting_s: float  # the upper bounds (the accountants)

    @property
    def violated(self) -> bool:
        return any(v.violated for v in self.views)

    def method(self) -> dict[str, str]:
        """How the audit was made, in words (the output's notes)."""
        c = self.canaries
        return {
            "method": (
                "one-run audit (Steinke, Nasr, Jagielski, NeurIPS 2023): canaries included with "
                "probability 1/2, the highest scores guessed in and the lowest out, their binomial "
                "test with the delta term (their Appendix D)"
            ),
            "canaries": (
                f"{c.m} Dirac gradient canary {self.unit}s (Nasr et al. 2023), {int(c.included.sum())} "
                f"included; each an update of {CANARY_NORM:g} C along a parameter of its own, which the "
                f"model's output never reads; {c.layout}"
            ),
            "confidence": (
                f"{self.views[0].bound.confidence:.0%} per view; each tried guess count "
                f"({', '.join(str(r) for r in self.views[0].bound.guess_counts)}) at "
                f"{(1 - self.views[0].bound.confidence) / len(self.views[0].bound.guess_counts):.3g} "
                "(Bonferroni)"
            ),
            "upper bound": "; ".join(
                f"{view}: " + ", ".join(f"{label} {eps:.4g}" for label, eps in bounds)
                for view, bounds in self.upper_bounds.items()
            )
            + f" (each holds, the smallest is the claim; delta {self.views[0].bound.delta:g}; RDP "
            "by the improved conversion, ULDP-FL Lemma 2)",
        }


class _Recorder:
    """The run's algorithm, recording what each round's aggregate did to the canaries'
    parameters and which canaries the server sampled (the server's white-box view)."""

    def __init__(self, inner: Algorithm, canary_users: np.ndarray) -> None:
        self.inner = inner
        self.canary_users = canary_users
        self.steps: list[np.ndarray] = []
        self.sampled: list[np.ndarray] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def aggregate(
        self, params: dict[str, torch.Tensor], messages: list, plan: RoundPlan, ctx: Context, cfg: TrainConfig
    ) -> dict[str, torch.Tensor]:
        new = self.inner.aggregate(params, messages, plan, ctx, cfg)
        step = new[CANARY_PARAMETER] - params[CANARY_PARAMETER]
        self.steps.append(step.detach().double().cpu().numpy())
        self.sampled.append(np.asarray(plan.sampled)[self.canary_users])
        return new


class _AuditSilos(LocalSilos):
    """Every silo in this process (`runner.LocalSilos`), the server's algorithm recorded."""

    def __init__(self, silos: list[SiloData], counts: np.ndarray, canary_users: np.ndarray) -> None:
        super().__init__(silos, counts)
        self.canary_users = canary_users
        self.recorder: _Recorder | None = None

    def prepare(self, cfg: TrainConfig, task: str, noise_fixed: bool) -> tuple[Algorithm, np.ndarray | None]:
        algorithm, counts = super().prepare(cfg, task, noise_fixed)
        self.recorder = _Recorder(algorithm, self.canary_users)
        return self.recorder, counts  # type: ignore[return-value]  # an Algorithm by delegation


def _inclusion_rng(cfg: TrainConfig) -> np.random.Generator:
    """The canaries' inclusion bits: from --noise-seed when fixed (a reproducible experiment),
    else 128 fresh bits (the bits are the secret the audit tests)."""
    entropy = cfg.noise_seed if cfg.noise_seed is not None else secrets.randbits(128)
    return np.random.default_rng(np.random.SeedSequence([entropy, 0xA0D17]))


def _ceiling(m: int, delta: float, confidence: float) -> float:
    """The largest lower bound m canaries can show: every guess right, at the best count."""
    counts = guess_counts(m)
    per_test = 1.0 - (1.0 - confidence) / len(counts)
    return max(epsilon_lower_bound(m, r, r, delta, per_test) for r in counts)


def audit(
    data: Any,
    cfg: TrainConfig,
    *,
    canaries: int,
    confidence: float = CONFIDENCE,
    model_name: str | None = None,
    device: str = "cpu",
    on_round: Callable[[dict], None] | None = None,
    model: Any = None,
    loss: Any = None,
) -> AuditResult:
    """Plant `canaries` canaries in `data`, train `cfg` once, score them, and bound epsilon.

    `data` carries per-record rates for the record-level algorithms (rpdp, unidp:
    `rates.personalize_data`), as `uldp train` gives them. `model` and `loss` as `runner.train`
    takes them (`own_model.resolve_model`; `model_name` its older name)."""
    from .models import parameter_count
    from .module_check import check_layers
    from .own_model import resolve_model

    check_auditable(cfg.algo, cfg.fault, cfg.secure)
    if not 0 < confidence < 1:
        raise InvalidParameter(f"--confidence must be in (0, 1), got {confidence:g}")
    started = time.perf_counter()
    m = canary_count(canaries, data.n_users)
    cfg, records_each, layout, record_rate = _canary_layout(data, cfg)
    planted, planted_canaries, canary_of_record = plant(
        data, m, records_each, layout, _inclusion_rng(cfg), record_rate
    )
    spec = resolve_model(model if model is not None else model_name, data=data, loss=loss)
    offset = parameter_count(check_layers(spec.factory()))
    silos = build_silos(planted, device)
    mark_silos(silos, planted, canary_of_record, offset)
    local = _AuditSilos(silos, planted.user_silo_counts(), planted_canaries.users)
    setup_s = time.perf_counter() - started

    started = time.perf_counter()
    result = run(planted, local, cfg, model=spec, device=device, on_round=on_round, canaries=m)
    train_s = time.perf_counter() - started

    started = time.perf_counter()
    recorder = local.recorder
    assert recorder is not None
    final = result.params[CANARY_PARAMETER].detach().double().cpu().numpy()
    steps, sampled = np.array(recorder.steps), np.array(recorder.sampled)
    scores = {"released model": final, "server": (steps * sampled).sum(axis=0)}
    bounds = {
        view: audit_scores(s, planted_canaries.included, delta=cfg.delta, confidence=confidence)
        for view, s in scores.items()
    }
    ceiling = _ceiling(m, cfg.delta, confidence)
    audit_s = setup_s + time.perf_counter() - started

    started = time.perf_counter()
    if record_rate is None:
        upper_bounds = _plan_bounds(cfg, planted.n_silos, recorder.inner)
    else:
        upper_bounds = _record_bounds(cfg, planted, record_rate)
    accounting_s = time.perf_counter() - started

    described = {
        "released model": "canary i's final parameter (the model's change along its direction)",
        "server": "sum of canary i's parameter steps over the rounds the server sampled it",
    }
    views = []
    for view in upper_bounds:  # the server only under user sampling: else it sees the model
        label, epsilon = min(upper_bounds[view], key=lambda bound: bound[1])
        views.append(ViewAudit(view, described[view], bounds[view], epsilon, label, ceiling))
    record_level = record_rate is not None or cfg.group_k == 1  # uldp-group at k = 1: DP-SGD
    return AuditResult(
        cfg.algo,
        "record" if record_level else AUDITABLE[cfg.algo],
        planted_canaries,
        views,
        {v.view: scores[v.view] for v in views},
        result,
        cfg.fault,
        upper_bounds,
        train_s,
        audit_s,
        accounting_s,
    )


def _canary_layout(data: Any, cfg: TrainConfig) -> tuple[TrainConfig, int, str, tuple[float, float] | None]:
    """(cfg, records per canary, where they are, (q, budget) of a record-level canary or None):
    as many records as the algorithm needs for a canary to reach its full weight.

    uldp-group's k is fixed from the data before the canaries join it. A record-level canary is
    a record of the smallest budget (the strongest promise, the one a broken mechanism breaks
    first), sampled at that budget's rate (the largest, should records of it differ)."""
    from .algorithms.group import resolve_group_k

    if get_algorithm(cfg.algo).record_level:
        if data.record_q is None or data.record_budget is None:
            raise InvalidParameter(f"{cfg.algo} needs per-record budgets: give --distribution NAME")
        budget = float(np.min(data.record_budget))
        q = float(np.max(data.record_q[data.record_budget == budget]))
        layout = f"one record each, of the smallest budget {budget:g}, sampled at its rate q = {q:.4g}"
        return cfg, 1, layout, (q, budget)
    if cfg.algo == "uldp-group":
        k = resolve_group_k(cfg.group_k, data.records_per_user())
        return dataclasses.replace(cfg, group_k=k), k, f"k = {k} records, all kept by the flags", None
    # The per-user algorithms: w_{s,u} = 1/|S| in each silo, so a user's weights sum to 1 only
    # if it is in every silo.
    return cfg, data.n_silos, "one record in every silo (its weights then sum to 1)", None


def _plan_bounds(cfg: TrainConfig, n_silos: int, algorithm: Algorithm) -> dict[str, list[tuple[str, float]]]:
    """Each view's user-level bounds by RDP and PLD, as `uldp report` states the run's plan."""
    from uldp.accountants.statements.statement import Accounting, plan_statement

    plan = accounting_plan(cfg, cfg.rounds, n_silos, algorithm)
    assert plan is not None  # every auditable user-level algorithm is accounted by its plan
    statement = plan_statement(plan, Accounting(delta=cfg.delta, accountants=("rdp", "pld")))
    users = [c for c in statement.claims if c.level == "user" and c.k is None]
    out = {c.view: [(b.label, b.epsilon) for b in c.bounds] for c in users}
    if plan.group_k == 1:  # a user keeps one record: every record-level bound is a user-level one
        record = next(c for c in statement.claims if c.level == "record")
        out[record.view] = list(
            dict.fromkeys([*out.get(record.view, []), *((b.label, b.epsilon) for b in record.bounds)])
        )
    return out


def _record_bounds(
    cfg: TrainConfig, planted: Any, rate: tuple[float, float]
) -> dict[str, list[tuple[str, float]]]:
    """The canary records' epsilon as the run's per-tier accounting gives it: rPDP-FL's
    untrusted view (what the global models show) at the canaries' rate."""
    from .personal_accounting import accounting as personal_accounting

    personal = personal_accounting(cfg, planted, True)
    assert personal is not None
    epsilon = float(personal.views["untrusted"](cfg.rounds, np.array([rate[0]]))[0])
    return {"released model": [(f"RDP (rPDP-FL, the global models), q = {rate[0]:.4g}", epsilon)]}


def describe_fault(fault: str | None) -> str | None:
    """The warning a run with a fault carries."""
    if fault is None:
        return None
    return f"MECHANISM BROKEN ON PURPOSE (--break-mechanism {fault}: {FAULTS[fault]}); test only"


__all__ = [
    "AUDITABLE",
    "AuditResult",
    "ViewAudit",
    "audit",
    "canary_count",
    "check_auditable",
    "describe_fault",
]
