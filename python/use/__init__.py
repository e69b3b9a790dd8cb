"""USE, the Universal Storage Engine: Delta/Qbeast tables written, read and continuously optimized on Spark.

The layers, bottom-up, are declared in pyproject.toml (`[tool.use.layers]`); a layer imports only
the layers below it. The names below are the public API; they are imported lazily so that
`import use` (which every `import use.<module>` runs first) does not import Spark.
"""

from __future__ import annotations

from typing import Any

__all__ = ["QbeastTable", "DeltaTable", "DeltaLog"]


def __getattr__(name: str) -> Any:
    if name == "QbeastTable":
        from use.tables import QbeastTable  # deferred: imports pyspark; `import use` must not

        return QbeastTable
    if name == "DeltaTable":
        from use.tables import DeltaTable  # deferred: imports pyspark; `import use` must not

        return DeltaTable
    if name == "DeltaLog":
        from use.delta import DeltaLog  # deferred: `import use` runs before every use module, use.delta among them

        return DeltaLog
    raise AttributeError(f"module 'use' has no attribute {name!r}")
