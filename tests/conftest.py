"""Shared test settings: hypothesis without deadlines, and fewer examples on CI."""

from __future__ import annotations

import os

from hypothesis import settings

# Accounting calls vary a lot in time (the first one pays for imports); a deadline would flake.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, max_examples=30, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI", "").lower() in {"true", "1"} else "dev")
