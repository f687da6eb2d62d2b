"""Data for `uldp train`: built-in data sets and user tables, split into users and silos.

`load_dataset(name, users=..., ...)` federates one of DATASETS (ULDP-FL §5.1);
`load_table(path, user_column=..., label_column=...)` federates a CSV or Parquet file;
`federated_data`, `from_silos`, `from_datasets`, `from_files`, `as_federated` and `load_data`
federate the user's own records, each with the id of its user (`own_data`).
All return a `FederatedData`.
"""

from .builtin import DATASETS, load_dataset
from .federated import FederatedData
from .own_data import as_federated, federated_data, from_datasets, from_files, from_silos, load_data
from .tabular import load_table

__all__ = [
    "DATASETS",
    "FederatedData",
    "as_federated",
    "federated_data",
    "from_datasets",
    "from_files",
    "from_silos",
    "load_data",
    "load_dataset",
    "load_table",
]
