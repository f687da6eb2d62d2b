"""A training run's preparation, shared by `uldp train`, `uldp audit` and `uldp.train`: the
settings the user left out, the data, each algorithm family's preparation before round 1, the
personalised budgets and the `TrainConfig`.

The settings are a mapping keyed by `uldp train`'s parameter names (`algo`, `dataset`,
`data_path`, `sigma`, `local_steps`, ...: the Click parameters' names, which are `uldp.train`'s
keywords too), so the command and the call prepare a run through one code path and give the
same rounds for the same settings. What only a command does (progress lines, output locks, what
an interrupted run spent) stays in the CLI.

The family preparations are chosen from the algorithm's registry entry (`AlgorithmSpec`):
subject level (Marathe & Kanani: the noise calibrated over the data's holdings,
`subject_accounting.prepare_subject_run`), personalised budgets (rPDP-FL's per-record rates, or
ULDP-FL Algorithm 4's per-user rates: `rates.personalize_data`), and, for the algorithms
accounted by one user-level plan, the noise calibrated to a user-level `epsilon` after `rounds`
(`calibrate_plan_sigma`, as `uldp calibrate --algo` inverts the same plan).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from uldp.errors import InvalidParameter

from .defaults import train_defaults

#: `uldp train`'s defaults of the settings that depend on neither the data set nor the algorithm
#: and that the call takes as keywords (`uldp.training.ALGORITHM_SETTINGS`) or `uldp audit`
#: leaves at their defaults (audit's NOT_AUDITED): one table for both, which
#: tests/test_library_training.py holds equal to the command's Click defaults.
SETTING_DEFAULTS: dict[str, Any] = {
    "users": None,
    "silos": None,
    "allocation": "uniform",
    "alpha": None,
    "labels_per_user": None,
    "data_path": None,
    "user_column": None,
    "label_column": None,
    "silo_column": None,
    "task": "binary",
    "global_lr": None,
    "batch_size": 32,
    "local_batch_size": None,
    "local_steps": None,
    "silo_q": None,
    "group_k": "median",
    "secure": False,
    "key_bits": 3072,
    "test_keys": False,
    "private_sampling": False,
    "sampling_slots": 100,
    "audit_rate": 0.05,
    "loop": False,
    "epsilon": None,
    "metrics_path": None,
    "budgets_file": None,
    "user_budgets": None,
    "distribution": None,
    "budget_column": None,
    "threat_model": None,
    "dropout": None,
    "dropout_at": None,
    "dropout_schedule": None,
    "calibration": None,
    "min_weight_sum": None,
    "n_max": None,
    "threshold": None,
}

#: The settings whose defaults depend on the (data set, algorithm): trainers/defaults.py.
DEFAULTED = ("users", "rounds", "sigma", "lr", "global_lr", "local_epochs", "model")

#: The settings that `train_config` takes as they are (`uldp audit` hands over the same).
CONFIG_OPTIONS = (
    "clip",
    "user_q",
    "batch_size",
    "local_batch_size",
    "group_k",
    "delta",
    "seed",
    "noise_seed",
    "loop",
    "local_steps",
    "silo_q",
)

#: The settings an algorithm may leave unused (`AlgorithmSpec.options`), by parameter name.
ALGORITHM_OPTIONS = {
    "sigma": "sigma",
    "clip": "clip",
    "lr": "lr",
    "global_lr": "global_lr",
    "local_epochs": "local_epochs",
    "batch_size": "batch_size",
    "local_batch_size": "local_batch_size",
    "group_k": "group_k",
    "loop": "batched",
    "local_steps": "local_steps",
    "silo_q": "silo_q",
    "dropout": "dropout",
    "dropout_at": "dropout_at",
    "dropout_schedule": "dropout_schedule",
    "calibration": "calibration",
    "min_weight_sum": "min_weight_sum",
    "n_max": "n_max",
    "threshold": "threshold",
    "epsilon": "target_epsilon",
}

#: (data) -> each training record's budget, or None: a budgets file read by the caller (the CLI
#: reads `--epsilon-csv` as `uldp personalize` does).
RecordBudgets = Callable[[Any], Any]


#: How a check names a setting: `uldp.train`'s keyword as it is, `uldp train`'s option spelled.
Spell = Callable[[str], str]


def keyword(name: str) -> str:
    """`uldp.train`'s spelling of a setting: its keyword."""
    return name


