"""Moved: `DeltaTable` is `use.tables.DeltaTable` (`from use import DeltaTable`), its Delta write
`use.runtime.delta_write`, and what every table offers `use.tables.Table`.

The facade sits above the SQL layer, and a module of the optimizer never imports a higher layer, so
this module cannot hand the new classes out: an import of one of its old names fails with the import
to use instead.
"""

from __future__ import annotations

from typing import Any

#: Each old name and the import that replaces it.
_MOVED = {
    "DeltaTable": "from use import DeltaTable",
    "DeltaWriteResult": "from use.tables import DeltaWriteResult",
    "TableSurface": "from use.tables import Table",
    "Progress": "from use.tables import Progress",
    "progress_callback": "from use.tables.optimize import progress_callback",
    "HISTORY_DDL": "from use.tables.base import HISTORY_DDL",
    "WRITE_MODES": "from use.runtime.delta_write import WRITE_MODES",
}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        raise ImportError(f"use.optimize.delta_table.{name} has moved: {_MOVED[name]}", name=name)
    raise AttributeError(f"module 'use.optimize.delta_table' has no attribute {name!r}")
