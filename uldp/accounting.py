"""`uldp.calibrate` and `uldp.account`: the two accounting commands as calls, with their keywords.

`uldp.calibrate(epsilon=3, q=0.01, epochs=10, delta=1e-5)` answers what Opacus'
`get_noise_multiplier(target_epsilon=3, target_delta=1e-5, sample_rate=0.01, epochs=10)` does,
and `uldp.account(sigma=..., ...)` what TF-Privacy's `compute_dp_sgd_privacy` does with
`used_microbatching=False` (Opacus' accounting: no microbatching; `uldp report` states TF-Privacy's
default, which halves sigma); each keyword
is the snake_case spelling of the option of `uldp calibrate` / `uldp account` (docs/cli.md), and
the commands call these same functions (`mechanism_schedule`, `plan_for`, `search`), so the
numbers cannot drift apart (docs/library.md).

Nothing here is imported by `import uldp`: the accountants and the algorithm registry (no torch)
are imported when a function is first called.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

from .errors import InvalidParameter

if TYPE_CHECKING:
    from uldp.accountants.account import Guarantee
    from uldp.accountants.events import Mechanism
    from uldp.accountants.plan import Plan
    from uldp.accountants.private_sampling import PrivateSampling

#: Keyword -> how a message spells it: the library says `epochs`, the CLI passes `--epochs`.
Spelling = Callable[[str], str]

#: The most steps or rounds accounted, and the largest data set: 1e12, far beyond any run (the CLI's
#: `COUNT_MAX`, the same number: a test keeps the two equal).
COUNT_MAX = 10**12


def _keyword(name: str) -> str:
    return name


def _count(name: str, value: object, spell: Spelling) -> None:
    """`value` must be None or an int in [1, COUNT_MAX] (not a bool, not a float such as 1e3)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= COUNT_MAX:
        raise InvalidParameter(f"{spell(name)} must be an integer in [1, {COUNT_MAX:.0e}], got {value!r}")


#: The keywords a bare mechanism reads (besides sigma, delta and the accountants' own); an algorithm
#: reads `rounds` and its registry entry's `plan_options` (ULDP-FL §3), and `group_k` and
#: `group_method` with `k` among them (ULDP-GROUP-k).
MECHANISM_KEYWORDS = ("q", "steps", "epochs", "dataset_size", "batch_size", "k", "group_method")
#: The keywords checked against what the chosen algorithms read (`unused_keyword`).
PLAN_KEYWORDS = (
    *MECHANISM_KEYWORDS,
    "rounds",
    "group_k",
    "user_q",
    "silos",
    "silo_sizes",
    "record_q",
    "local_epochs",
)


def used_keywords(algo: str | None) -> frozenset[str]:
    """The `PLAN_KEYWORDS` that `algo` (None: the bare mechanism) reads."""
    if algo is None:
        return frozenset(MECHANISM_KEYWORDS)
    from uldp.trainers.algorithms import get_algorithm

    used = {"rounds", *get_algorithm(algo).plan_options}
    if "k" in used:
        used |= {"group_method", "group_k"}
    return frozenset(used)


def unused_keyword(
    algos: Sequence[str | None], given: Sequence[str], *, group: bool, spell: Spelling = _keyword
) -> tuple[str, str] | None:
    """(keyword, why) for the first of `given` that none of `algos` reads, else None.

    A value that changes nothing is a mistake the user should hear about (issue 12): `record_q`
    with uldp-avg, `rounds` without `algo`, `group_method` without a group (`group` False). The
    library and the CLI both ask this (the CLI with `given` from the options the user set), so
    both refuse the same settings, each in its own spelling."""
    from uldp.trainers.algorithms import accounted_names

    reads = {a: used_keywords(a) for a in dict.fromkeys(algos)}
    used = frozenset().union(*reads.values())
    if not group:
        used -= {"group_method"}
    for name in given:
        if name not in PLAN_KEYWORDS or name in used:
            continue
        if name == "group_method" and any(name in r for r in reads.values()):
            return name, f"only matters for groups; give {spell('k')} above 1 or drop it"
        readers = [a for a in accounted_names() if name in used_keywords(a)]
        if name in MECHANISM_KEYWORDS:
            readers = [f"a bare mechanism (no {spell('algo')})", *readers]
        chosen = f"without {spell('algo')}" if list(reads) == [None] else "by " + ", ".join(map(str, reads))
        return name, f"not used {chosen} (only by {', '.join(readers)}); drop it"
    return None


