"""The JSON Schema of `uldp report --format json` (`statement.Statement.as_dict`), shipped in the
package as `report-schema.json` and copied to docs/report-schema.json (a test keeps them equal).

Versioned: `schema_version` "1.x" documents validate against it; a field added keeps the major
version, a field removed or changed in meaning bumps it (and `statement.SCHEMA_VERSION`).
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files

SCHEMA_FILE = "report-schema.json"


def schema_text() -> str:
    """The schema as shipped (JSON text)."""
    return files("uldp.accountants.statements").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


@cache
def schema() -> dict:
    return json.loads(schema_text())
