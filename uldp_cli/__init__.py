"""Command-line interface for `uldp` (`uldp.cli`): a thin Click front end over the library."""
