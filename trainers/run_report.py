"""A finished or interrupted run's privacy statement, from its record and the rounds it completed.

A run accounted by one user-level plan (the ULDP-FL algorithms) is re-planned for the rounds it
completed with the settings its record holds (`plan_algorithm`, as `runner.accounting_plan`
does) and stated like a plan (`accountants.statements.statement.plan_statement`): every accountant, group
sizes, the server's view, the attack bounds. The report then checks its RDP user-level epsilon
against the one the run recorded for its last round: one code path, two callers.

Runs accounted otherwise (per budget tier, per subject over the data's holdings, per round as
dropouts happened) cannot be re-accounted without their data; the report states the figures the
run recorded for its last round, each with the attack bound of its (epsilon, delta) point.
"""

from __future__ import annotations

import dataclasses
import math

from uldp.accountants.plan import Plan
from uldp.accountants.private_sampling import PrivateSampling, private_rate, privately_sampled
from uldp.accountants.statements.statement import (
    DEFAULT_ACCOUNTING,
    Accounting,
    Claim,
    Progress,
    Statement,
    plan_statement,
    recorded_claim,
)
from uldp.errors import InvalidParameter

from .algorithms import plan_algorithm
from .run_record import RunFiles

#: Within this relative difference the recomputed and the recorded epsilon are the same figure
#: (JSON round-trips floats exactly; CSV keeps every digit Python prints).
_SAME = 1e-9


def run_statement(
    run: RunFiles, how: Accounting = DEFAULT_ACCOUNTING, *, progress: Progress | None = None
) -> Statement:
    """The statement of a run from its files; delta is the run's own (`how.delta` is ignored)."""
    record, rows = run.record, run.rows
    t = run.rounds_done
    delta = float(record["delta"])
    title = f"{record['algorithm']}, {t} of {record['rounds']} rounds on {record['data']['name']}"
    if record["kind"] == "plan" and t > 0:
        plan = run_plan(run)
        rate = run_private_sampling(record)
        if rate is not None:  # `uldp train --private-sampling`: the server does not learn the sample
            plan = privately_sampled(plan, rate)
        statement = plan_statement(
            plan,
            dataclasses.replace(how, delta=delta),
            source="run",
            title=title,
            private_sampling=rate is not None,
            progress=progress,
        )
        statement.checks.append(_check(statement, rows[-1]))
    else:
        statement = Statement("run", title, delta, _recorded(record, rows), {"delta": f"{delta:g}"})
        if record.get("assumptions"):
            statement.assumptions.update(record["assumptions"])
        statement.assumptions["bound"] = (
            "the epsilons this run recorded for its last round (its own accounting, which needs the "
            "run's data to redo); attack bounds from each (epsilon, delta) point"
        )
    statement.settings = {
        "run": run.where,
        "rounds_done": t,
        "rounds_planned": record["rounds"],
        "algorithm": record["algorithm"],
        "data": record["data"],
    }
    statement.caveats[:0] = caveats(record, rows)
    if run.unverified:  # files from before digests, or an interrupted run's metrics
        statement.caveats.insert(0, run.unverified)
    return statement


def run_private_sampling(record: dict) -> PrivateSampling | None:
    """The private sampling rate m/P of a run made with `uldp train --private-sampling` (ULDP-FL
    §4.1): its record's `private_sampling` true, `sampling_slots` P and `user_q` already m/P;
    None for a run without it (a record from before it has neither key)."""
    if not record.get("private_sampling"):
        return None
    return private_rate(float(record["user_q"]), int(record["sampling_slots"]))


def run_plan(run: RunFiles) -> Plan:
    """The plan of the rounds a run completed (`runner.accounting_plan` for them), from its record."""
    record = run.record
    if record["kind"] != "plan" or not run.rounds_done:
        reason = (
            "it completed no round"
            if not run.rounds_done
            else f"it is accounted {_KIND_TEXT[record['kind']]}"
        )
        raise InvalidParameter(f"--run: {run.where} has no single mechanism to export: {reason}")
    params = {**record["plan_params"], "rounds": run.rounds_done}
    if params.get("silo_sizes") is not None:
        params["silo_sizes"] = tuple(params["silo_sizes"])
    return plan_algorithm(record["accounted_as"], **params)


_KIND_TEXT = {
    "personalized": "per budget tier (rPDP-FL)",
    "subject": "per subject over the data's holdings (Marathe & Kanani)",
    "observed": "round by round as dropouts happened (Baek et al.)",
    "none": "not at all (no noise)",
}


def _check(statement: Statement, last: dict) -> str:
    """The RDP user-level epsilon recomputed here against the run's own record of it."""
    user = next((c for c in statement.claims if c.level == "user" and c.view == "released model"), None)
    rdp = None if user is None else next((b for b in user.bounds if b.accountant == "rdp"), None)
    recorded = float(last["epsilon"])
    if rdp is None:
        return f"the run recorded epsilon {recorded:.6g} (RDP) for round {last['round']}"
    same = rdp.epsilon == recorded or (
        math.isfinite(recorded) and abs(rdp.epsilon - recorded) <= _SAME * max(1.0, abs(recorded))
    )
    verdict = "equal" if same else "DIFFERENT: report this as a bug"
    return (
        f"user-level RDP epsilon {rdp.epsilon:.6g} recomputed here; the run recorded {recorded:.6g} for "
        f"round {last['round']}: {verdict}"
    )


