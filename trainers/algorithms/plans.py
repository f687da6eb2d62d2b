"""What the user-level plans share: T rounds of a (user-sub-sampled) Gaussian (ULDP-FL §3).

ULDP-NAIVE (Theorem 1), ULDP-AVG and ULDP-SGD (Theorem 3) each bound one user's effect on the
sum of the silos' messages and add Gaussian noise of noise multiplier sigma to it, every round.
With user-level sub-sampling (Algorithm 4, Remark 1) the server Poisson-samples users with
probability q each round (weights of unsampled users set to 0), so each round is a
Poisson-subsampled Gaussian (Lemma 4); we apply the same server-side sampling to ULDP-NAIVE
and ULDP-SGD, the argument being the same. Only the noise each silo adds differs, and that is
the algorithm's own text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .registry import PlanInputs

if TYPE_CHECKING:
    from uldp.accountants.plan import Plan


def with_silos(inputs: PlanInputs) -> str:
    """' with |S| = 5' when the silo count is known, else '': formulas keep the symbol |S| and
    its value is stated next to them (never pasted into the formula without its operator)."""
    return f" with |S| = {inputs.silos}" if inputs.silos else ""


def gaussian_rounds(
    algorithm: str, theorem: str, noise: str, inputs: PlanInputs, extra: dict[str, str] | None = None
) -> Plan:
    """`inputs.rounds` rounds of a Gaussian of multiplier sigma, users sampled with `user_q`.

    `noise` says what each silo adds; `extra` are further assumptions of the algorithm's own.
    """
    # Imported here: `uldp train --help` lists the algorithms without loading the accountants.
    from uldp.accountants.events import SubsampledGaussian
    from uldp.accountants.plan import Plan

    q = inputs.user_q
    assumptions = {
        "algorithm": f"{algorithm} ({theorem})",
        "noise": noise,
        "mechanism": f"{inputs.rounds} rounds of a Gaussian with noise multiplier {inputs.sigma:g}",
        "user sampling": (
            f"Poisson, q = {q:g} per round (Algorithm 4); the amplification holds "
            "for observers who do not learn the sample (the released models), not "
            "for the server that draws it (`uldp account` prints its view too)"
            if q < 1
            else "none (every user every round)"
        ),
        "neighbouring": "add or remove all records of one user, in every silo",
        **(extra or {}),
    }
    return Plan(algorithm, SubsampledGaussian(inputs.sigma, q, inputs.rounds), None, assumptions)
