"""Deprecated: the Python facade is `use.tables` (`from use import QbeastTable, DeltaTable`).

`from use import QbeastTable` still works and warns (DeprecationWarning) with the import to use.
"""

from __future__ import annotations

import warnings
from typing import Any

import use.tables

#: The names this module had, all in `use.tables` now.
_MOVED = ("QbeastTable", "DeltaTable", "IndexMetricsByRevision")


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        short = "from use import" if name in ("QbeastTable", "DeltaTable") else "from use.tables import"
        warnings.warn(
            f"use.table is deprecated; import {name} with `{short} {name}` (the facade is use.tables)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(use.tables, name)
    raise AttributeError(f"module 'use.table' has no attribute {name!r}; the Python facade is use.tables")