def _refuse_unused(
    algos: Sequence[str | None], values: dict[str, Any], defaults: dict[str, Any], group: bool
) -> None:
    given = [name for name, value in values.items() if value is not None and value != defaults.get(name)]
    found = unused_keyword(algos, given, group=group)
    if found is not None:
        raise InvalidParameter(f"{found[0]}: {found[1]}")


@dataclass(frozen=True)
class Schedule:
    """A bare DP-SGD mechanism's sampling rate and length, and how they were derived."""

    q: float | None
    steps: int | None
    derived: tuple[tuple[str, str], ...] = ()  # (key, line) for the assumptions


def mechanism_schedule(
    *,
    q: float | None,
    steps: int | None,
    epochs: float | None,
    dataset_size: int | None,
    batch_size: int | None,
    spell: Spelling = _keyword,
) -> Schedule:
    """q and steps of a bare mechanism from what the user gave, as the DP-SGD libraries take them.

    - `dataset_size` N with `batch_size` B: q = B / N (TF-Privacy's
      `poisson_subsampling_probability`; Opacus' `sample_rate` is 1 / len(data_loader) =
      1 / ceil(N / B), at most B / N: ours is the larger rate, the safe side);
    - `epochs` E: steps = ceil(E / q), TF-Privacy's count and `uldp report`'s
      (`accountants.plan.epochs_steps`). Opacus' `get_noise_multiplier` takes int(E / q), the
      same number when E / q is whole; otherwise ours is one step more, which only raises
      epsilon (or the sigma calibrated for a budget): the safe side.

    Conflicting inputs (q with N, steps with E, B without N) raise `InvalidParameter` naming them
    as `spell` writes a keyword (the CLI passes its option names).
    """
    from uldp.accountants.plan import dataset_rate, epochs_steps

    derived: list[tuple[str, str]] = []
    for name, value in (("dataset_size", dataset_size), ("batch_size", batch_size), ("steps", steps)):
        _count(name, value, spell)
    if q is not None and (isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q <= 1):
        raise InvalidParameter(f"{spell('q')} must be a number in (0, 1], got {q!r}")
    if epochs is not None and (
        isinstance(epochs, bool) or not isinstance(epochs, (int, float)) or not 0 < epochs < math.inf
    ):
        raise InvalidParameter(f"{spell('epochs')} must be a finite number > 0, got {epochs!r}")
    if dataset_size is not None or batch_size is not None:
        if dataset_size is None or batch_size is None:
            missing = "dataset_size" if dataset_size is None else "batch_size"
            given = "batch_size" if dataset_size is None else "dataset_size"
            raise InvalidParameter(
                f"{spell(given)} needs {spell(missing)}: the sampling rate is q = "
                f"{spell('batch_size')} / {spell('dataset_size')}"
            )
        if q is not None:
            raise InvalidParameter(
                f"give {spell('q')} or {spell('dataset_size')} with {spell('batch_size')} "
                f"(q = batch / N), not both"
            )
        if batch_size > dataset_size:
            raise InvalidParameter(
                f"{spell('batch_size')} {batch_size} is larger than {spell('dataset_size')} {dataset_size}"
            )
        q = dataset_rate(batch_size, dataset_size)
        derived.append(("q", f"q = batch size / dataset size = {batch_size} / {dataset_size} = {q:.6g}"))
    if epochs is not None:
        if steps is not None:
            raise InvalidParameter(f"give {spell('steps')} or {spell('epochs')}, not both")
        if q is None:
            raise InvalidParameter(
                f"{spell('epochs')} needs the sampling rate: give {spell('q')}, or "
                f"{spell('dataset_size')} with {spell('batch_size')}"
            )
        steps = epochs_steps(epochs, q)
        if steps > COUNT_MAX:
            raise InvalidParameter(
                f"{spell('epochs')} {epochs:g} at q = {q:.6g} is {steps:.3g} steps, above the "
                f"{COUNT_MAX:.0e} accounted: give fewer {spell('epochs')} or a larger q"
            )
        derived.append(
            (
                "steps",
                f"steps = ceil(epochs / q) = ceil({epochs:g} / {q:.6g}) = {steps} (TF-Privacy's count; "
                "Opacus takes int(epochs / q), at most one step fewer)",
            )
        )
    if derived:
        derived.append(
            (
                "microbatching",
                "none, as Opacus (TF-Privacy with used_microbatching=False): sigma as given; "
                "uldp report states TF-Privacy's default microbatching, which halves sigma",
            )
        )
    return Schedule(q, steps, tuple(derived))


