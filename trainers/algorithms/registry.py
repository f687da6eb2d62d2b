"""The one registry of ULDP-FL algorithms: `uldp account`, `uldp calibrate` and `uldp train` read it.

An algorithm is an `AlgorithmSpec`: its `--algo` name and help, the mechanism it releases (its
`plan`, ULDP-FL §3, which any accountant then accounts) and the factory of its trainer (the
silo-side update and server-side aggregation, see `base`). `register` adds one (noting a
`secure` one in `secure_algorithms`, which `TrainConfig` reads), `get_algorithm` finds one by
name. This module, like the algorithm modules' top levels, imports no torch: the
accounting commands read the registry too, and must start without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from uldp.errors import InvalidParameter

from .secure_algorithms import forget_secure, note_secure

if TYPE_CHECKING:
    from uldp.accountants.plan import Plan

    from .base import Algorithm, SiloData, TrainConfig


@dataclass(frozen=True)
class PlanInputs:
    """The hyper-parameters a plan may read, validated once by `plan_algorithm`."""

    sigma: float  # noise multiplier
    rounds: int  # T
    user_q: float = 1.0  # user-level Poisson sampling rate (Algorithm 4)
    silos: int | None = None  # |S|, when known (from --silos or the silo sizes)
    silo_sizes: tuple[int, ...] | None = None  # records per silo (ULDP-GROUP-k's sampling rates)
    batch_size: int | None = None
    record_q: float | None = None
    local_epochs: int = 1  # Q
    k: int | None = None  # records kept per user (ULDP-GROUP-k)


#: The training settings (`TrainConfig` fields) an algorithm may read. `uldp train` refuses a
#: value given for one that the chosen algorithm's `AlgorithmSpec.options` leaves out, rather
#: than train as if it mattered (issue 12).
TRAINING_OPTIONS = frozenset(
    (
        "sigma",
        "clip",
        "lr",
        "global_lr",
        "local_epochs",
        "batch_size",
        "local_batch_size",
        "group_k",
        "batched",
        "local_steps",
        "silo_q",
        "dropout",
        "dropout_at",
        "dropout_schedule",
        "calibration",
        "min_weight_sum",
        "n_max",
        "threshold",
        "target_epsilon",
    )
)

#: What only the subject-level algorithms read (Marathe & Kanani): the federation-wide target
#: their noise is calibrated to (`uldp train --epsilon`).
SUBJECT_OPTIONS = frozenset(("target_epsilon",))

#: What only dp-fedavg-robust reads (Baek et al. 2021): its dropouts, calibration, weights and
#: secure aggregation's threshold. An algorithm reads none of them unless its spec says so.
DROPOUT_OPTIONS = frozenset(
    ("dropout", "dropout_at", "dropout_schedule", "calibration", "min_weight_sum", "n_max", "threshold")
)

#: The `PlanInputs` fields beyond sigma and rounds a plan may read. `uldp account` and `uldp
#: calibrate` refuse a value given for one that the chosen algorithm's `AlgorithmSpec.plan_options`
#: leaves out (issue 12), and read k and the sampled level from them.
PLAN_OPTIONS = frozenset(("user_q", "silos", "silo_sizes", "batch_size", "record_q", "local_epochs", "k"))

PlanFunction = Callable[[PlanInputs], "Plan"]
TrainerFactory = Callable[["TrainConfig", "list[SiloData]", str], "Algorithm"]


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm, everything the commands need to know about it.

    `plan` is None for a non-private algorithm (`default`): there is nothing to account, and
    `uldp account` / `uldp calibrate` do not offer it. `accounted_as` names the algorithm whose
    mechanism this one releases when the two differ only in who computes the weights (the `-w`
    variants release ULDP-AVG's / ULDP-SGD's mechanism); it defaults to the spec's own name.
    `secure`: `uldp train --secure` may run the server's weighting through Protocol 1 (or, for
    dp-fedavg-robust, its uploads through secure aggregation).
    `options`: the `TRAINING_OPTIONS` its trainer reads (all but `DROPOUT_OPTIONS`, unless it
    says); `uldp train` refuses the others when the user sets them. `plan_options`: the
    `PLAN_OPTIONS` its plan reads (users sampled at `user_q`, |S| named, unless it says
    otherwise); `k` in them makes it a group algorithm, `user_q` in them one whose server view
    differs under user sampling.
    `server_reads_owners`: its server needs the owner of every silo's records (the histogram
    n_{s,u}) to plan or weight, so a server at a separate party is sent them (trainers/flower);
    never under --secure, whose weighting hides them.
    `record_level`: it protects records with personalised budgets (rPDP-FL): each record is
    sampled at its own rate q, and a run is accounted per record (`trainers.personal_accounting`), not by a
    user-level plan; `uldp personalize` is its accounting command.
    `user_budgets`: its users may have budgets of their own (`uldp train --user-budgets`), each
    sampled at its own rate q_u (issue 14; PULDP-AVG of the ULDP-FL authors' code).
    `observed`: what a round releases depends on what happened in it (dropouts), so a run is
    accounted from the rounds it observed (the trainer's `spent`), not by a plan; `uldp dropout`
    is its accounting command (issue 15: dp-fedavg-robust).
    `subject_level`: it protects subjects (people) whose items several members hold (Marathe &
    Kanani); a run is accounted per subject over the holdings its data has
    (`trainers.subject_accounting`), its name is the mechanism `accountants.subject.horizontal` accounts,
    and `uldp subject --algo` is its accounting command (issue 16).
    """

    name: str
    help: str
    build: TrainerFactory
    plan: PlanFunction | None = None
    accounted_as: str | None = None
    secure: bool = False
    options: frozenset[str] = TRAINING_OPTIONS - DROPOUT_OPTIONS - SUBJECT_OPTIONS
    plan_options: frozenset[str] = frozenset(("user_q", "silos"))
    server_reads_owners: bool = False
    record_level: bool = False
    user_budgets: bool = False
    observed: bool = False
    subject_level: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.options) - TRAINING_OPTIONS
        if unknown:
            raise InvalidParameter(f"{self.name}: unknown training options {sorted(unknown)}")
        unknown = set(self.plan_options) - PLAN_OPTIONS
        if unknown:
            raise InvalidParameter(f"{self.name}: unknown plan options {sorted(unknown)}")
        if self.plan is not None and self.accounted_as is None:
            object.__setattr__(self, "accounted_as", self.name)
        if self.record_level and self.plan is not None:
            raise InvalidParameter(
                f"{self.name}: a record-level algorithm is accounted per record, not by a plan"
            )
        if self.observed and self.plan is not None:
            raise InvalidParameter(
                f"{self.name}: an observed algorithm is accounted from its rounds, not by a plan"
            )
        if self.subject_level and self.plan is not None:
            raise InvalidParameter(
                f"{self.name}: a subject-level algorithm is accounted per subject, not by a plan"
            )
        if self.plan is None and self.accounted_as is not None:
            raise InvalidParameter(
                f"{self.name}: accounted_as needs a plan (a non-private algorithm releases no mechanism)"
            )

    @property
    def private(self) -> bool:
        return self.plan is not None or self.record_level or self.observed or self.subject_level


