"""ownapp: a Flower / PyTorch app."""