def plan_for(
    algo: str | None,
    *,
    sigma: float,
    q: float | None = None,
    steps: int | None = None,
    rounds: int | None = None,
    user_q: float = 1.0,
    silos: int | None = None,
    silo_sizes: Sequence[int] | None = None,
    batch_size: int | None = None,
    record_q: float | None = None,
    local_epochs: int = 1,
    k: int | None = None,
    derived: Sequence[tuple[str, str]] = (),
    spell: Spelling = _keyword,
) -> Plan:
    """The `Plan` of one algorithm (ULDP-FL §3, `uldp.trainers.algorithms.plan_algorithm`) or of
    the bare mechanism: `steps` steps of a Poisson-subsampled Gaussian at rate `q`, with the
    lines saying how q and steps were `derived` (`mechanism_schedule`) among its assumptions."""
    from uldp.accountants.events import SubsampledGaussian
    from uldp.accountants.plan import Plan

    if algo is None:
        if q is None or steps is None:
            raise InvalidParameter(
                f"give {spell('q')} and {spell('steps')} (or {spell('epochs')}), "
                f"or {spell('algo')} with {spell('rounds')}"
            )
        return Plan(
            "mechanism",
            SubsampledGaussian(sigma, q, steps),
            None,
            {
                "mechanism": f"{steps} steps of a Poisson-subsampled Gaussian, sigma = {sigma:g}, q = {q:g}",
                "neighbouring": "add or remove one record (k records for a group)",
                **dict(derived),
            },
        )
    if q is not None or steps is not None:
        raise InvalidParameter(
            f"with {spell('algo')} the algorithm's {spell('rounds')}, {spell('user_q')}, "
            f"{spell('record_q')} ... replace {spell('q')} and {spell('steps')}; drop them"
        )
    if rounds is None:
        raise InvalidParameter(f"{spell('algo')} needs {spell('rounds')}")
    from uldp.trainers.algorithms import plan_algorithm

    try:
        return plan_algorithm(
            algo,
            sigma=sigma,
            rounds=rounds,
            user_q=user_q,
            silos=silos,
            silo_sizes=list(silo_sizes) if silo_sizes else None,
            batch_size=batch_size,
            record_q=record_q,
            local_epochs=local_epochs,
            k=k,
        )
    except InvalidParameter as error:
        # The algorithms word their checks for `uldp train` (--batch-size): say the caller's names.
        raise InvalidParameter(_respelled(str(error), spell)) from None


def _respelled(message: str, spell: Spelling) -> str:
    """`message` with each option it names (`--silo-sizes`) spelled by `spell` (`silo_sizes`)."""
    return re.sub(
        r"--([a-z][a-z-]*)",
        lambda m: (
            spell(m.group(1).replace("-", "_"))
            if m.group(1).replace("-", "_") in PLAN_KEYWORDS
            else m.group(0)
        ),
        message,
    )


def _reads(algo: str | None, field_name: str) -> bool:
    """Whether `algo`'s plan reads the `PlanInputs` field (None: the bare mechanism reads k)."""
    if algo is None:
        return field_name == "k"
    from uldp.trainers.algorithms import get_algorithm

    return field_name in get_algorithm(algo).plan_options


@dataclass(frozen=True)
class Calibrated:
    """What `uldp calibrate` prints: the setting found, re-accounted, and what it assumes.

    `as_dict()` has the keys and numbers of the command's `--format json` document (without its
    `command` key); an assumption's text that names an option spells the keyword (`view model`
    where the command says `--view model`)."""

    sigma: float
    steps: int  # the bare mechanism's steps, or the algorithm's rounds
    epsilon: float  # the re-accounted epsilon of the returned setting (<= budget)
    budget: float
    delta: float
    solved_for: str  # "sigma", "steps" or "rounds"
    q: float | None
    k: int
    method: str
    accountant: str
    conversion: str | None
    algorithm: str | None
    evaluations: int
    assumptions: dict[str, Any] = field(default_factory=dict)
    views: dict[str, float] = field(default_factory=dict)  # with user sampling: model and server
    view: str = "model"

    @property
    def meets_budget(self) -> bool:
        return self.epsilon <= self.budget

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "assumptions": self.assumptions,
            "solved_for": self.solved_for,
            "sigma": self.sigma,
            "q": self.q,
            "steps": self.steps,
            "epsilon": self.epsilon,
            "budget": self.budget,
            "delta": self.delta,
            "meets_budget": self.meets_budget,
            "k": self.k,
            "method": self.method,
            "accountant": self.accountant,
            "conversion": self.conversion,
            "algorithm": self.algorithm,
            "evaluations": self.evaluations,
        }
        if self.algorithm:
            out["rounds"] = self.steps
        if self.views:
            out["view"] = self.view
            out["epsilon_model"], out["epsilon_server"] = self.views["model"], self.views["server"]
        return out