def ignored_settings(
    algo: str,
    *,
    dataset: str | None,
    data: Any,
    user_column: str | None,
    secure: bool,
    checkpoint_dir: Any,
    spell: Spell = keyword,
) -> dict[str, str]:
    """{setting: why the run would ignore it}: the algorithm's unused options (its registry entry),
    the data's (your own data names its users, silos and task), Protocol 1's keys without secure
    aggregation, overwrite without a checkpoint (issue 12). `uldp train` refuses one given on
    the command line and warns about one from --config; `uldp.train` refuses any given."""
    from .algorithms import get_algorithm
    from .algorithms.secure_algorithms import private_sampling_names

    spec = get_algorithm(algo)
    ignored: dict[str, str] = {}
    for name, field_name in ALGORITHM_OPTIONS.items():
        if name == "epsilon" and epsilon_applies(algo):
            continue  # sigma calibrated to it (subject level, or the algorithm's user-level plan)
        if field_name not in spec.options:
            uses = sorted(spell(o) for o, f in ALGORITHM_OPTIONS.items() if f in spec.options and o != "loop")
            ignored[name] = f"{algo} does not use it (it takes {', '.join(uses) or 'none of these'})"
    if data is not None:
        for name in ("users", "silos", "allocation", "alpha", "labels_per_user", "task", "silo_column"):
            ignored[name] = f"your own data ({spell('data')}) names its users, silos and task"
    elif user_column is not None:
        for name in ("users", "allocation", "alpha", "labels_per_user"):
            ignored[name] = f"your own table names its users ({spell('user_column')})"
    else:
        ignored["task"] = (
            f"it describes your own table ({spell('user_column')}); a built-in data set has its task"
        )
        ignored["silo_column"] = f"it describes your own table ({spell('user_column')})"
        if dataset != "creditcard":
            ignored["data_path"] = f"{dataset} is built in; only creditcard reads {spell('data_path')}"
    if not spec.record_level:
        ignored["threat_model"] = f"it chooses the threat model of rpdp/unidp's rates, and {algo} has none"
    else:
        ignored["user_q"] = f"{algo} samples silos ({spell('silo_q')}) and records, not users"
    if spec.subject_level:
        ignored["user_q"] = (
            f"{algo} trains every member every round and samples items (q from {spell('batch_size')}), "
            "not users"
        )
    if not secure:
        ignored["key_bits"] = f"it sizes Protocol 1's keys, which only {spell('secure')} uses"
    elif spec.observed:
        why = f"{algo}'s secure aggregation agrees X25519 keys, it has no Paillier keys to size"
        ignored["key_bits"] = ignored["test_keys"] = why
    if not (secure and algo in private_sampling_names()):
        why = f"private sampling runs inside Protocol 1: uldp-avg-w or uldp-sgd-w with {spell('secure')}"
        ignored.update(dict.fromkeys(("private_sampling", "sampling_slots", "audit_rate"), why))
    if checkpoint_dir is None:
        ignored["overwrite"] = f"it replaces a {spell('checkpoint')} directory, and none was given"
    return ignored


def check_pairs(settings: Mapping[str, Any], spell: Spell = keyword) -> None:
    """The settings that need another (resume a checkpoint that exists, test keys and a threshold
    with secure aggregation) or exclude one (resume or overwrite; one source of dropouts): one
    InvalidParameter line naming them (issues 12, 32)."""
    from pathlib import Path

    from .checkpoint_file import CHECKPOINT_NAME

    s = settings
    if s.get("resume") and s.get("checkpoint_dir") is None:
        raise InvalidParameter(f"{spell('resume')} needs {spell('checkpoint')} (a directory)")
    if s.get("resume") and s.get("overwrite"):
        raise InvalidParameter(
            f"{spell('resume')} continues the checkpoint, {spell('overwrite')} replaces it: give one"
        )
    if s.get("resume") and not (Path(s["checkpoint_dir"]) / CHECKPOINT_NAME).exists():
        # Starting afresh instead would hide a wrong folder, a lost checkpoint or a typo (issue 32).
        raise InvalidParameter(
            f"{spell('resume')}: {s['checkpoint_dir']} holds no checkpoint ({CHECKPOINT_NAME}) to "
            f"continue; drop {spell('resume')} to start a fresh run"
        )
    if s.get("test_keys") and not s.get("secure"):
        raise InvalidParameter(f"{spell('test_keys')} only applies with {spell('secure')}")
    if s.get("threshold") is not None and not s.get("secure"):
        raise InvalidParameter(
            f"{spell('threshold')} sets secure aggregation's k, which only {spell('secure')} runs; "
            f"add {spell('secure')}"
        )
    if not s.get("private_sampling"):
        for name, default in (("sampling_slots", 100), ("audit_rate", 0.05)):
            if s.get(name) not in (None, default):
                raise InvalidParameter(f"{spell(name)} applies only with {spell('private_sampling')}")
    if s.get("dropout") is not None and s.get("dropout_schedule") is not None:
        raise InvalidParameter(f"give {spell('dropout')} RATE or {spell('dropout_schedule')} FILE, not both")


