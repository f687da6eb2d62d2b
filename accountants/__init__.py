"""Privacy accounting for user-level DP in cross-silo federated learning.

Importing this package stays light (numpy and scipy only): dp-accounting and prv-accountant are
imported by `accountants.pld` and `accountants.prv` when a tight accountant is asked for, and
torch is never imported here.
"""
from .account import ACCOUNTANTS, GROUP_METHODS, Guarantee, account, group_level, record_level
from .algorithms import Plan
from .conversion import CONVERSIONS, rdp_to_dp
from .mechanism import Mechanism, ParallelSilos, SubsampledGaussian
from .orders import DEFAULT_ORDERS, TF_PRIVACY_ORDERS, resolve_orders
from .rdp import gaussian_rdp, mechanism_rdp, subsampled_gaussian_rdp

__all__ = [
    "ACCOUNTANTS", "CONVERSIONS", "DEFAULT_ORDERS", "GROUP_METHODS",
    "TF_PRIVACY_ORDERS", "Guarantee", "Mechanism", "ParallelSilos", "Plan", "SubsampledGaussian",
    "account", "gaussian_rdp", "group_level", "mechanism_rdp", "rdp_to_dp",
    "record_level", "resolve_orders", "subsampled_gaussian_rdp",
]
