"""The optimization service running in this driver, if any: the one place the SQL surface asks.

`use serve` runs at most one `OptimizationService` per driver. The SQL surface needs it in two
places that cannot be handed an object: the manual trigger (`ALTER TABLE use_catalog.<c>.<db>.<t>
SET TBLPROPERTIES`, executed by the service when one runs, else in the calling session) and the
insight tables that show the service's state (`metastore_summary`'s state columns,
`system_lake_tables.service_status`). A started service registers itself here and a stopped one
removes itself, so "no service" is always the truthful answer after a stop.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from use.service.service import OptimizationService

_lock = threading.Lock()
_active: OptimizationService | None = None


def register(service: OptimizationService) -> None:
    """Make `service` this driver's active service (the newest started one wins)."""
    global _active
    with _lock:
        _active = service


def unregister(service: OptimizationService) -> None:
    """Forget `service` if it is the active one (a stale stop never removes a newer service)."""
    global _active
    with _lock:
        if _active is service:
            _active = None


def current() -> OptimizationService | None:
    """The running service of this driver, or None (no `use serve` service, or it stopped)."""
    with _lock:
        service = _active
    return service if service is not None and service.running else None