def check_budget_sources(
    algo: str,
    *,
    distribution: Any = None,
    budgets_file: Any = None,
    budget_column: str | None = None,
    user_budgets: Any = None,
    user_column: str | None = None,
    user_q: float = 1.0,
    epsilon: float | None = None,
    spell: Spell = keyword,
) -> bool:
    """Refuse budgets an algorithm cannot use, more than one source, and a target `epsilon` with
    them (one line); True when the run has personalised budgets (issue 14).

    The sources: `distribution`, a budgets file (`uldp train --epsilon-csv`, its column
    `budget_column`, default epsilon), or `budget_column` alone, a column of your own table; per
    user, `user_budgets` (ULDP-FL Algorithm 4). A target epsilon calibrates one sigma for every
    user after the budgets' rates were set, so every user would exceed its budget: refused.
    """
    from .algorithms import get_algorithm, user_budget_names

    spec = get_algorithm(algo)
    table_column = budget_column is not None and budgets_file is None
    given = [
        spell(name)
        for name, value in (
            ("distribution", distribution),
            ("budgets_file", budgets_file),
            ("budget_column", budget_column if table_column else None),
        )
        if value is not None
    ]
    if user_budgets is not None:
        if not spec.user_budgets:
            names = user_budget_names()
            raise InvalidParameter(
                f"{spell('user_budgets')} applies to {', '.join(names[:-1])} and {names[-1]}, not {algo}"
            )
        if user_q != 1.0:
            raise InvalidParameter(
                f"{spell('user_budgets')} samples every user at its own q_u; drop {spell('user_q')}"
            )
        if epsilon is not None:
            raise InvalidParameter(
                f"give {spell('epsilon')} (one target for every user) or {spell('user_budgets')} (one "
                "budget per user), not both"
            )
    if len(given) > 1:
        raise InvalidParameter(f"give one source of per-record budgets, not {' and '.join(given)}")
    if given and epsilon is not None:
        raise InvalidParameter(
            f"give {spell('epsilon')} (one target) or {given[0]} (a budget per record), not both"
        )
    if given and spec.user_budgets:
        raise InvalidParameter(
            f"{given[0]} gives per-record budgets (rpdp, unidp, default); {algo} protects users: "
            f"give {spell('user_budgets')} FILE|NAME"
        )
    if given and not (spec.record_level or not spec.private):
        raise InvalidParameter(f"{given[0]} applies to rpdp, unidp and default, not {algo}")
    if spec.record_level and not given:
        files = "" if spell("budgets_file") == "budgets_file" else f" {spell('budgets_file')} FILE,"
        raise InvalidParameter(
            f"{algo} needs each record's budget: give {spell('distribution')} NAME,{files} or "
            f"{spell('budget_column')} COLUMN of your own table"
        )
    if table_column and user_column is None:
        alone = "" if spell("budgets_file") == "budgets_file" else f" without {spell('budgets_file')}"
        raise InvalidParameter(
            f"{spell('budget_column')}{alone} names a column of your own table ({spell('data_path')} "
            f"with {spell('user_column')})"
        )
    return bool(given) or user_budgets is not None


def plan_calibrated(algo: str) -> bool:
    """Whether `epsilon` calibrates `algo`'s noise through its user-level plan (ULDP-FL §3):
    a private algorithm accounted by a plan, not per record, per subject or per round observed."""
    from .algorithms import get_algorithm

    spec = get_algorithm(algo)
    return spec.private and not (spec.record_level or spec.subject_level or spec.observed)


def epsilon_applies(algo: str) -> bool:
    """Whether a target `epsilon` sets `algo`'s noise (subject level, or a user-level plan)."""
    from .algorithms import get_algorithm

    return get_algorithm(algo).subject_level or plan_calibrated(algo)


