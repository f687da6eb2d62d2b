"""The library's exceptions: what the CLI reports as the user's fault (exit status 2).

Every error the library raises about its input derives from `UldpError`; anything else that
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
