"""`python -m uldp.cli` runs the same CLI as the `uldp` console script."""

from uldp.cli.main import cli

# prog_name keeps usage lines reading `uldp ...` rather than `python -m uldp.cli ...`.
cli(prog_name="uldp")
