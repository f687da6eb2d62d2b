"""Data for `uldp train`: built-in data sets and user tables, split into users and silos.

`load_dataset(name, users=..., ...)` federates one of DATASETS (ULDP-FL §5.1);
`load_table(path, user_column=..., label_column=...)` federates a CSV or Parquet file.
Both return a `FederatedData`.
"""

from .builtin import DATASETS, load_dataset
from .federated import FederatedData
from .tabular import load_table

__all__ = ["DATASETS", "FederatedData", "load_dataset", "load_table"]
