"""What keeps a silo from drawing the same noise twice, for both of its ClientApps (uldp's own,
client_app.py, and the mod of a user's app, user_mod.py).

A silo draws round t's noise from round_rngs(entropy, t) (a phase's from phase_rng(entropy, t,
silo, name)): answered twice on two models, the two replies carry the same draw, and their
difference is noise-free. So a silo sets a run (the server's `job`) up once per node, answers
each round once and in order, and each phase of a round once; anything asking again is refused
with a ProtocolError (one line, which the ClientApp sends back as its refusal).
"""

from __future__ import annotations

from typing import Any

from flwr.app import ConfigRecord, Context

from uldp.errors import ProtocolError

JOBS = "uldp_jobs"  # ConfigRecord in a node's context.state: the runs (jobs) set up on it


def set_up_once(context: Context, job: str) -> None:
    """Note that run `job` is set up on this node; ProtocolError if it was before (set up again,
    its cached working set, the old entropy, would answer its rounds again)."""
    jobs: Any = context.state.get(JOBS, ConfigRecord({"jobs": []}))
    if job in list(jobs["jobs"]):
        raise ProtocolError(f"run {job} was already set up on this silo; a silo sets up a run once")
    jobs["jobs"] = [*list(jobs["jobs"]), job]
    context.state[JOBS] = jobs


def check_round(state: Any, t: int) -> None:
    """Refuse round `t` unless it comes after the last round answered (`state["answered"]`)."""
    if t <= int(state.get("answered", 0)):
        raise ProtocolError(f"round {t} was already answered; a silo never draws a round's noise twice")


def check_phase(state: Any, t: int, name: str) -> list[str]:
    """Refuse phase `name` of round `t` if it was answered; the phases answered so far."""
    done = [str(key) for key in state.get("phases", [])]
    if f"{t}:{name}" in done:
        raise ProtocolError(f"phase {name} of round {t} was already answered; its noise is never drawn twice")
    return done
