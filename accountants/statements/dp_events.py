"""Our events as dp-accounting `DpEvent`s, and `DpEvent`s as plain JSON-able dicts.

dp-accounting (github.com/google/differential-privacy, python/dp_accounting) is the reference
description language of the field: TF-Privacy's `compute_dp_sgd_privacy_statement` builds its
events, and its `PLDAccountant` and `RdpAccountant` account them. Exporting a run as a `DpEvent`
lets anyone re-account it with those accountants, without uldp (tests/accountants/
test_interop.py does, and gets our epsilons back).

What maps (`to_dp_event`), all under add-or-remove-one-record adjacency, which is dp-accounting's
`NeighboringRelation.ADD_OR_REMOVE_ONE` and ours (`accountants.events`):

- SubsampledGaussian(sigma, q, steps) -> SelfComposedDpEvent(PoissonSampledDpEvent(q,
  GaussianDpEvent(sigma)), steps); with q = 1 -> SelfComposedDpEvent(GaussianDpEvent(sigma), steps),
  since Poisson sampling with probability 1 is no sampling; with steps = 0 -> NoOpDpEvent(),
  because dp-accounting refuses a self-composition of count 0 ("`count` must be positive") and
  nothing released costs nothing.
- Composed(events) -> ComposedDpEvent([...]) (sequential composition on the same data).
- ParallelSilos: dp-accounting has no parallel composition (every `DpEvent` acts on the one data
  set all events share). At record level a record lies in one silo, so the federation is as
  private as its worst silo: identical silos export as the one silo's event, and
  `silo_dp_events` gives one event per silo, whose epsilons' maximum is the record-level epsilon.
  Different silos are refused by `to_dp_event` rather than approximated.
- Group of k > 1: refused (k = 1 is the event itself): dp-accounting's events are record-level
  and it has no group-privacy event. What TF-Privacy accounts for a user of k records under
  Poisson sampling, and our pld group method too (accountants/tight/pld.py), is the self-composed
  MixtureOfGaussiansDpEvent(sigma, sensitivities 0..k, Binomial(k, q) weights): a dominating pair
  for the group, not a description of what the run released, so it is not passed off as one.
- KnownParticipation: refused; dp-accounting has no event for an observer who knows which rounds
  a user took part in (ULDP-FL Algorithm 4's server view).

Serialisation (`dp_event_to_dict`, `dp_event_from_dict`): a nested dict keyed by the class name,
{"type": "SelfComposedDpEvent", "event": {...}, "count": 100000}, whose other keys are the
class's attrs fields. dp-accounting 0.6 offers `DpEvent.to_named_tuple` / `from_named_tuple`;
the dict holds exactly what `to_named_tuple` holds (the attrs fields, `class_name` as "type",
and `module_name` implied: only `dp_accounting.dp_event`'s classes are written or read; the tests
check the two agree), but we do not call them:
- `from_named_tuple` imports whatever module the data names and calls whatever class it finds
  there, which a file read from disk must not be allowed to choose;
- `to_named_tuple` rebuilds each sequence field with the sequence's own type, which fails on a
  `range` (TF-Privacy builds MixtureOfGaussiansDpEvent's sensitivities as `range(k + 1)`), and it
  leaves numpy arrays (its sampling_probs there) as they are, which are not JSON.
Sequences come back as lists, numbers as int or float as their fields are annotated.

dp_accounting is imported inside the functions only: importing it costs about a second
(accountants/events.py), and this module is imported by commands that may never use it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.errors import DataError, InvalidParameter

from ..events import (
    Composed,
    Event,
    Group,
    KnownParticipation,
    Mechanism,
    ParallelSilos,
    SubsampledGaussian,
    describe,
)
from ..plan import Plan

if TYPE_CHECKING:
    from dp_accounting.dp_event import DpEvent

#: The module whose classes the dicts name; no other is read or written.
DP_EVENT_MODULE = "dp_accounting.dp_event"

_NO_PARALLEL = (
    "dp-accounting has no parallel composition (all its events act on one data set); export each "
    "silo with silo_dp_events(): the record-level epsilon is the largest of the silos' epsilons"
)
_NO_GROUP = (
    "dp-accounting's events are record-level and it has no group-privacy event; account groups "
    "with uldp's group methods (rdp, normal, pld)"
)
_NO_KNOWN_PARTICIPATION = (
    "dp-accounting has no event for an observer who knows in which rounds the user took part "
    "(the server's view, ULDP-FL Algorithm 4); account it with uldp"
)


def to_dp_event(event: Event) -> DpEvent:
    """The dp-accounting `DpEvent` describing `event` (see the module docstring for the mapping).

    Raises InvalidParameter, with the reason, for an event dp-accounting cannot describe:
    parallel silos that differ, a group, a known-participation mixture (also inside a
    composition).
    """
    from dp_accounting import dp_event as de

    if isinstance(event, SubsampledGaussian):
        if event.steps == 0:
            return de.NoOpDpEvent()
        step: DpEvent = de.GaussianDpEvent(noise_multiplier=float(event.sigma))
        if event.q < 1.0:
            step = de.PoissonSampledDpEvent(sampling_probability=float(event.q), event=step)
        return de.SelfComposedDpEvent(event=step, count=int(event.steps))
    if isinstance(event, ParallelSilos):
        first = event.silos[0]
        if any(silo != first for silo in event.silos[1:]):
            raise InvalidParameter(
                f"cannot export {describe(event)} that differ as one DpEvent: {_NO_PARALLEL}"
            )
        # Identical silos: a record lies in one of them, and each releases the same mechanism.
        return to_dp_event(first)
    if isinstance(event, Composed):
        return de.ComposedDpEvent(events=[to_dp_event(part) for part in event.events])
    if isinstance(event, Group):
        if event.k == 1:  # a group of one record is the record
            return to_dp_event(event.event)
        raise InvalidParameter(f"cannot export {describe(event)} as a DpEvent: {_NO_GROUP}")
    if isinstance(event, KnownParticipation):
        raise InvalidParameter(f"cannot export {describe(event)} as a DpEvent: {_NO_KNOWN_PARTICIPATION}")
    raise InvalidParameter(f"cannot export {type(event).__name__!r} as a DpEvent: not a uldp event")


def silo_dp_events(mechanism: Mechanism) -> list[DpEvent]:
    """One `DpEvent` per silo, in the silos' order (a single mechanism is one silo).

    A record lies in exactly one silo, so the record-level epsilon at any delta is the largest
    of these events' epsilons (parallel composition, ULDP-FL §D.2): what our pld and prv
    accountants compute for `ParallelSilos`. (Our rdp accountant converts the order-wise maximum
    of the silos' RDP curves, which can only be larger than the largest silo's epsilon.)
    """
    if isinstance(mechanism, SubsampledGaussian):
        return [to_dp_event(mechanism)]
    if isinstance(mechanism, ParallelSilos):
        return [to_dp_event(silo) for silo in mechanism.silos]
    raise InvalidParameter(f"silo_dp_events takes a mechanism or parallel silos, got {describe(mechanism)}")


def dp_event_to_dict(dp_event: DpEvent) -> dict[str, Any]:
    """`dp_event` as nested plain dicts, lists and numbers (json.dumps-able, strict JSON).

    InvalidParameter for an object that is not one of dp_accounting.dp_event's classes, or that
    holds a value JSON cannot carry (a string, a non-finite number, an unknown object).
    """
    import attr
    from dp_accounting import dp_event as de

    def encode(event: Any, where: str) -> dict[str, Any]:
        cls = type(event)
        if not isinstance(event, de.DpEvent) or cls.__module__ != DP_EVENT_MODULE:
            got = f"{cls.__module__}.{cls.__qualname__}"
            raise InvalidParameter(f"{where}: expected one of {DP_EVENT_MODULE}'s events, got {got}")
        out: dict[str, Any] = {"type": cls.__name__}
        for field in attr.fields(cls):  # the fields to_named_tuple writes, in its order
            if field.name == "type":
                raise InvalidParameter(
                    f"{where}: {cls.__name__} has a field named 'type', which the dict uses"
                )
            out[field.name] = value(getattr(event, field.name), f"{where}.{field.name}")
        return out

    def value(x: Any, where: str) -> Any:
        if isinstance(x, de.DpEvent):
            return encode(x, where)
        if isinstance(x, bool):  # a bool is an Integral; no DpEvent field is one
            raise InvalidParameter(f"{where}: a boolean is not a DpEvent field value")
        if isinstance(x, numbers.Integral):
            return int(x)
        if isinstance(x, numbers.Real):
            if not math.isfinite(x):
                raise InvalidParameter(f"{where}: {x} is not a finite number, which JSON cannot carry")
            return float(x)
        # numpy arrays too: TF-Privacy passes one as MixtureOfGaussiansDpEvent's sampling_probs.
        if isinstance(x, (Sequence, np.ndarray)) and not isinstance(x, (str, bytes)):
            return [value(item, f"{where}[{i}]") for i, item in enumerate(list(x))]
        raise InvalidParameter(f"{where}: cannot write a {type(x).__name__} value")

    return encode(dp_event, "event")


def dp_event_from_dict(d: Mapping[str, Any]) -> DpEvent:
    """The `DpEvent` that `dp_event_to_dict` wrote as `d` (also after a JSON round trip).

    The class is looked up by name in dp_accounting.dp_event only, never imported from a name
    the data gives. DataError, naming the place in the dict, for an unknown type, a missing or
    unknown field, or a value of the wrong kind.
    """
    import attr
    from dp_accounting import dp_event as de

    def decode(obj: object, where: str) -> DpEvent:
        if not isinstance(obj, Mapping):
            raise DataError(f"{where}: expected a DpEvent object with a 'type', got {type(obj).__name__}")
        name = obj.get("type")
        cls = getattr(de, name, None) if isinstance(name, str) and not name.startswith("_") else None
        if not (isinstance(cls, type) and issubclass(cls, de.DpEvent) and cls is not de.DpEvent):
            raise DataError(f"{where}: {name!r} is not a dp-accounting event type")
        fields = {field.name: field for field in attr.fields(cls)}
        unknown = sorted(set(obj) - set(fields) - {"type"})
        if unknown:
            raise DataError(f"{where}: {name} has no field {unknown[0]!r} (its fields: {', '.join(fields)})")
        missing = [n for n, f in fields.items() if n not in obj and f.default is attr.NOTHING]
        if missing:
            raise DataError(f"{where}: {name} needs the field {missing[0]!r}")
        values = {n: value(obj[n], fields[n].type, f"{where}.{n}") for n in fields if n in obj}
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise DataError(f"{where}: cannot build {name}: {exc}") from None

    def value(x: object, annotation: object, where: str) -> Any:
        if isinstance(x, Mapping):
            return decode(x, where)
        if isinstance(x, list):
            return [value(item, None, f"{where}[{i}]") for i, item in enumerate(x)]
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise DataError(f"{where}: expected a number, a list or an event, got {x!r}")
        # A count must stay an int (dp-accounting multiplies counts and compares them to ints);
        # a float field takes a JSON integer such as 1 as 1.0.
        if annotation is int:
            if not isinstance(x, int):
                raise DataError(f"{where}: expected an integer, got {x!r}")
            return x
        return float(x) if annotation is float else x

    return decode(d, "event")


def dp_event_document(
    plan: Plan,
    *,
    group_sizes: Sequence[int] = (),
    user_k: int | None = None,
    also_stated: Sequence[str] = (),
) -> dict[str, Any]:
    """`plan`'s mechanism as JSON-able DpEvents, with how to re-account them and what they leave out.

    `events` holds one DpEvent, or one per silo when the silos differ (`combine`: "max": the
    record-level epsilon is the largest of theirs). The unit is what one step of the mechanism
    protects: a record (DP-SGD, ULDP-GROUP-k's silos) or a user (the user-level algorithms, whose
    released mechanism is a user-level Gaussian, ULDP-FL Theorems 1 and 3).

    `not_covered` names every claim of the statement the events do not carry, so an export never
    reads as the whole statement: the group claims (`group_sizes` above 1, and `user_k`, the most
    records one person has), which dp-accounting has no event for, the server's view, and
    `also_stated`, other claims the caller states, each with why it is not exported.
    """
    from importlib.metadata import version

    mechanism = plan.mechanism
    silos = mechanism.silos if isinstance(mechanism, ParallelSilos) else (mechanism,)
    single = len(set(silos)) == 1
    events = [to_dp_event(mechanism)] if single else silo_dp_events(mechanism)
    user_level = plan.algorithm != "mechanism" and plan.group_k is None
    not_covered = []
    if plan.group_k is not None:
        not_covered.append(
            f"user level: group privacy for the {plan.group_k} records a user keeps ({_NO_GROUP})"
        )
    unit = "user" if user_level else "record"
    for k in dict.fromkeys(group_sizes):
        if k > 1 and k != plan.group_k:
            not_covered.append(f"any {k} {unit}s: group privacy ({_NO_GROUP})")
    if user_k is not None and user_k > 1:
        not_covered.append(f"one user (at most {user_k} records): group privacy ({_NO_GROUP})")
    not_covered.extend(also_stated)
    if isinstance(mechanism, SubsampledGaussian) and mechanism.q < 1 and user_level:
        not_covered.append(f"the server's view of the user sample: {_NO_KNOWN_PARTICIPATION}")
    return {
        "format": "dp-accounting DpEvent",
        "dp_accounting_version": version("dp-accounting"),
        "algorithm": plan.algorithm,
        "unit": unit,
        "neighbouring": f"add or remove one {unit} (ADD_OR_REMOVE_ONE)",
        "combine": "single" if single else "max",
        "events": [dp_event_to_dict(e) for e in events],
        "not_covered": not_covered,
        "how": (
            "event = uldp.accountants.statements.dp_events.dp_event_from_dict(doc['events'][i]); "
            "dp_accounting.pld.PLDAccountant().compose(event).get_epsilon(delta) (or rdp.RdpAccountant)"
            + ("; the epsilon is the largest over the events" if not single else "")
        ),
    }
