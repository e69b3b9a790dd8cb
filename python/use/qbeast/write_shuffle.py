"""Whether an OTree write shuffles its rows by file when the caller has not said (pure).

Without a shuffle each of the write's T tasks writes its own part of every planned file its rows
fall into: F planned files of about b = B / F bytes each (B the bytes of the rows) become up to
T x F parts of b / T. The parts hold the same bytes, so what the split costs a reader is a fixed
price per extra file (an open, a footer read, a share of a task), which Spark itself prices as
reading `spark.sql.files.openCostInBytes` (o, 4 MiB by default). Reading a planned file then costs
o + b whole and T * o + b in parts: the read slowdown (T * o + b) / (o + b). A shuffle by file
(`optimize_write`) avoids it for the price of moving every row once more, about one more plain
parquet write (`benchmarks/qbeast_write_read.py`).

So the write shuffles when the slowdown would exceed `spark.qbeast.index.maxReadSlowdown`
(default 1.5): on a laptop (T = 2) only small writes (b < o) shuffle, since two parts of a large
file read about as fast as one; on a 200-core cluster every write whose planned files are below
~400 * o (1.6 GiB at the default o) does, which is every write at the default cube size of
5,000,000 rows of up to ~320 bytes. A write with one task has nothing to split and never shuffles.
The caller's explicit choice (argument, `spark.qbeast.index.optimizeWrite`, table property
`delta.autoOptimize.optimizeWrite`) always wins; this rule only fills the gap.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_READ_SLOWDOWN", "MAX_READ_SLOWDOWN_CONF", "WriteShape", "should_shuffle"]

MAX_READ_SLOWDOWN_CONF = "spark.qbeast.index.maxReadSlowdown"
DEFAULT_MAX_READ_SLOWDOWN = 1.5


@dataclass(frozen=True)
class WriteShape:
    """What the rule looks at: the write tasks of the unshuffled write (input partitions, at most
    one per core), the files of the plan, the estimated bytes of the rows, and what opening a file
    costs a reader in bytes read (Spark's `spark.sql.files.openCostInBytes`)."""

    tasks: int
    planned_files: int
    data_bytes: int
    open_cost_bytes: int

    def read_slowdown(self) -> float:
        """How much slower the planned files read when each is split into one part per task."""
        file_bytes = self.data_bytes / max(1, self.planned_files)
        o = max(0, self.open_cost_bytes)
        whole = o + file_bytes
        return (max(1, self.tasks) * o + file_bytes) / whole if whole > 0 else 1.0


def should_shuffle(shape: WriteShape, max_read_slowdown: float = DEFAULT_MAX_READ_SLOWDOWN) -> bool:
    """Shuffle when splitting the planned files over the tasks would slow their reads down by more
    than `max_read_slowdown`; never for one task (nothing to split) or an empty plan."""
    if shape.tasks <= 1 or shape.planned_files < 1:
        return False
    return shape.read_slowdown() > max_read_slowdown
