"""Time of the pure insight functions (`use.insights`, no Spark): what a reader of `use_catalog`
pays on top of loading the facts.

Builds, without Spark:
  * a Delta log with `--events` OPTIMIZE commits, each carrying an OptimizationEvent of 10 input and
    2 output files (written with `use.delta` transactions), and times `optimizations` from storage
    (history read + parse) and from the history already in memory;
  * a synthetic Qbeast snapshot of `--files` files (10 % staging, the rest in revision 1 with
    `--blocks-per-file` blocks drawn from a real OTree of 2 dimensions, depth 0..6) and a plain Delta
    snapshot of as many files with stats on `id` (cluster key configured), and times `files`,
    `cubes`, `revisions`, `layout`, `plan` and the table health score on them.
Prints one row per case: rows out, median seconds of `--runs` runs.

    .venv/bin/python benchmarks/insights_pure.py [--events 1000 --files 100000 --runs 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import use.insights as insights
from _common import event_log  # OPTIMIZE commits with events, shared with insights.py
from planner_scale import _files, _time  # the same synthetic files and timing
from use.insights.facts import TableFacts
from use.qbeast.revision import Revision, configuration_with_revision, staging_revision
from use.qbeast.snapshot import QbeastSnapshot
from use.qbeast.transform import LinearTransformation
from use.qbeast.transformers import LinearTransformer

MIN_W, MAX_W = -(2**31), 2**31 - 1
CHILD_SYMBOLS = "AQgw"  # the four children of a cube of a 2-dimensional revision


def _tree(max_depth: int) -> tuple[list[str], np.ndarray]:
    cubes, level = [""], [""]
    for _ in range(max_depth):
        level = [c + s for c in level for s in CHILD_SYMBOLS]
        cubes.extend(level)
    return cubes, np.array([len(c) for c in cubes], dtype=np.int32)


def qbeast_snapshot(n: int, blocks_per_file: int, rng: np.random.Generator) -> QbeastSnapshot:
    staging = rng.random(n) < 0.10
    files = _files(n, np.where(staging, 0, 1), rng, None)
    indexed = np.flatnonzero(~staging)
    cubes, depths = _tree(6)
    # shallow cubes are spread over more files (appends keep adding blocks to the upper levels)
    pick_p = 1.0 / (1.0 + depths.astype(np.float64))
    pick = rng.choice(len(cubes), size=indexed.size * blocks_per_file, p=pick_p / pick_p.sum())
    nb_idx = pick.size
    fi = np.concatenate([np.repeat(indexed, blocks_per_file), np.flatnonzero(staging)])
    nb = fi.size
    lo = rng.integers(MIN_W, MAX_W // 2, nb, dtype=np.int64)
    hi = np.minimum(np.where(rng.random(nb) < 0.5, MAX_W, lo + rng.integers(1, 2**30, nb)), MAX_W)
    lo[nb_idx:], hi[nb_idx:] = MIN_W, MAX_W
    cube_col = np.array(cubes, dtype=object)[np.concatenate([pick, np.zeros(nb - nb_idx, dtype=np.int64)])]
    order = np.argsort(fi, kind="stable")
    blocks = pa.table(
        {
            "file_index": pa.array(fi[order], pa.int64()),
            "revision_id": pa.array(np.where(np.arange(nb) < nb_idx, 1, 0)[order], pa.int64()),
            "cube_id": pa.array(cube_col[order].tolist(), pa.string()),
            "depth": pa.array(np.concatenate([depths[pick], np.zeros(nb - nb_idx, np.int32)])[order], pa.int32()),
            "min_weight": pa.array(lo[order], pa.int32()),
            "max_weight": pa.array(hi[order], pa.int32()),
            "element_count": pa.array((np.power(10.0, rng.uniform(0, 5.5, nb)).astype(np.int64) + 1)[order], pa.int64()),
        }
    )
    rev = Revision(1, 1000, "bench", 50_000, (LinearTransformer("x", "IntegerDataType"), LinearTransformer("y", "IntegerDataType")),
                   (LinearTransformation(0, 10**6, 0, "IntegerDataType"), LinearTransformation(0, 10**6, 0, "IntegerDataType")))  # fmt: skip
    return QbeastSnapshot.from_tables(
        files=files, blocks=blocks, version=1, table_root="/bench/qbeast", configuration=configuration_with_revision({}, rev),
        revisions={0: staging_revision("bench", ["x", "y"], 50_000, 999), 1: rev}, schema=pa.schema([("x", pa.int32()), ("y", pa.int32())]),
    )  # fmt: skip


def delta_snapshot(n: int, rng: np.random.Generator) -> QbeastSnapshot:
    lo = rng.integers(0, 10**9, n)
    hi = lo + rng.integers(0, 10**6, n)
    stats = pa.array(
        [
            f'{{"numRecords":1000,"minValues":{{"id":{a}}},"maxValues":{{"id":{b}}},"nullCount":{{"id":0}}}}'
            for a, b in zip(lo.tolist(), hi.tolist(), strict=False)
        ],
        pa.string(),
    )
    return QbeastSnapshot.from_tables(
        files=_files(n, np.zeros(n, dtype=np.int64), rng, stats), blocks=None, revisions={}, version=1, table_root="/bench/delta",
        configuration={"use.optimization.overlap.cluster-key": "id"}, schema=pa.schema([("id", pa.int64())]),
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--blocks-per-file", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)

    rows: list[tuple[str, str, int, float]] = []
    with tempfile.TemporaryDirectory(prefix="use-insights-bench-") as tmp:
        t0 = time.perf_counter()
        path = event_log(str(Path(tmp) / "events"), args.events)
        print(f"event log: {args.events:,} OPTIMIZE commits written in {time.perf_counter() - t0:.1f} s")
        secs, t = _time(lambda: insights.for_path(path, "optimizations"), args.runs)
        rows.append(("optimizations", f"from storage ({args.events:,} events)", t.num_rows, secs))
        history = TableFacts.load(path).history
        secs, t = _time(lambda: insights.optimizations(history), args.runs)
        rows.append(("optimizations", "history in memory", t.num_rows, secs))
        secs, t = _time(lambda: insights.history(history), args.runs)
        rows.append(("history", "history in memory", t.num_rows, secs))

    t0 = time.perf_counter()
    qs, ds = qbeast_snapshot(args.files, args.blocks_per_file, rng), delta_snapshot(args.files, rng)
    print(f"synthetic snapshots: qbeast {qs.files.num_rows:,} files / {qs.blocks.num_rows:,} blocks, "
          f"delta {ds.files.num_rows:,} files (built in {time.perf_counter() - t0:.1f} s)\n")  # fmt: skip
    for label, snap in (("qbeast", qs), ("delta", ds)):
        for name, fn in (
            ("files", insights.files),
            ("cubes", insights.cubes),
            ("revisions", insights.revisions),
            ("layout", insights.layout),
            ("plan", insights.plan),
            ("health_score", insights.health_score),
        ):
            secs, out = _time(lambda fn=fn, snap=snap: fn(snap), args.runs)
            rows.append((name, f"{label}, {snap.files.num_rows:,} files", out.num_rows if isinstance(out, pa.Table) else 1, secs))

    head = ("insight", "input", "rows out", "median s")
    table = [head] + [(a, b, f"{c:,}", f"{d:.3f}") for a, b, c, d in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for k, r in enumerate(table):
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False))))
        if k == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    main()
