"""`python -m uldp` runs the same CLI as the `uldp` console script."""

from uldp.cli.main import cli

# prog_name keeps usage lines reading `uldp ...` rather than `python -m uldp ...`.
cli(prog_name="uldp")
