"""The facts an insight table is computed from, read from storage in one place.

Every insight is a pure function of a table's facts: its latest Delta snapshot (seen as a
`QbeastSnapshot`: files, blocks, revisions, properties) and its commit history. `TableFacts.load`
is the only code of `use.insights` that touches storage, so an insight reader running in a Python
worker process (the SQL surface's Arrow readers see storage, not the driver's memory) needs nothing
but the table's location. The history is read lazily, only by the insights that need it, and is cut
at the snapshot's version so that every insight of one `TableFacts` describes the same table state.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from use.delta import DeltaLog, HistoryEntry, Snapshot
from use.delta.log_cache import shared_log
from use.errors import TableNotFoundError
from use.optimize.config import OptimizationConfig
from use.optimize.loop_core import with_planning_time
from use.qbeast.revision import Revision, is_qbeast, revisions_from_configuration
from use.qbeast.snapshot import QbeastSnapshot


@dataclass(frozen=True, eq=False)
class TableFacts:
    """One table as of its latest snapshot: `qsnap` (files, blocks, revisions, properties), the
    Delta `snapshot` (commit time) and, on first use, `history` (oldest commit first); `now` is
    when the facts were read (seconds since epoch), the planning time of the insights that plan."""

    log: DeltaLog
    snapshot: Snapshot
    now: float = field(default_factory=time.time)

    @classmethod
    def load(cls, location: str) -> TableFacts:
        """The latest snapshot of the Delta (or Qbeast) table at `location` (a path or file:// URI).

        TableNotFoundError when there is no table; CorruptLogError, UnsupportedFeatureError or
        CorruptIndexMetadataError (on first use of `qsnap`) when its log cannot be read.
        """
        log = shared_log(location)
        if not log.exists():
            what = "does not exist" if not os.path.exists(log.table_root) else "has no Delta log (_delta_log with commits)"
            raise TableNotFoundError(
                f"no table at {location!r}: the path {what}; check the location (a Delta or Qbeast table directory)"
            )
        return cls(log, log.snapshot())

    @property
    def location(self) -> str:
        return self.log.table_root

    @property
    def version(self) -> int:
        return int(self.snapshot.version)

    @property
    def commit_time_ms(self) -> int:
        """When the snapshot's version was committed (ms since epoch)."""
        return int(self.snapshot.timestamp)

    @cached_property
    def qsnap(self) -> QbeastSnapshot:
        return QbeastSnapshot.from_delta(self.snapshot)

    # The index's metadata from the table's configuration alone (no file's blocks are read): what
    # checking the settings needs (`use.optimize.planner.target_config` reads these three).

    @property
    def table_root(self) -> str:
        return self.log.table_root

    @property
    def is_qbeast(self) -> bool:
        return is_qbeast(self.snapshot.configuration)

    @cached_property
    def revisions(self) -> Mapping[int, Revision]:
        return revisions_from_configuration(dict(self.snapshot.configuration))

    @cached_property
    def history(self) -> tuple[HistoryEntry, ...]:
        """The commits still in the log up to the snapshot's version, oldest first."""
        return tuple(e for e in reversed(self.log.history()) if e.version <= self.version)

    def config(
        self, spark_conf: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
    ) -> OptimizationConfig:
        """The table's optimization settings, as `optimize()` resolves them (see
        `OptimizationConfig.from_properties`): its properties, then `spark_conf` session defaults
        (`spark.qbeast.use.optimization.*`), with `overrides` winning. ConfigError on a bad value."""
        return OptimizationConfig.from_properties(self.snapshot.configuration, overrides, spark_conf=spark_conf)

    def planning_config(self, spark_conf: Mapping[str, str] | None = None) -> OptimizationConfig:
        """`config(spark_conf)` with the inputs of the time-aware rules as of `now`, as an
        `optimize()` run (and the service's plan check) plans: without them `tiering.max-wait` and
        `tiering.idle-after` never apply, and `plan` / `pending_bytes` showed nothing to do for a
        quiet table that `optimize(dry_run=True)` and the service would merge."""
        return with_planning_time(self.config(spark_conf), self.log, self.now)


def config_of(
    qsnap: Any, spark_conf: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
) -> OptimizationConfig:
    """The optimization settings of a snapshot's table (its properties + session defaults + overrides)."""
    return OptimizationConfig.from_properties(qsnap.configuration, overrides, spark_conf=spark_conf)
