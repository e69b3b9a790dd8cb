"""What the benchmarks share: the import path, the text table, live files, and read costs.

Kept to what two or more scripts use (one way to do each thing); a script's own measurements stay
in the script.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(os.path.dirname(HERE), "python")
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

#: The fixed indexed space of in-range appends: every append stays in one revision.
SPACE = {"x_min": 0.0, "x_max": 100.0, "y_min": 0.0, "y_max": 100.0}


def fmt_table(header: list[str], body: list[list[Any]]) -> str:
    """A fixed-width text table; floats with two decimals."""
    from use.display import text_table

    def cell(v: Any) -> Any:
        return f"{v:.2f}" if isinstance(v, float) else v

    return text_table(header, [[cell(v) for v in r] for r in body])


def live_file_sizes(path: str) -> dict[str, int]:
    """Live data files of the table at `path` (relative path -> size); empty when there is no table yet."""
    from use.delta import DeltaLog
    from use.qbeast.reader import load_snapshot

    if not DeltaLog.for_path(path).exists():
        return {}
    q = load_snapshot(path)
    return dict(zip(q.files.column("path").to_pylist(), q.files.column("size").to_pylist(), strict=False))


def read_cost(qsnap: Any, *, sample: float | None = None, predicate: Any = None) -> tuple[int, int]:
    """(files, bytes) a read of the snapshot scans: the reader's own file pruning (`plan_read`, the
    planning step of `QbeastTable.read`/`DeltaTable.read`) for a sample fraction and/or a translated
    filter, without running Spark. A plain Delta table has no sample pruning: a sample reads every file."""
    from use.qbeast.reader import plan_read

    if sample is not None and not qsnap.revisions:
        sample = None  # df.sample(f) on a plain Delta table scans all files, then drops rows
    plan = plan_read(None, qsnap, sample=sample, predicate=predicate)
    return plan.num_files, plan.bytes


def process_tree_cpu() -> float:
    """CPU seconds used so far by this process and its descendants (the Spark JVM, Python workers).

    On a shared, loaded machine wall times of the same write vary by 2-3x between runs; the CPU
    the write costs varies much less, so the write is reported both ways.
    """
    import glob

    procs: dict[int, tuple[int, int]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # ppid; utime + stime + cutime + cstime (children that exited are counted by their parent)
        procs[int(stat.split("/")[2])] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    me, total = os.getpid(), 0
    for pid, (_, cpu) in procs.items():
        p = pid
        while p in procs and p != me:
            p = procs[p][0]
        if p == me:
            total += cpu
    return total / os.sysconf("SC_CLK_TCK")


def timed_cpu(fn: Callable[[], object]) -> tuple[float, float, Any]:
    c0, t0 = process_tree_cpu(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, process_tree_cpu() - c0, out


def event_log(root: str, events: int) -> str:
    """A Delta table at `root` whose log holds `events` OPTIMIZE commits, each carrying an
    OptimizationEvent of 10 input and 2 output files (no data files; `use.delta` transactions)."""
    import pyarrow as pa

    from use.delta import DeltaLog
    from use.optimize.events import EVENT_TAG, FileStats, OptimizationEvent

    log = DeltaLog.for_path(root)
    log.create(pa.schema([("id", pa.int64())]))
    stats_in = FileStats(
        tuple(f"part-{i:05d}.parquet" for i in range(10)), (3,) * 10, 10_000, 10 * 2**20, 10, 40, 60, 6.0, 1_000.0
    )
    stats_out = FileStats(("merged-0.parquet", "merged-1.parquet"), (4, 4), 10_000, 9 * 2**20, 2, 40, 40, 20.0, 250.0)
    for i in range(events):
        event = OptimizationEvent(
            optimization_name="LeveledCompactionSelection", write_id=f"w{i}", table_id=root, revision_id=1,
            started_at=1_700_000_000_000 + i, finished_at=1_700_000_000_500 + i, process_time_ms=500,
            input_files_stats=stats_in, output_files_stats=stats_out,
        )  # fmt: skip
        log.start_transaction().commit("OPTIMIZE", tags={EVENT_TAG: event.to_json()})
    return root


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    """Median wall time of `runs` calls of `fn`, after one warm-up call."""
    import statistics

    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