def chosen_settings(settings: Mapping[str, Any], personal: bool) -> tuple[dict[str, Any], list[str]]:
    """(the settings, each given or from the defaults; the names of those left to the defaults,
    as the notes list them). With budgets and no sigma the noise is calibrated to them, and with
    a target `epsilon` to that."""
    from .algorithms import get_algorithm

    algo, dataset = settings["algo"], settings["dataset"]
    given = {name: settings[name] for name in DEFAULTED}
    defaults = train_defaults(dataset, algo)
    chosen = {k: v if v is not None else defaults[k] for k, v in given.items()}
    spec = get_algorithm(algo)
    calibrated = personal and given["sigma"] is None and spec.private  # default adds no noise
    if calibrated:
        chosen["sigma"] = None  # calibrated to the budgets (trainers/rates.py)
    # Your own data (a loader, arrays) names its users: their count is no default.
    fixed = {"model", "users"} if settings.get("data") is not None else {"model"}
    defaulted = [k.replace("_", "-") for k, v in given.items() if v is None and k not in fixed]
    targeted = settings.get("epsilon") is not None and epsilon_applies(algo)
    if calibrated or targeted or algo == "localgroupdp":
        if "sigma" in defaulted:
            defaulted.remove("sigma")  # calibrated to the budgets, not a default (the notes say so)
    return chosen, defaulted


def load_data(
    dataset,
    data_path=None,
    user_column=None,
    label_column=None,
    silo_column=None,
    task="binary",
    users=100,
    silos=None,
    allocation="uniform",
    labels_per_user=None,
    seed=0,
    budget_column=None,
    alpha=None,
    *,
    data=None,
    option: str = "--data",
):
    """The run's FederatedData: the user's own `data` (a loader's reference `FILE.py:NAME` or
    `module:NAME`, or an object `own_data.as_federated` takes), the user's own table
    (`user_column`), or a built-in data set allocated to users and silos."""
    if data is not None:
        from .data import own_data

        if isinstance(data, str):
            return own_data.load_data(data, option=option, seed=seed)
        return own_data.as_federated(data, option=option, seed=seed)
    if user_column is not None:
        from .data import load_table

        return load_table(
            data_path,
            user_column=user_column,
            label_column=label_column,
            silo_column=silo_column,
            silos=silos,
            task=task,
            seed=seed,
            budget_column=budget_column,
        )
    from .data import load_dataset

    return load_dataset(
        dataset,
        users=users,
        silos=silos,
        allocation=allocation,
        seed=seed,
        labels_per_user=labels_per_user,
        path=data_path,
        **({} if alpha is None else {"alpha": alpha}),
    )


def train_config(
    algo: str, rounds: int, chosen: Mapping[str, Any], *, loop: bool, local_steps, silo_q, **fields
):
    """The run's TrainConfig from the settings (`uldp audit` builds its run the same way).

    `chosen` holds the resolved sigma, local epochs and learning rates; `local_steps` and
    `silo_q` left unset (None) keep TrainConfig's defaults; `fields` go in as they are.
    """
    from .algorithms import TrainConfig

    return TrainConfig(
        algo=algo,
        rounds=rounds,
        sigma=chosen["sigma"],
        local_epochs=chosen["local_epochs"],
        lr=chosen["lr"],
        global_lr=chosen["global_lr"],
        batched=not loop,
        **({} if local_steps is None else {"local_steps": local_steps}),
        **({} if silo_q is None else {"silo_q": silo_q}),
        **fields,
    )


def private_sampling_settings(settings: Mapping[str, Any], spell: Spell = keyword) -> dict[str, Any]:
    """The TrainConfig fields of private sampling (ULDP-FL §4.1), with user_q rounded to the
    nearest m / P; none without `private_sampling` (user_q then stays as given)."""
    if not settings.get("private_sampling"):
        return {}
    rate = sampling_rate(settings["user_q"], settings["sampling_slots"], spell)
    return {
        "user_q": rate.q,
        "private_sampling": True,
        "sampling_slots": rate.slots,
        "audit_rate": settings["audit_rate"],
        "requested_user_q": settings["user_q"],
    }


def sampling_rate(user_q: float, slots: int, spell: Spell = keyword) -> Any:
    """user_q rounded to m / P (`accountants.private_sampling`), refusals spelled as the caller's."""
    from uldp.accountants.private_sampling import private_rate

    try:
        return private_rate(user_q, slots)
    except InvalidParameter as error:
        raise InvalidParameter(
            str(error)
            .replace("--user-q", spell("user_q"))
            .replace("--sampling-slots", spell("sampling_slots"))
        ) from None


