"""The reconciled state of a table at one version: what log replay produces, a checkpoint holds and a
snapshot reads (files and tombstones as Arrow tables, never one Python object per file)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from use.delta.actions import Metadata, Protocol

__all__ = ["LogState"]


@dataclass
class LogState:
    """Reconciled table state at `version` (files and tombstones in Arrow)."""

    version: int
    protocol: Protocol
    metadata: Metadata
    files: pa.Table
    tombstones: pa.Table  # all tombstones, not yet filtered by retention
    txns: dict[str, tuple[int, int | None]]
    domains: dict[str, dict[str, Any]]
    checkpoint_version: int | None
    latest_commit_info: dict[str, Any] | None = None