@dataclass(frozen=True)
class CalibrationProblem:
    """A calibration problem, resolved: the plan for any (sigma, length) and its epsilons."""

    algo: str | None
    schedule: Schedule
    plan_options: dict[str, Any]
    delta: float
    k: int  # the group size the budget holds for (1 for an algorithm that reads no k)
    group_k: int | None  # ULDP-GROUP-k's k, handed to its plan
    group_method: str
    accountant: str
    conversion: str
    orders: Any
    sampled: bool  # user sampling: the model's and the server's views differ (unless private)
    spell: Spelling = _keyword  # how the plan's errors name an option
    # Private user-level sub-sampling (ULDP-FL §4.1): users drawn at m/P by oblivious transfer,
    # the server's view the released model's (uldp.accountants.private_sampling).
    private_sampling: PrivateSampling | None = None

    @property
    def used(self) -> str:
        """The accountant that produces the number: a PLD group bound uses no RDP."""
        return "pld" if self.k > 1 and self.group_method == "pld" else self.accountant

    @property
    def reads_rdp_conversion(self) -> bool:
        """Whether the reported number went through an RDP-to-DP conversion."""
        return self.accountant == "rdp" or self.group_method != "pld"

    @property
    def reads_rdp(self) -> bool:
        """Whether an RDP bound gives the number (--conversion and --orders then matter)."""
        return (
            self.accountant == "rdp"
            or (self.k > 1 and self.group_method != "pld")
            or (self.sampled and self.private_sampling is None)
        )

    def plan(self, sigma: float, length: int | None) -> Plan:
        if self.algo is None:
            return plan_for(
                None,
                sigma=sigma,
                q=self.schedule.q,
                steps=length,
                derived=self.schedule.derived,
                spell=self.spell,
            )
        plan = plan_for(
            self.algo, sigma=sigma, rounds=length, **self.plan_options, k=self.group_k, spell=self.spell
        )
        if self.private_sampling is not None:
            from uldp.accountants.private_sampling import privately_sampled

            plan = privately_sampled(plan, self.private_sampling)
        return plan

    def epsilons(
        self, sigma: float, length: int, accountant: str | None = None, method: str | None = None
    ) -> dict[str, float]:
        """{view: epsilon} of the run: the released model's and, with user sampling, the server's."""
        from uldp.accountants.account import account_plan

        found = account_plan(
            self.plan(sigma, length),
            delta=self.delta,
            accountants=(accountant or self.accountant,),
            ks=(self.k,),
            methods=(method or self.group_method,),
            conversion=self.conversion,
            orders=self.orders,
            server_view=self.sampled,
            private_sampling=self.private_sampling is not None,
        )
        out = {"model": found[0].epsilon}
        if self.sampled:
            out["server"] = next(g.epsilon for g in found if g.method == "server view")
        return out