def dropout_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The dp-fedavg-robust fields of TrainConfig the user gave (the others keep its defaults):
    the registry's DROPOUT_OPTIONS, which the settings are named after."""
    from .algorithms.registry import DROPOUT_OPTIONS

    return {name: settings[name] for name in DROPOUT_OPTIONS if settings.get(name) is not None}


def prepare_subject(
    data, settings: MutableMapping[str, Any], chosen: MutableMapping[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """Subject level (Marathe & Kanani): the noise calibrated to `epsilon` (or `sigma` taken)
    over the data's holdings before round 1; the TrainConfig fields that follow (item rate q,
    target, LocalGroupDP's per-member budget E and its Z, Corollary 3.5)."""
    from .algorithms import TrainConfig
    from .subject_accounting import prepare_subject_run

    epsilon = settings["epsilon"]
    data, setup = prepare_subject_run(
        data,
        settings["algo"],
        epsilon=epsilon,
        sigma=None if epsilon is not None else chosen["sigma"],
        group_k=settings["group_k"],
        batch_size=settings["batch_size"],
        local_steps=settings["local_steps"] or TrainConfig.local_steps,
        rounds=chosen["rounds"],
        delta=settings["delta"],
        seed=settings["seed"],
    )
    chosen["sigma"] = setup.sigma
    fields: dict[str, Any] = {"item_q": setup.item_q, "target_epsilon": epsilon}
    if setup.group is not None:
        fields["group_budget"] = setup.group.item_epsilon * setup.group.z
        settings["group_k"] = setup.group.z
    return data, fields


def prepare_budgets(
    data,
    settings: Mapping[str, Any],
    chosen: MutableMapping[str, Any],
    record_budgets: RecordBudgets | None = None,
):
    """Personalised budgets (rPDP-FL per record, ULDP-FL Algorithm 4 per user): each record's or
    user's rate q attached to the data, and sigma calibrated to the budgets if none was given."""
    from .algorithms import TrainConfig, get_algorithm
    from .rates import personalize_data

    s = settings
    data, personal_sigma = personalize_data(
        data,
        algo=s["algo"],
        record_level=get_algorithm(s["algo"]).record_level,
        record_budgets=None if record_budgets is None else record_budgets(data),
        distribution=s["distribution"],
        user_budgets_from=s["user_budgets"],
        seed=s["seed"],
        sigma=chosen["sigma"],
        local_steps=s["local_steps"] or TrainConfig.local_steps,
        rounds=chosen["rounds"],
        silo_q=s["silo_q"] or 1.0,
        delta=s["delta"],
        threat_model=s["threat_model"] or "untrusted",
        batch_size=s["batch_size"],
    )
    if personal_sigma is not None:
        chosen["sigma"] = personal_sigma
    return data


def calibrate_plan_sigma(data, cfg, epsilon: float) -> float:
    """The smallest noise multiplier whose user-level epsilon (RDP, the released model's view,
    the run's `epsilon` column) after `cfg.rounds` rounds is at most `epsilon`: the algorithm's
    plan on these silos (`Algorithm.plan_params`, what `runner.accounting_plan` compiles),
    inverted by the one calibrator (`accountants.calibrate`), re-accounted, never over."""
    from uldp.accountants.calibrate import calibrate

    from .algorithms import get_algorithm, make_algorithm, plan_algorithm
    from .runner import build_silos, user_epsilon

    if not epsilon > 0:
        raise InvalidParameter(f"epsilon must be > 0, got {epsilon:g}")
    spec = get_algorithm(cfg.algo)
    algorithm = make_algorithm(cfg, build_silos(data), data.task)
    params = algorithm.plan_params(cfg, cfg.rounds, data.n_silos)
    name = spec.accounted_as or spec.name

    def epsilon_of(sigma: float) -> float:
        return user_epsilon(plan_algorithm(name, **{**params, "sigma": sigma}), cfg.delta)

    return float(calibrate(epsilon_of, epsilon, "sigma").value)


def prepare(
    settings: MutableMapping[str, Any],
    chosen: MutableMapping[str, Any],
    personal: bool,
    *,
    record_budgets: RecordBudgets | None = None,
    fields: Mapping[str, Any] | None = None,
    spell: Spell = keyword,
):
    """(data, TrainConfig): the data loaded and prepared before round 1, by its family (the
    subject level's noise), by the personalised budgets (each record's or user's rate q), and
    the noise calibrated to a user-level `epsilon` for the plan-accounted algorithms.
    `settings` and `chosen` are updated where the preparation resolves them (sigma, Z);
    `fields` go into the TrainConfig as they are (`uldp audit`'s fault)."""
    from .algorithms import get_algorithm
    from .metrics_file import metrics_format

    s = settings
    if s.get("metrics_path"):
        metrics_format(s["metrics_path"])
    data = load_data(
        s["dataset"],
        s["data_path"],
        s["user_column"],
        s["label_column"],
        s["silo_column"],
        s["task"],
        chosen["users"],
        s["silos"],
        s["allocation"],
        s["labels_per_user"],
        s["seed"],
        budget_column=s["budget_column"] if s["budgets_file"] is None else None,
        alpha=s["alpha"],
        data=s.get("data"),
    )
    spec = get_algorithm(s["algo"])
    family: dict[str, Any] = dict(fields or {})
    if spec.subject_level:
        data, subject = prepare_subject(data, s, chosen)
        family.update(subject)
    if personal:
        data = prepare_budgets(data, s, chosen, record_budgets)
    targeted = s.get("epsilon") is not None and plan_calibrated(s["algo"])
    if targeted:
        chosen["sigma"] = chosen["sigma"] or 1.0  # a placeholder: calibrated below, on the same plan
    cfg = train_config(
        s["algo"],
        chosen["rounds"],
        chosen,
        **{**{name: s[name] for name in CONFIG_OPTIONS}, **private_sampling_settings(s, spell)},
        secure=s["secure"],
        key_bits=s["key_bits"],
        test_keys=s["test_keys"],
        **({} if s["threat_model"] is None else {"threat_model": s["threat_model"]}),
        **dropout_settings(s),
        **family,
    )
    if targeted:
        chosen["sigma"] = calibrate_plan_sigma(data, cfg, s["epsilon"])
        cfg = dataclasses.replace(cfg, sigma=chosen["sigma"])
        if s.get("resume") and s.get("checkpoint_dir") is not None:
            check_resumed_target(s["checkpoint_dir"], cfg.rounds, cfg.sigma, spell)
    return data, cfg


def check_resumed_target(checkpoint_dir: Any, rounds: int, sigma: float, spell: Spell = keyword) -> None:
    """A run resumed with a target `epsilon` calibrates sigma for its `rounds`: with other rounds
    than the checkpoint's, the rounds left would add another noise than the rounds done, and the
    accounting of one sigma would not hold. Refused, naming the checkpoint's sigma to resume with."""
    from pathlib import Path

    from .run_record import read_checkpoint_run

    record = read_checkpoint_run(Path(checkpoint_dir)).record
    saved = record.get("sigma")
    if saved is None or math.isclose(float(saved), sigma, rel_tol=1e-9):
        return
    raise InvalidParameter(
        f"{spell('epsilon')}: the checkpoint's sigma {float(saved):.6g} was calibrated for "
        f"{spell('rounds')} {record['rounds']}, and {spell('rounds')} {rounds} calibrates {sigma:.6g}; "
        f"resume with {spell('sigma')} {float(saved):.6g} instead of {spell('epsilon')}"
    )


def record_target(summary: MutableMapping[str, Any], settings: Mapping[str, Any]) -> None:
    """A plan-calibrated run's target `epsilon` in its summary as `epsilon_target`, as the
    subject-level runs record theirs (subject_accounting)."""
    if settings.get("epsilon") is not None and plan_calibrated(settings["algo"]):
        summary["epsilon_target"] = settings["epsilon"]


def model_label(model: Any) -> str | None:
    """The model's name before it is built, for a tracker's settings (the run's summary names
    it once built): a built-in name or a reference as given, a factory by its name."""
    if model is None or isinstance(model, str):
        return model
    return str(getattr(model, "__name__", None) or type(model).__name__)


def metric_key(metric: Any, data) -> str:
    """The history rows' key of the run's metric: the data's task metric, or the one given
    (a name, a reference, a callable: `own_model.resolve_metric`)."""
    if metric is None:
        return str(data.metric)
    from .own_model import resolve_metric

    return resolve_metric(metric, data.task)[0]
