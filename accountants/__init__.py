"""Privacy accounting for user-level DP in cross-silo federated learning.

Describe, then account: `events` says what a run releases, the registry's accountants
(`registry.account_event`: rdp, pld, prv) turn any event they support into (epsilon, delta),
`account.account_plan` turns an algorithm's plan into its guarantees, and
`calibrate.calibrate_event` inverts any of them for one scalar.

Importing this package stays light (numpy and scipy only): dp-accounting and prv-accountant are
imported by `accountants.tight.pld` and `accountants.tight.prv` when a tight accountant is asked for, and
torch is never imported here.
"""

from .account import ACCOUNTANTS, GROUP_METHODS, Guarantee, account, account_plan, group_level, record_level
from .accountant import Accountant, Accounted
from .calibrate import Calibration, calibrate, calibrate_event, most_rounds
from .conversion import CONVERSIONS, rdp_to_dp
from .events import Composed, Event, Group, KnownParticipation, Mechanism, ParallelSilos, SubsampledGaussian
from .orders import DEFAULT_ORDERS, TF_PRIVACY_ORDERS, Orders, resolve_orders
from .plan import Plan
from .rdp.curves import event_rdp, gaussian_rdp, mechanism_rdp, subsampled_gaussian_rdp
from .registry import account_event, accountant_named

__all__ = [
    "ACCOUNTANTS",
    "CONVERSIONS",
    "DEFAULT_ORDERS",
    "GROUP_METHODS",
    "TF_PRIVACY_ORDERS",
    "Accountant",
    "Accounted",
    "Calibration",
    "Composed",
    "Event",
    "Group",
    "Guarantee",
    "KnownParticipation",
    "Mechanism",
    "Orders",
    "ParallelSilos",
    "Plan",
    "SubsampledGaussian",
    "account",
    "account_event",
    "account_plan",
    "accountant_named",
    "calibrate",
    "calibrate_event",
    "event_rdp",
    "gaussian_rdp",
    "group_level",
    "mechanism_rdp",
    "most_rounds",
    "rdp_to_dp",
    "record_level",
    "resolve_orders",
    "subsampled_gaussian_rdp",
]
