"""ULDP-FL (Kato et al.: uldp-naive, uldp-group, uldp-avg(-w), uldp-sgd(-w)) and the baselines
it compares with (default: FedAVG without noise): per-user batches and users' own budgets (the
records kept per user, --group-k, and the private weighting protocol, --secure, are read by other
families too: options.py lists them under Privacy and Secure computation)."""

from __future__ import annotations

import click

from ...option_groups import OptionGroup
from ...options import PositiveInt
from .family import Family
from .options import MAX_BATCH
from .rpdp_fl import budget_columns, budget_notes

OPTIONS = OptionGroup.of(
    "ULDP-FL algorithms",
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
