"""ULDP-FL (Kato et al.: uldp-naive, uldp-group, uldp-avg(-w), uldp-sgd(-w)) and the baselines
it compares with (default: FedAVG without noise): records kept per user, per-user batches, users'
own budgets, and the private weighting protocol (Protocol 1)."""

from __future__ import annotations

import click

from ...option_groups import OptionGroup
from ...options import IntegerIn, PositiveInt
from .family import Family
from .options import MAX_BATCH
from .rpdp_fl import budget_columns, budget_notes

MAX_GROUP_K = 1_000_000
KEY_BITS_RANGE = (256, 16384)  # Paillier: >= 2048 unless --test-keys; 16384 takes minutes to make


class GroupK(click.ParamType):
    """uldp-group's k: an integer >= 1, `max` or `median` of the records per user."""

    name = "k"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() in ("max", "median"):
            return value.strip().lower()
        try:
            return PositiveInt(MAX_GROUP_K).convert(value, param, ctx)
        except click.BadParameter:
            self.fail(f"{value!r} is not an integer in [1, {MAX_GROUP_K}], max or median", param, ctx)


OPTIONS = OptionGroup.of(
    "ULDP-FL algorithms",
    click.option(
        "--group-k",
        type=GroupK(),
        default="median",
        show_default=True,
        help=f"uldp-group: records kept per user, an integer in [1, {MAX_GROUP_K:,}], max or median; "
        "localgroupdp: Z, a subject's items kept per member (default there: max, none dropped).",
    ),
    click.option(
        "--local-batch-size",
        type=PositiveInt(MAX_BATCH),
        default=None,
        help="Per-user SGD batch, 1 to 1e8 (uldp-avg); default: all the user's records in one step.",
    ),
    click.option(
        "--user-budgets",
        default=None,
        metavar="FILE|NAME",
        help="uldp-avg(-w)/uldp-sgd(-w): each user's budget, a CSV (columns user, epsilon) or a "
        "scenario name drawn with --seed; user u is then sampled at its own q_u.",
    ),
    click.option(
        "--secure",
        is_flag=True,
        help="uldp-avg-w/-sgd-w: weight through Protocol 1 (Paillier); dp-fedavg-robust: secure "
        "aggregation of the uploads (Algorithm 3).",
    ),
    click.option(
        "--key-bits",
        type=IntegerIn(*KEY_BITS_RANGE),
        default=3072,
        show_default=True,
        help="--secure: Paillier modulus bits, 2048 to 16384 (from 256 with --test-keys).",
    ),
    click.option("--test-keys", is_flag=True, help="--secure: allow small, INSECURE keys (tests only)."),
)

FAMILY = Family(
    name="ULDP-FL",
    # Every algorithm that is not of another family's kind: user-level plans, and the baselines.
    claims=lambda spec: not (spec.record_level or spec.observed or spec.subject_level),
    options=OPTIONS,
    # With --user-budgets (or per-record budgets on `default`) a run shows each budget tier.
    columns=budget_columns,
    notes=budget_notes,
)
