"""User-level DP for your own Flower app: a strategy wrapper and a ClientApp mod.

Flower adds record- and client-level DP to an existing app by wrapping what it has
(`DifferentialPrivacyServerSideFixedClipping(strategy, ...)`, `ClientApp(mods=[fixedclipping_mod])`);
these two add user-level DP (ULDP-FL's ULDP-AVG and ULDP-SGD: per-user clipping at each silo,
noise shares and accounting at the server; ULDP-AVG-w and ULDP-SGD-w with Protocol 1's private
weighting, `secure=True`) the same way:

    from uldp.flower import UserLevelDP, user_level_mod

    app = ClientApp(mods=[user_level_mod(Net, load_records)])            # client_app.py
    strategy = UserLevelDP(FedAvg(), users=40, silos=3, sigma=1.0)       # server_app.py
    strategy = UserLevelDP.from_run_config(FedAvg(), context.run_config) # or from the run config

`UserLevelDP` (uldp.trainers.flower.user_strategy) plans each round, aggregates the silos'
sums of clipped deltas and logs the user-level epsilon each round; `user_level_mod`
(uldp.trainers.flower.user_mod) answers its train messages with per-user training on the silo's
records; evaluation stays the app's own. docs/flower.md, "Your own Flower app", shows the diff
that converts Flower's quickstart shape.

Both are imported on first use: `import uldp` (and this module) load neither Flower nor torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers and editors; at run time `__getattr__` imports them
    from uldp.trainers.flower.user_mod import user_level_mod
    from uldp.trainers.flower.user_strategy import UserLevelDP

__all__ = ["UserLevelDP", "user_level_mod"]


def __getattr__(name: str) -> Any:
    try:
        if name == "UserLevelDP":
            from uldp.trainers.flower.user_strategy import UserLevelDP

            return UserLevelDP
        if name == "user_level_mod":
            from uldp.trainers.flower.user_mod import user_level_mod

            return user_level_mod
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] in ("flwr", "ray"):
            raise ImportError(
                f"uldp.flower.{name} needs the 'flower' extra ({error.name} is not installed): "
                "pip install -e '.[flower]' in a checkout, or pip install 'uldp[flower]'"
            ) from error
        raise
    raise AttributeError(f"module 'uldp.flower' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*__all__, "__doc__", "__name__"])
