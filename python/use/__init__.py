"""USE, the Universal Storage Engine: Delta/Qbeast tables written, read and continuously optimized on Spark.

Layers, bottom-up (a layer imports only layers below it):
`use.delta` (the Delta log) -> `use.qbeast` (the OTree format) -> `use.optimize` (strategies,
planner, merge tasks, events) -> service and SQL surface. The names below are the public API; they
are imported lazily so that `import use` does not start or even import Spark.
"""

from __future__ import annotations

from typing import Any

__all__ = ["QbeastTable", "DeltaTable", "DeltaLog"]


def __getattr__(name: str) -> Any:
    if name == "QbeastTable":
        from use.table import QbeastTable

        return QbeastTable
    if name == "DeltaTable":
        from use.table import DeltaTable

        return DeltaTable
    if name == "DeltaLog":
        from use.delta import DeltaLog

        return DeltaLog
    raise AttributeError(f"module 'use' has no attribute {name!r}")
