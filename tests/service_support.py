"""Helpers for the service tests: table properties committed as ALTER TABLE will, and awaiting the
service's state (never a fixed sleep)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa

from use.delta import DeltaLog
from use.delta.transaction import Transaction

# Generous: the test machine is shared and slow; a condition normally holds in seconds.
DEADLINE_S = 300.0

AUTO = {"use.optimization.autoOptimize.enabled": "true"}


def set_properties(path: str, values: Mapping[str, str] | None = None, unset: Iterable[str] = ()) -> int:
    """Commit a metaData change of the table's configuration (what ALTER TABLE SET/UNSET TBLPROPERTIES
    commits): another writer changing properties. Returns the new version."""
    from use.errors import ConcurrentModificationError

    log = DeltaLog.for_path(path)
    gone = set(unset)
    while True:  # the optimizer may commit meanwhile: read again on a lost race
        snap = log.snapshot()
        conf = {k: v for k, v in snap.configuration.items() if k not in gone}
        conf.update(values or {})
        txn = Transaction(log, snap)
        txn.add(dataclasses.replace(snap.metadata, configuration=conf))
        try:
            return txn.commit("SET TBLPROPERTIES", {"properties": str(dict(values or {})), "unset": str(sorted(gone))})
        except ConcurrentModificationError:
            continue


def corrupt_log(path: str) -> int:
    """Append a commit that is not JSON (a torn or hand-edited log): reading the table then fails
    with CorruptLogError. Returns the corrupt version."""
    version = DeltaLog.for_path(path).snapshot().version + 1
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), "w") as f:
        f.write("{not json\n")
    return version


def plain_table(path: str, properties: Mapping[str, str] | None = None, rows: int = 3) -> str:
    """A small Delta table (no Spark) with the given properties."""
    from deltalake import write_deltalake

    write_deltalake(path, pa.table({"id": pa.array(range(rows), pa.int64())}))
    if properties:
        set_properties(path, properties)
    return path


class Services:
    """Makes services with their state under one directory (`make(paths, runner, ...)`), and stops
    every one of them at the end of a test (`stop_all`)."""

    def __init__(self, state_dir: Any) -> None:
        self.state_dir = state_dir
        self.made: list[Any] = []

    def __call__(self, paths: list[str], runner: Any, *, interval: float = 1.0, max_concurrent: int = 1) -> Any:
        from use.optimize.config import ServiceConfig
        from use.service import LocationSource, OptimizationService

        svc = OptimizationService(
            LocationSource(paths), self.state_dir,
            config=ServiceConfig(optimization_interval_s=interval, max_concurrent_optimizations=max_concurrent),
            runner=runner,
        )  # fmt: skip
        self.made.append(svc)
        svc.start()
        return svc

    def stop_all(self) -> None:
        for svc in self.made:
            svc.stop()


def wait_for(condition: Callable[[], Any], what: str, timeout: float = DEADLINE_S) -> Any:
    """Poll `condition` until truthy (for state outside the service, e.g. files); AssertionError
    naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def await_service(service: Any, predicate: Callable[[Any], bool], what: str, timeout: float = DEADLINE_S) -> None:
    """Block on the service's own state changes until `predicate(service)` holds."""
    if not service.wait_until(predicate, timeout):
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; status:\n{service.table_states().to_pylist()}")
