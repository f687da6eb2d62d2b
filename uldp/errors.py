"""The library's exceptions: what the CLI reports as the user's fault (exit status 2).

Every error the library raises about its input derives from `UldpError`; `EngineError` is the
environment's (an engine that cannot start: exit status 1, what to try); anything else that
escapes a command is a bug (the CLI says so, exit status 1). The concrete types also derive from
`ValueError`, so code written against the earlier `ValueError` contract keeps working.
"""

from __future__ import annotations


class UldpError(Exception):
    """Base of every error `uldp` raises about the input it was given."""


class InvalidParameter(UldpError, ValueError):
    """A parameter outside what is allowed; the message names the parameter and the allowed range."""


class UnreachableBudget(UldpError, ValueError):
    """No setting within the searched range meets the privacy budget."""


class DataError(UldpError, ValueError):
    """Input data (a CSV, a holdings file, a data set) that cannot be used as given."""


class ProtocolError(UldpError, ValueError):
    """A protocol message that fails its checks (wrong size, stale round, out-of-range value)."""


class EngineError(Exception):
    """The engine a run needs could not start or broke down (Ray, under Flower's simulation): the
    environment's doing, neither bad input nor a bug. The CLI says so in one `Error:` line, with
    what to try, and exit status 1."""