def caveats(record: dict, rows: list[dict]) -> list[str]:
    """What this run earned beyond its settings: a fixed seed, interruption, sampling, dropouts."""
    out = []
    t = len(rows)
    if t < record["rounds"]:
        out.append(
            f"the run stopped after {t} of {record['rounds']} rounds; the figures are for the {t} it "
            "completed (a resumed run spends more)"
        )
    if record["noise_fixed"]:
        out.append(
            "a fixed --noise-seed drove the noise and the sampling: anyone who knows the seed can "
            "remove the noise, and no guarantee holds against them (experiments only)"
        )
    if record.get("private_sampling") and record["kind"] == "plan":
        rate = run_private_sampling(record)
        assert rate is not None
        out.append(
            f"users (participants) were sampled at q = m/P = {rate.m}/{rate.slots} = {rate.q:g} by the "
            "silos through oblivious transfer (private sampling, ULDP-FL §4.1): the server does not "
            "learn the sample, so the amplified figure holds against it too"
        )
    elif record.get("user_q", 1.0) < 1 and record["kind"] in ("plan", "observed"):
        out.append(
            f"users (participants) were sampled at q = {record['user_q']:g} by the server: the "
            "amplified figure holds for the released model only; the server's view is stated apart"
        )
    dropped = [r for r in rows if (r.get("dropped_upload") or 0) + (r.get("dropped_calibration") or 0) > 0]
    if dropped:
        count = sum((r.get("dropped_upload") or 0) + (r.get("dropped_calibration") or 0) for r in dropped)
        out.append(
            f"{count} dropouts happened in {len(dropped)} of {t} rounds; the epsilons account the "
            "rounds as they happened (Baek et al. §4)"
        )
    silent = [r for r in rows if r.get("released") is False]
    if silent:
        out.append(
            f"{len(silent)} rounds released nothing (too few survivors or no sample) and spent nothing"
        )
    if record.get("secure_capable") and not record.get("secure"):
        out.append(
            "no --secure: the server reads each participant's own upload (its view is stated apart)"
            if record["kind"] == "observed"
            else "no --secure: the server computes the per-user weights in the clear from each silo's "
            "record counts (ULDP-FL §4 hides them with Protocol 1)"
        )
    if record["data"].get("synthetic"):
        out.append("synthetic data generated by uldp: the figures depend only on its shape, not its content")
    return out


#: Marathe & Kanani's adversary (§3): the honest-but-curious server, which sees every update.
_SUBJECT_VIEW = "server (every member's update)"
#: The views the personalised accounting records, as the report names them.
_VIEWS = {"model": "released model", "server": "server", "untrusted": "untrusted silos and server"}


def _recorded(record: dict, rows: list[dict]) -> list[Claim]:
    """The last round's recorded epsilons as claims (per tier, per subject, per view)."""
    if not rows:
        return []
    last, delta = rows[-1], float(record["delta"])
    kind = record["kind"]
    if kind == "none":
        return [
            recorded_claim(
                "user",
                "anyone",
                math.inf,
                delta,
                "not private",
                neighbouring="-",
                note="no noise: no guarantee",
            )
        ]
    if kind == "subject":
        out = [
            recorded_claim(
                "subject",
                "one subject, at its busiest member",
                last["subject_epsilon_member"],
                delta,
                "Marathe & Kanani, local (per member)",
                view=_SUBJECT_VIEW,
                neighbouring="add or remove one subject's items at one member",
            ),
            recorded_claim(
                "subject",
                "one subject, across all members",
                last["subject_epsilon_federation"],
                delta,
                "horizontal composition (Theorem 3.9)",
                view=_SUBJECT_VIEW,
                neighbouring="add or remove one subject's items everywhere",
            ),
        ]
        if "item_epsilon" in last:
            out.insert(
                0,
                recorded_claim(
                    "record",
                    "one item",
                    last["item_epsilon"],
                    delta,
                    "DP-SGD, item level",
                    neighbouring="add or remove one item",
                ),
            )
        if "user_ldp_epsilon" in last:
            out.append(
                recorded_claim(
                    "user",
                    "one subject, local DP",
                    last["user_ldp_epsilon"],
                    delta,
                    "user-level LDP (Theorem 3.3)",
                    neighbouring="replace one subject's data",
                )
            )
        return out
    if kind == "personalized":
        out = []
        i = 1
        while f"tier{i}_budget" in last:
            budget, prefix = last[f"tier{i}_budget"], f"tier{i}_epsilon_"
            unit = "user" if f"{prefix}model" in last else "record"
            for key, value in last.items():
                if key.startswith(prefix):
                    view = key[len(prefix) :]
                    out.append(
                        recorded_claim(
                            "tier",
                            f"a {unit} with budget {budget:g}",
                            value,
                            delta,
                            f"rPDP-FL, {view} view",
                            view=_VIEWS.get(view, view),
                            neighbouring=f"add or remove one {unit} of this tier",
                        )
                    )
            i += 1
        return out
    out = [
        recorded_claim(
            "user",
            "one participant",
            last["epsilon"],
            delta,
            "as the rounds happened",
            neighbouring="add or remove one participant",
        )
    ]
    if last.get("server_epsilon") is not None:
        out.append(
            recorded_claim(
                "user",
                "one participant",
                last["server_epsilon"],
                delta,
                "server's view",
                view="server",
                neighbouring="add or remove one participant",
            )
        )
    return out
