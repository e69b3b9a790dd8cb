"""`use.tables`: the Python facade, one class per table format over one base class.

`Table` (`use.tables.base`) holds what every table has: its path, log and snapshot, history,
properties, optimizations, vacuum, restore, manifests, DELETE and UPDATE, and two accessors:
`t.optimize(...)` / `t.optimize.dry_run(...)` (`use.tables.optimize`: the same arguments on every
table, as `use optimize` and `CALL use_catalog.system.optimize` take them) and `t.inspect.<name>()`
(`use.tables.inspect`: the insight tables as pyarrow). `QbeastTable` adds the OTree write, samples,
conversion, revisions and index metrics; `DeltaTable` DataFrame writes in Spark's save modes, reads
and `zorder`. `from use import QbeastTable, DeltaTable` is the short import.
"""

from __future__ import annotations

from use.runtime.delta_write import DeltaWriteResult
from use.tables.base import Table
from use.tables.delta import DeltaTable
from use.tables.inspect import Inspect
from use.tables.optimize import Optimize, Progress
from use.tables.qbeast import IndexMetricsByRevision, QbeastTable

__all__ = ["DeltaTable", "DeltaWriteResult", "IndexMetricsByRevision", "Inspect", "Optimize", "Progress", "QbeastTable", "Table"]
