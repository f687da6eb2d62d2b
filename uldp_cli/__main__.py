"""`python -m uldp_cli` runs the same CLI as the `uldp` console script."""
from uldp_cli.main import cli

# prog_name keeps usage lines reading `uldp ...` rather than `python -m uldp_cli ...`.
cli(prog_name="uldp")
