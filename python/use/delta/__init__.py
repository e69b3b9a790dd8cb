"""The Delta transaction log, implemented to the Delta protocol in Python + pyarrow.

Never imports pyspark or the upper layers. Public names: `DeltaLog` (open/create a table), `Snapshot`
(a version of it, files as an Arrow table), `Transaction` (optimistic commits with Delta's conflict
rules) and the actions a writer builds.
"""

from __future__ import annotations

from use.delta.actions import AddFile, CommitInfo, Metadata, Protocol, RemoveFile, SetTransaction, remove_actions
from use.delta.log import DeltaLog, HistoryEntry
from use.delta.snapshot import Snapshot
from use.delta.transaction import Transaction

__all__ = [
    "AddFile",
    "CommitInfo",
    "DeltaLog",
    "HistoryEntry",
    "Metadata",
    "Protocol",
    "RemoveFile",
    "SetTransaction",
    "Snapshot",
    "Transaction",
    "remove_actions",
]
