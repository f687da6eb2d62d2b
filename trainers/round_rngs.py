"""The run's random streams: every party's generator for a round, and for a phase of a round.

Round t draws everything that protects privacy (user sampling, record sampling, shuffles, noise)
from generators seeded by (entropy, t): the server's and each silo's (`round_rngs`), and a
phased algorithm's silo from (entropy, t, silo, phase name) (`phase_rng`). The round loop
(runner.py) and a silo's Flower ClientApp (flower/client_app.py) both draw from here, so a run
with a fixed --noise-seed draws the same numbers in process and on Flower.
"""

from __future__ import annotations

import numpy as np


def round_rngs(
    entropy: int, round: int, n_silos: int
) -> tuple[np.random.Generator, list[np.random.Generator]]:
    """The server's and each silo's generator for round `round` (1-based)."""
    children = np.random.SeedSequence([entropy, round]).spawn(n_silos + 1)
    return np.random.default_rng(children[0]), [np.random.default_rng(c) for c in children[1:]]


def phase_rng(entropy: int, round: int, silo: int, phase: str) -> np.random.Generator:
    """Silo `silo`'s generator for phase `phase` of round `round` (a phased algorithm's steps).

    Keyed by the phase's name, so each step draws afresh and the in-process and Flower runs of
    a fixed --noise-seed draw the same numbers whichever silos a phase reaches."""
    key = int.from_bytes(phase.encode()[:16].ljust(16, b"\0"), "big")
    return np.random.default_rng(np.random.SeedSequence([entropy, round, silo, key, 0x5048]))
