"""Optimizations yield to row-level writes (DELETE, UPDATE, MERGE) on the same table in this process.

A row-level write reads the files it rewrites and commits their removal at the end; an optimization
that compacts one of them in between makes the write's commit lose (a `ConcurrentDeleteReadError`),
and the write has to run again. Under continuous optimization (the service's runs every few seconds
on a table that keeps receiving data) a write could lose every attempt: measured over JDBC, a
DELETE lost three attempts in a row to three compactions of 1.5 seconds. The users' statements come
first, so here the optimizer waits while a row-level write on the table is in progress in this
process before it starts a task, and abandons a task whose commit would come while one is (its
files deleted, nothing committed, the next task planned afresh). Writes from other processes are
not seen here; the statements' own retries on the new snapshot cover them.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

__all__ = ["begin", "end", "in_progress", "wait_until_idle"]

_cond = threading.Condition()
_active: Counter[str] = Counter()


def begin(root: str) -> None:
    """A row-level write on the table at `root` starts (counted: several may run at once)."""
    with _cond:
        _active[root] += 1


def end(root: str) -> None:
    """A row-level write on the table at `root` ended (committed or not)."""
    with _cond:
        if _active[root] <= 1:
            _active.pop(root, None)
        else:
            _active[root] -= 1
        _cond.notify_all()


def in_progress(root: str) -> bool:
    with _cond:
        return _active[root] > 0


def wait_until_idle(root: str, timeout_s: float, stopped: Callable[[], bool] = lambda: False) -> bool:
    """Wait while a row-level write on `root` is in progress, at most `timeout_s` seconds and no
    longer than `stopped()` stays false (checked every 0.2 s); True when none is."""
    deadline = time.monotonic() + timeout_s
    with _cond:
        while _active[root] > 0:
            left = deadline - time.monotonic()
            if left <= 0 or stopped():
                return False
            _cond.wait(min(left, 0.2))
        return True
