"""One module per subcommand; each exposes a click command named `command`.

`uldp.cli.main.SUBCOMMANDS` lists them; they are imported only when invoked.
"""
