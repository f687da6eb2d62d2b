"""The sampling rate of private user-level sub-sampling (ULDP-FL §4.1, "Private user-level
sub-sampling"), and what it changes in the accounting.

Under Protocol 1 the server draws each round's user sample itself (step 2(a) sets B_inv(N_u) = 0
for the users it leaves out), so user sampling amplifies the guarantee only against those who see
the released models, not against the server (ULDP-FL Remark 1). ULDP-FL §4.1 hides the sample
from the server: for every user the server prepares P slots, m of which carry the real encrypted
weight Enc(B_inv(N_u)) and the others Enc(0); the silos pick one slot per user by 1-out-of-P
oblivious transfer, all with the same choice from their shared seed R, so the server does not
learn which slot they took and Paillier hides from the silos whether it was a real one. A user is
then sampled with probability exactly q = m / P, independently per user and round (Poisson
sampling at m / P), and the server's view is the released model's view, amplified the same. A
cut-and-choose audit by the silos checks that the server put the real weight in exactly m of the
P slots (a server with more real slots would raise q silently).

So private sampling draws at rates m / P only: `private_rate` rounds a requested user q to the
nearest such rate, and the accounting uses the rounded rate. Pure Python; the protocol itself is
in `uldp.crypto`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from math import floor

from uldp.errors import InvalidParameter

from .events import SubsampledGaussian
from .plan import Plan

#: P when none is given: rates in steps of 1/100.
DEFAULT_SLOTS = 100
#: The most slots per user: each round the oblivious transfer moves P 32-byte keys per user and
#: silo, and the server hashes P keys per user and silo.
MAX_SLOTS = 10**4
#: How the options are spelled in messages (the CLI's spelling; the library's keywords are
#: `user_q` and `sampling_slots`).
SLOTS_OPTION = "--sampling-slots"
RATE_OPTION = "--user-q"

#: Why the server's view is amplified under private sampling: an assumption line.
SERVER_VIEW_LINE = (
    "private sampling (ULDP-FL §4.1): the silos pick each user's slot by oblivious transfer, so "
    "the server does not know who was sampled; its view is the released model's, at q = m/P "
    "(semi-honest server; the silos' audit of a random share of users catches a server that "
    "puts the real weight in more slots, with probability 1 - (1 - a)^k for k users cheated)"
)
#: The note on the server's-view row (short: a table cell).
SERVER_VIEW_NOTE = "does not know the sample (private sampling, §4.1)"


@dataclass(frozen=True)
class PrivateSampling:
    """m real slots among P per user: the user sampling rate q = m / P, with 0 < m < P."""

    m: int
    slots: int
    requested: float | None = None  # the user q asked for, before rounding (None: given as m, P)

    def __post_init__(self) -> None:
        for name, value in (("m", self.m), ("slots", self.slots)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidParameter(f"private sampling: {name} must be an integer, got {value!r}")
        _check_slots(self.slots)
        if not 0 < self.m < self.slots:
            raise InvalidParameter(
                f"private sampling needs 0 < m < P real slots, got m = {self.m} of P = {self.slots}"
            )

    @property
    def q(self) -> float:
        """The user sampling rate m / P (as a float: the accounting's q)."""
        return self.m / self.slots

    @property
    def fraction(self) -> Fraction:
        return Fraction(self.m, self.slots)

    def describe(self) -> str:
        """One line: the rounding of the requested user q (or the rate, when none was requested)."""
        rate = f"m/P = {self.m}/{self.slots} = {self.q:g}"
        if self.requested is None or self.requested == self.q:
            return f"user q {rate} (private sampling draws at rates m/P)"
        return f"user q {self.requested:g} rounded to {rate} (private sampling draws at rates m/P)"

    def assumption_lines(self) -> tuple[tuple[str, str], ...]:
        """The labelled lines a command adds to its assumptions: the rate, and the server's view."""
        return (("private sampling", self.describe()), ("server view", SERVER_VIEW_LINE))

    def user_sampling_line(self) -> str:
        """The plan's `user sampling` assumption under private sampling."""
        return (
            f"Poisson, q = m/P = {self.m}/{self.slots} = {self.q:g} per round (Algorithm 4), drawn by "
            "the silos through oblivious transfer (ULDP-FL §4.1): the amplification holds for the "
            "released models and for the server"
        )

    def as_dict(self) -> dict[str, float | int | None]:
        return {"m": self.m, "slots": self.slots, "q": self.q, "requested_q": self.requested}


def _check_slots(slots: object) -> int:
    if isinstance(slots, bool) or not isinstance(slots, int):
        raise InvalidParameter(f"{SLOTS_OPTION} must be an integer in [2, {MAX_SLOTS}], got {slots!r}")
    if not 2 <= slots <= MAX_SLOTS:
        raise InvalidParameter(
            f"{SLOTS_OPTION} must be an integer in [2, {MAX_SLOTS}] (P slots per user, m of them "
            f"real), got {slots}"
        )
    return slots


def private_rate(q: float, slots: int = DEFAULT_SLOTS) -> PrivateSampling:
    """The rate m / P nearest to the user sampling rate `q`, with m = round(q P).

    `q` is read as the decimal it prints as (0.335 is 335/1000, not the binary float just below
    it), and a tie goes up: q = 0.335 with P = 100 is 34/100 (half-up rounding, never the
    banker's). Then |m / P - q| <= 1 / (2P).

    Refused (`InvalidParameter`, one line naming the option): P outside [2, MAX_SLOTS]; q outside
    (0, 1]; m = 0 (q below 1 / (2P): the smallest rate is 1/P); m = P (q rounds to 1: every user
    takes part each round, there is no sample to hide).
    """
    slots = _check_slots(slots)
    if isinstance(q, bool) or not isinstance(q, (int, float)):
        raise InvalidParameter(f"{RATE_OPTION} must be a number in (0, 1], got {q!r}")
    if not 0 < q <= 1:  # also refuses nan
        raise InvalidParameter(f"{RATE_OPTION} must be in (0, 1], got {q!r}")
    exact = Fraction(repr(float(q))) * slots
    m = floor(exact + Fraction(1, 2))
    if m == 0:
        raise InvalidParameter(
            f"{RATE_OPTION} {q:g} is too small for private sampling with {SLOTS_OPTION} {slots}: it "
            f"rounds to 0/{slots}; the smallest rate is 1/{slots} = {1 / slots:g} (or raise {SLOTS_OPTION})"
        )
    if m == slots:
        raise InvalidParameter(
            f"{RATE_OPTION} {q:g} rounds to {slots}/{slots} = 1 with {SLOTS_OPTION} {slots}: every user "
            "takes part in every round, so there is no sample to hide (no sampling); give a lower "
            f"{RATE_OPTION} or leave out --private-sampling"
        )
    return PrivateSampling(m, slots, float(q))


def privately_sampled(plan: Plan, rate: PrivateSampling) -> Plan:
    """`plan` (a user-level plan sampling users at `rate.q`) with the assumptions of private
    sampling: its `user sampling` line says who draws the sample, followed by `rate`'s lines (the
    rounding, the server's view). Account it with `account_plan(..., private_sampling=True)`."""
    mech = plan.mechanism
    if plan.group_k is not None or not isinstance(mech, SubsampledGaussian) or mech.q >= 1:
        raise InvalidParameter(
            f"private sampling needs a user-level algorithm that samples users ({RATE_OPTION} < 1)"
        )
    if mech.q != rate.q:
        raise InvalidParameter(
            f"the plan samples users at q = {mech.q!r}, not at the private sampling rate "
            f"m/P = {rate.m}/{rate.slots}: plan it with {RATE_OPTION} {rate.q!r}"
        )
    lines: dict[str, str] = {}
    for key, value in plan.assumptions.items():
        if key == "user sampling":
            lines[key] = rate.user_sampling_line()
            lines.update(rate.assumption_lines())
        else:
            lines[key] = value
    if "user sampling" not in plan.assumptions:
        lines.update(rate.assumption_lines())
    return replace(plan, assumptions=lines)
