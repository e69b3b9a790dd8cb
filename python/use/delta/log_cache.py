"""The `DeltaLog`s of this process, one per table root, shared between the queries that read them.

A `DeltaLog` keeps its latest snapshot and moves it forward by the new commits only, so a query on
a table read before costs a directory listing, not a replay of its log (a log of 20,000 commits
without a checkpoint replays in ~6 s). SQL statements, insight tables (also in Python workers, which
Spark reuses between tasks) and the service all take their logs from here; the least recently used
are dropped past `CACHE_SIZE` tables.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from use.delta.log import DeltaLog
from use.delta.storage import resolve_table_root

__all__ = ["CACHE_SIZE", "forget", "shared_log"]

CACHE_SIZE = 256

_logs: OrderedDict[str, DeltaLog] = OrderedDict()
_lock = threading.Lock()


def shared_log(location: str | os.PathLike[str]) -> DeltaLog:
    """This process's `DeltaLog` of the table at `location` (a path or file: URI)."""
    root = resolve_table_root(location)
    with _lock:
        log = _logs.get(root)
        if log is None:
            log = _logs[root] = DeltaLog(root)
            if len(_logs) > CACHE_SIZE:
                _logs.popitem(last=False)
        else:
            _logs.move_to_end(root)
        return log


def forget(location: str | os.PathLike[str]) -> None:
    """Drop the shared log of a table (and its cached snapshot): a table dropped, or no longer watched."""
    root = resolve_table_root(location)
    with _lock:
        _logs.pop(root, None)