def calibration_problem(
    *,
    delta: float = 1e-5,
    q: float | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    dataset_size: int | None = None,
    batch_size: int | None = None,
    algo: str | None = None,
    rounds: int | None = None,
    user_q: float = 1.0,
    silos: int | None = None,
    silo_sizes: Sequence[int] | None = None,
    record_q: float | None = None,
    local_epochs: int = 1,
    k: int = 1,
    group_k: int | None = None,
    group_method: str = "rdp",
    accountant: str = "rdp",
    conversion: str = "improved",
    orders: Any = "default",
    private_sampling: PrivateSampling | None = None,
    spell: Spelling = _keyword,
) -> CalibrationProblem:
    """What `calibrate` searches over, checked: the schedule, the plan's options, the group.

    `group_k` is ULDP-GROUP-k's records kept per user (`uldp train --group-k`); the budget then
    holds for a user, a group of that many records, so `k` must be 1 or the same number.
    `private_sampling` (ULDP-FL §4.1, `uldp.accountants.private_sampling.private_rate`): users
    are drawn at its rate m/P (`user_q` must be that rate, or the q it was rounded from), and the
    server's view is the released model's."""
    if algo is None:
        schedule = mechanism_schedule(
            q=q, steps=steps, epochs=epochs, dataset_size=dataset_size, batch_size=batch_size, spell=spell
        )
        plan_options: dict[str, Any] = {}
    else:
        for name, value in (("epochs", epochs), ("dataset_size", dataset_size), ("q", q), ("steps", steps)):
            if value is not None:
                raise InvalidParameter(
                    f"{spell(name)} describes a bare mechanism; with {spell('algo')} give {spell('rounds')}"
                )
        _count("rounds", rounds, spell)
        schedule = Schedule(None, rounds)
        plan_options = {
            "user_q": user_q,
            "silos": silos,
            "silo_sizes": silo_sizes,
            "batch_size": batch_size,
            "record_q": record_q,
            "local_epochs": local_epochs,
        }
    sampled = algo is not None and _reads(algo, "user_q") and user_q < 1
    if private_sampling is not None:
        if not sampled:
            raise InvalidParameter(
                f"private sampling hides the user sample from the server: give {spell('algo')} "
                f"that samples users with {spell('user_q')} < 1"
            )
        if user_q not in (private_sampling.q, private_sampling.requested):
            raise InvalidParameter(
                f"{spell('user_q')} {user_q!r} is not the private sampling rate "
                f"m/P = {private_sampling.m}/{private_sampling.slots}"
            )
        plan_options["user_q"] = private_sampling.q
    reads_k = _reads(algo, "k")
    for name, value in (("k", k), ("group_k", group_k)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InvalidParameter(f"{spell(name)} must be an integer >= 1, got {value!r}")
    if group_k is not None:
        if not reads_k:
            raise InvalidParameter(
                f"{spell('group_k')} is ULDP-GROUP-k's records kept per user: give it with "
                f"{spell('algo')} uldp-group"
            )
        if k not in (1, group_k):
            raise InvalidParameter(
                f"give {spell('group_k')} or {spell('k')} for uldp-group's k, not both ({group_k} != {k})"
            )
        k = group_k
    return CalibrationProblem(
        algo=algo,
        schedule=schedule,
        plan_options=plan_options,
        delta=delta,
        k=k if reads_k else 1,
        group_k=k if algo is not None and reads_k else None,
        group_method=group_method,
        accountant=accountant,
        conversion=conversion,
        orders=orders,
        sampled=sampled,
        spell=spell,
        private_sampling=private_sampling,
    )


def search(
    problem: CalibrationProblem,
    budget: float,
    *,
    sigma: float | None = None,
    view: str = "model",
    progress: Callable[[str], None] | None = None,
    spell: Spelling = _keyword,
) -> Calibrated:
    """The smallest sigma for the problem's length, or (given `sigma`) the longest run, whose
    `view` epsilon is within `budget`; re-accounted (accountants/calibrate.py)."""
    from uldp.accountants.assumptions import accounting_assumptions
    from uldp.accountants.calibrate import SIGMA_RANGE, calibrate, most_steps
    from uldp.accountants.events import TIGHT_SIGMA_MIN

    length = problem.schedule.steps
    unit = "rounds" if problem.algo else "steps"
    if (length is None) == (sigma is None):
        raise InvalidParameter(
            f"give exactly one of {spell(unit)}{'' if problem.algo else ' (or ' + spell('epochs') + ')'} "
            f"(solve for sigma) or {spell('sigma')} (solve for {unit})"
        )
    if view not in ("model", "server"):
        raise InvalidParameter(f"{spell('view')} must be model or server, got {view!r}")
    if view == "server" and not problem.sampled:
        raise InvalidParameter(
            "the server's view differs from the model's only with user sampling: give "
            f"{spell('algo')} that samples users (not uldp-group) with {spell('user_q')} < 1, "
            f"or leave {spell('view')} at model"
        )
    count = [0]
    say = progress or (lambda text: None)

    def epsilon(s: float, t: int, accountant: str | None = None, method: str | None = None) -> float:
        spent = problem.epsilons(s, t, accountant, method)[view]
        tried = f"{unit} {t}" if sigma is not None else f"sigma {s:.6g}"
        solving = "sigma" if sigma is None else "the length"
        say(f"calibrating {solving}, evaluation {count[0]}: {tried}: epsilon {spent:.5g}")
        return spent

    def counted(n: int) -> None:
        count[0] = n

    problem.plan(sigma or 1.0, length or 1)  # the algorithm's options, checked before searching
    if sigma is None:
        assert length is not None
        # PLD and PRV take sigma >= TIGHT_SIGMA_MIN (their grids fail below it): search only
        # where the chosen accountant answers.
        low = max(SIGMA_RANGE[0], TIGHT_SIGMA_MIN) if problem.used != "rdp" else SIGMA_RANGE[0]
        found = calibrate(
            lambda s: epsilon(s, length), budget, "sigma", progress=counted, sigma_range=(low, SIGMA_RANGE[1])
        )
        sigma_out, steps_out, solved = found.value, length, "sigma"
    else:
        # A tight accountant costs a second or more per evaluation: start its search from the
        # RDP bound's answer (tens of milliseconds each); it only saves evaluations, so when the
        # looser bound finds nothing (one step already over budget) there is no hint.
        hint = None
        if problem.used != "rdp":
            hint = most_steps(lambda t: epsilon(sigma, t, "rdp", "normal"), budget) or None
        solved = unit
        found = calibrate(lambda t: epsilon(sigma, int(t)), budget, solved, start=hint, progress=counted)
        sigma_out, steps_out = sigma, int(found.value)
    views = problem.epsilons(sigma_out, steps_out) if problem.sampled else {}
    final = problem.plan(sigma_out, steps_out)
    group = (
        [("group", f"budget must hold for groups of k = {problem.k} ({problem.group_method})")]
        if problem.k > 1
        else []
    )
    assumptions = accounting_assumptions(
        [final],
        delta=problem.delta,
        accountants=[problem.used],
        conversion=problem.conversion,
        orders=problem.orders,
        extra=group,
    ).as_dict()
    if problem.sampled:
        other = "server" if view == "model" else "released model"
        assumptions["view"] = (
            f"the budget is for the {'released model' if view == 'model' else 'server'}'s view "
            f"({spell('view')} {view}); the {other}'s epsilon is printed next to it"
        )
    algo = problem.algo
    rate = problem.schedule.q
    if algo:
        rate = problem.plan_options["user_q" if _reads(algo, "user_q") else "record_q"]
    return Calibrated(
        sigma=sigma_out,
        steps=steps_out,
        epsilon=found.epsilon,
        budget=budget,
        delta=problem.delta,
        solved_for=solved,
        q=rate,
        k=problem.k,
        method="record" if problem.k == 1 else problem.group_method,
        accountant=problem.used,
        conversion=problem.conversion if problem.reads_rdp_conversion else None,
        algorithm=algo,
        evaluations=found.evaluations,
        assumptions=assumptions,
        views=views,
        view=view,
    )


def calibrate(
    *,
    epsilon: float,
    delta: float = 1e-5,
    q: float | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    dataset_size: int | None = None,
    batch_size: int | None = None,
    sigma: float | None = None,
    algo: str | None = None,
    rounds: int | None = None,
    user_q: float = 1.0,
    silos: int | None = None,
    silo_sizes: Sequence[int] | None = None,
    record_q: float | None = None,
    local_epochs: int = 1,
    k: int = 1,
    group_k: int | None = None,
    group_method: str = "rdp",
    accountant: str = "rdp",
    conversion: str = "improved",
    orders: Any = "default",
    view: str = "model",
) -> Calibrated:
    """`uldp calibrate` as a call: the smallest noise multiplier for `epsilon` at `delta` (give the
    length: `steps`, `epochs`, or `rounds` with `algo`), or the most steps or rounds (give `sigma`).

    Opacus' `get_noise_multiplier(target_epsilon=3, target_delta=1e-5, sample_rate=0.01,
    epochs=10)` is `calibrate(epsilon=3, delta=1e-5, q=0.01, epochs=10).sigma` (steps from epochs:
    `mechanism_schedule`). The sigma returned is re-accounted: `.epsilon <= epsilon` always.
    Bad input raises `uldp.InvalidParameter` naming the keyword, a keyword the chosen `algo` (or
    the bare mechanism) does not read included, as `uldp calibrate` refuses the option; a budget
    no setting in the searched range meets, `uldp.UnreachableBudget`.
    """
    _refuse_unused(
        [algo],
        {
            "q": q,
            "steps": steps,
            "epochs": epochs,
            "dataset_size": dataset_size,
            "batch_size": batch_size,
            "k": k,
            "group_method": group_method,
            "rounds": rounds,
            "group_k": group_k,
            "user_q": user_q,
            "silos": silos,
            "silo_sizes": silo_sizes,
            "record_q": record_q,
            "local_epochs": local_epochs,
        },
        {"k": 1, "group_method": "rdp", "user_q": 1.0, "local_epochs": 1},
        group=max(k, group_k or 1) > 1 if isinstance(k, int) else True,
    )
    problem = calibration_problem(
        delta=delta,
        q=q,
        steps=steps,
        epochs=epochs,
        dataset_size=dataset_size,
        batch_size=batch_size,
        algo=algo,
        rounds=rounds,
        user_q=user_q,
        silos=silos,
        silo_sizes=silo_sizes,
        record_q=record_q,
        local_epochs=local_epochs,
        k=k,
        group_k=group_k,
        group_method=group_method,
        accountant=accountant,
        conversion=conversion,
        orders=orders,
    )
    return search(problem, epsilon, sigma=sigma, view=view)


@dataclass(frozen=True)
class Accounting:
    """What `uldp account` prints: every guarantee, first the headline one, and the assumptions."""

    guarantees: tuple[Guarantee, ...]
    assumptions: dict[str, Any]

    @property
    def headline(self) -> Guarantee:
        """The guarantee `epsilon` reports. With `algo`: the first algorithm's user-level one, for
        the released model (for uldp-group the group bound of its `group_k` records, by the first
        `group_method`, whatever other `k` were asked for). A bare mechanism has no user: the
        first `k` given (default 1), by the first `accountant` at k = 1, else by the first
        `group_method`; pass `k=1` first (or alone) for the record-level figure."""
        return next((g for g in self.guarantees if g.level == "user"), self.guarantees[0])

    @property
    def epsilon(self) -> float:
        """`headline`'s epsilon: user level for an algorithm; for a mechanism, the first k's."""
        return self.headline.epsilon

    @property
    def delta(self) -> float:
        return self.headline.delta

    def as_dict(self) -> dict[str, Any]:
        return {"assumptions": self.assumptions, "results": [g.as_dict() for g in self.guarantees]}


def _names(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


@overload
def account(
    *,
    sigma: float,
    delta: float = 1e-5,
    q: float | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    dataset_size: int | None = None,
    batch_size: int | None = None,
    algo: str | Sequence[str] | None = None,
    rounds: int | None = None,
    user_q: float = 1.0,
    silos: int | None = None,
    silo_sizes: Sequence[int] | None = None,
    record_q: float | None = None,
    local_epochs: int = 1,
    k: int | Sequence[int] | None = None,
    group_k: int | None = None,
    group_method: str | Sequence[str] | None = None,
    accountant: str | Sequence[str] = "rdp",
    conversion: str = "improved",
    orders: Any = "default",
) -> Accounting: ...


@overload
def account(event: Mechanism, /, **options: Any) -> list[Guarantee]: ...


def account(
    event: Mechanism | None = None,
    /,
    *,
    sigma: float | None = None,
    delta: float = 1e-5,
    q: float | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    dataset_size: int | None = None,
    batch_size: int | None = None,
    algo: str | Sequence[str] | None = None,
    rounds: int | None = None,
    user_q: float = 1.0,
    silos: int | None = None,
    silo_sizes: Sequence[int] | None = None,
    record_q: float | None = None,
    local_epochs: int = 1,
    k: int | Sequence[int] | None = None,
    group_k: int | None = None,
    group_method: str | Sequence[str] | None = None,
    accountant: str | Sequence[str] = "rdp",
    conversion: str = "improved",
    orders: Any = "default",
    **options: Any,
) -> Accounting | list[Guarantee]:
    """`uldp account` as a call: the (epsilon, delta) a run gives one record, groups of `k`
    records, or a user (with `algo`), by each `accountant`; `group_method` defaults to
    ("rdp", "normal"). For uldp-group, `group_k` is the records kept per user (`uldp train
    --group-k`; default: the largest `k`): its user level is the group bound for `group_k`
    records, always stated, and `.epsilon` is that (`Accounting.headline`).

    TF-Privacy's `compute_dp_sgd_privacy(n, batch_size, noise_multiplier, epochs, delta)` with
    `used_microbatching=False` (as Opacus accounts) is `account(sigma=noise_multiplier,
    dataset_size=n, batch_size=batch_size, epochs=epochs, delta=delta).epsilon`, Poisson
    sampling; its default, microbatching, halves the noise multiplier: `uldp report` states that.
    Every number is an upper bound. Bad input raises `uldp.InvalidParameter` naming the keyword,
    a keyword the chosen `algo` (or the bare mechanism) does not read included.

    An event of your own (`uldp.SubsampledGaussian(sigma, q, steps)`, a `Composed`, ...) as the
    one positional argument is the form before issue 34, kept working: it is
    `uldp.accountants.account(event, delta=..., ks=..., methods=..., accountants=...)` and
    returns its list of `Guarantee`s.
    """
    if event is not None:
        mechanism_form = {
            "sigma": sigma,
            "q": q,
            "steps": steps,
            "epochs": epochs,
            "dataset_size": dataset_size,
            "batch_size": batch_size,
            "algo": algo,
            "rounds": rounds,
            "silos": silos,
            "silo_sizes": silo_sizes,
            "record_q": record_q,
            "group_k": group_k,
        }
        clash = [name for name, value in mechanism_form.items() if value is not None]
        if user_q != 1.0 or local_epochs != 1:
            clash.append("user_q" if user_q != 1.0 else "local_epochs")
        if clash:
            raise InvalidParameter(f"{clash[0]} describes the run: give it or an event, not both")
        from uldp.accountants.account import account as account_event

        if k is not None:
            options["ks"] = [k] if isinstance(k, int) else list(k)
        if group_method is not None:
            options["methods"] = _names(group_method)
        if accountant != "rdp":
            options["accountants"] = _names(accountant)
        return account_event(event, delta=delta, conversion=conversion, orders=orders, **options)
    if options:
        raise TypeError(f"account() got an unexpected keyword argument {next(iter(options))!r}")
    if sigma is None:
        raise InvalidParameter(
            "give sigma (the noise multiplier), or an event as the one positional argument"
        )
    ks_given = [] if k is None else [k] if isinstance(k, int) else list(k)
    algos: list[str | None] = [None] if algo is None else list(_names(algo))
    _refuse_unused(
        algos,
        {
            "q": q,
            "steps": steps,
            "epochs": epochs,
            "dataset_size": dataset_size,
            "batch_size": batch_size,
            "k": k,
            "group_method": group_method,
            "rounds": rounds,
            "group_k": group_k,
            "user_q": user_q,
            "silos": silos,
            "silo_sizes": silo_sizes,
            "record_q": record_q,
            "local_epochs": local_epochs,
        },
        {"user_q": 1.0, "local_epochs": 1},
        group=any(isinstance(x, int) and x > 1 for x in [*ks_given, group_k]),
    )
    from uldp.accountants.account import account_plan
    from uldp.accountants.assumptions import accounting_assumptions

    # uldp-group's user level is its group of group_k records, which account_plan always adds.
    ks = ks_given or [group_k if group_k is not None else 1]
    methods = _names(group_method if group_method is not None else ("rdp", "normal"))
    accountants = _names(accountant)
    plans = []
    for name in algos:
        problem = calibration_problem(
            delta=delta,
            q=q,
            steps=steps,
            epochs=epochs,
            dataset_size=dataset_size,
            batch_size=batch_size,
            algo=name,
            rounds=rounds,
            user_q=user_q,
            silos=silos,
            silo_sizes=silo_sizes,
            record_q=record_q,
            local_epochs=local_epochs,
            k=group_k if group_k is not None else max(ks),
        )
        plans.append(problem.plan(sigma, problem.schedule.steps))
    guarantees = tuple(
        g
        for plan in plans
        for g in account_plan(
            plan,
            delta=delta,
            accountants=accountants,
            ks=ks,
            methods=methods,
            conversion=conversion,
            orders=orders,
        )
    )
    used = list(dict.fromkeys([*accountants, *(g.accountant for g in guarantees)]))
    assumptions = accounting_assumptions(
        plans, delta=delta, accountants=used, conversion=conversion, orders=orders
    ).as_dict()
    return Accounting(guarantees, assumptions)