# Registration order is the order of the --algo choices.
_REGISTRY: dict[str, AlgorithmSpec] = {}


def register(spec: AlgorithmSpec) -> AlgorithmSpec:
    """Add `spec` under its name (a name is taken once); returns it, so a module may keep it."""
    if spec.name in _REGISTRY:
        raise InvalidParameter(f"an algorithm named {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    if spec.secure:
        note_secure(spec.name, protocol1=not spec.observed)
    return spec


def unregister(name: str) -> AlgorithmSpec:
    """Remove the algorithm `name` (tests and plug-ins that registered one for a while)."""
    spec = _REGISTRY.pop(get_algorithm(name).name)
    forget_secure(spec.name)
    return spec


def get_algorithm(name: str) -> AlgorithmSpec:
    """The spec registered as `name`; InvalidParameter naming the choices otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InvalidParameter(f"algo must be one of {', '.join(algorithm_names())}, got {name!r}") from None


def algorithm_names() -> tuple[str, ...]:
    """Every registered name: what `uldp train --algo` accepts."""
    return tuple(_REGISTRY)


def accounted_names() -> tuple[str, ...]:
    """The distinct mechanisms (no `-w` variant, which releases its base algorithm's): the
    algorithms named when `uldp account` / `uldp calibrate` refuse an option none of them reads.
    `plan_names` is what those commands accept."""
    return tuple(name for name, spec in _REGISTRY.items() if spec.private and spec.accounted_as == name)


def plan_names() -> tuple[str, ...]:
    """Every algorithm with a plan: what `uldp account --algo` and `uldp calibrate --algo` accept.

    A `-w` variant is among them: its plan is its base algorithm's mechanism under its own name,
    so it prints the base algorithm's rows with a line saying the weights do not change them.
    """
    return tuple(name for name, spec in _REGISTRY.items() if spec.plan is not None)


def user_budget_names() -> tuple[str, ...]:
    """The algorithms whose users may have budgets of their own (`uldp train --user-budgets`)."""
    return tuple(name for name, spec in _REGISTRY.items() if spec.user_budgets)


def unaccounted_reason(algorithm: str) -> str:
    """Why the registered `algorithm` has no plan for `uldp account` / `uldp calibrate`, and what
    accounts it instead (`plan_names` lists those that have one)."""
    spec = get_algorithm(algorithm)
    if spec.record_level:
        return (
            f"{algorithm} gives every record its own budget and is accounted per record: use "
            "`uldp personalize` (or the per-tier epsilons `uldp train` prints)"
        )
    if spec.observed:
        return (
            f"{algorithm} is accounted from what each round released (its dropouts): use "
            "`uldp dropout` to plan it (or the epsilons `uldp train` prints)"
        )
    if spec.subject_level:
        return (
            f"{algorithm} protects subjects whose items several members hold: use `uldp subject "
            f"--algo {algorithm}` to plan it (or the epsilons `uldp train` prints)"
        )
    if not spec.private:
        return (
            f"{algorithm} is not private, there is nothing to account; algorithm must be one of "
            f"{', '.join(plan_names())}"
        )
    raise ValueError(f"{algorithm} has a plan: there is no reason to give")


def plan_algorithm(
    algorithm: str,
    *,
    sigma: float,
    rounds: int,
    user_q: float = 1.0,
    silos: int | None = None,
    silo_sizes: Sequence[int] | None = None,
    batch_size: int | None = None,
    record_q: float | None = None,
    local_epochs: int = 1,
    k: int | None = None,
) -> Plan:
    """Compile one ULDP-FL algorithm's hyper-parameters into the mechanism it releases."""
    spec = _REGISTRY.get(algorithm)
    if spec is not None and (spec.record_level or spec.observed or spec.subject_level or not spec.private):
        raise InvalidParameter(unaccounted_reason(algorithm))
    if spec is None or not spec.private:
        choices = ", ".join(plan_names())
        raise InvalidParameter(f"algorithm must be one of {choices}, got {algorithm!r}")
    if rounds < 0:
        raise InvalidParameter(f"rounds must be >= 0, got {rounds}")
    n_silos = _silo_count(silos, silo_sizes)
    inputs = PlanInputs(
        sigma=sigma,
        rounds=rounds,
        user_q=user_q,
        silos=n_silos,
        silo_sizes=None if silo_sizes is None else tuple(silo_sizes),
        batch_size=batch_size,
        record_q=record_q,
        local_epochs=local_epochs,
        k=k,
    )
    assert spec.plan is not None
    return spec.plan(inputs)


def _silo_count(silos: int | None, silo_sizes: Sequence[int] | None) -> int | None:
    if silo_sizes is not None:
        if any(n < 1 for n in silo_sizes):
            raise InvalidParameter("silo sizes must be positive record counts")
        if silos is not None and silos != len(silo_sizes):
            raise InvalidParameter(f"--silos {silos} disagrees with {len(silo_sizes)} --silo-sizes")
        return len(silo_sizes)
    if silos is not None and silos < 1:
        raise InvalidParameter(f"silos must be >= 1, got {silos}")
    return silos
