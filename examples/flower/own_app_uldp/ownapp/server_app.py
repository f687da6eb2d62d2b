"""ownapp: a Flower / PyTorch app."""

import torch
from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from ownapp.task import Net
from uldp.flower import UserLevelDP

# Create ServerApp
app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Main entry point for the ServerApp."""
    # Read run config
    num_rounds: int = context.run_config["num-server-rounds"]

    # Load global model (the seed makes the initial weights a public, reproducible choice)
    torch.manual_seed(context.run_config["seed"])
    global_model = Net()
    arrays = ArrayRecord(global_model.state_dict())

    # Initialize FedAvg strategy
    strategy = FedAvg(fraction_evaluate=context.run_config["fraction-evaluate"])
    strategy = UserLevelDP.from_run_config(strategy, context.run_config)

    # Start strategy, run FedAvg for `num_rounds`
    result = strategy.start(
        grid=grid,
        initial_arrays=arrays,
        num_rounds=num_rounds,
    )

    # Save final model to disk
    print("\nSaving final model to disk...")
    torch.save(result.arrays.to_torch_state_dict(), context.run_config["final-model"])
