"""Planner time per strategy on a synthetic snapshot of a million files (goal: under 5 s each).

Builds in memory (no I/O):
  * a Qbeast table: `--files` files, 10 % staging (revision 0, one root block each) and the rest in
    revision 1 with `--blocks-per-file` blocks each (about 3 M blocks by default), cubes drawn from a
    pool of cube ids of depth 0..5, element counts spanning levels 0..5, random weight ranges;
  * a plain Delta table of `--files` files with Delta stats JSON on an `id` column (random ranges).
Then times `Planner([strategy], config).plan(snapshot)` for every strategy (median of `--runs`) and the
default chains, and prints one row per strategy: selected files/tasks/bytes, median seconds and the
ratio to the 5 s goal.

    .venv/bin/python benchmarks/planner_scale.py [--files 1000000 --blocks-per-file 3 --runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from use.optimize.config import OptimizationConfig
from use.optimize.planner import Planner
from use.qbeast.revision import Revision, configuration_with_revision, staging_revision
from use.qbeast.snapshot import QbeastSnapshot
from use.qbeast.transform import LinearTransformation
from use.qbeast.transformers import LinearTransformer

GOAL_S = 5.0
MIN_W, MAX_W = -(2**31), 2**31 - 1
ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-"


def _files(n: int, revision_ids: np.ndarray, rng: np.random.Generator, stats: pa.Array | None) -> pa.Table:
    sizes = np.clip(rng.lognormal(mean=16.0, sigma=1.5, size=n), 1_000, 2 * 1024**3).astype(np.int64)
    empty_map = pa.array([[]] * n, pa.map_(pa.string(), pa.string())) if n else pa.array([], pa.map_(pa.string(), pa.string()))
    return pa.table(
        {
            "path": pa.array([f"part-{i:07d}.parquet" for i in range(n)], pa.string()),
            "size": sizes,
            "modification_time": rng.integers(1_600_000_000_000, 1_700_000_000_000, n),
            "data_change": pa.array(np.ones(n, dtype=bool)),
            "stats": stats if stats is not None else pa.nulls(n, pa.string()),
            "tags": pa.nulls(n, pa.map_(pa.string(), pa.string())),
            "partition_values": empty_map,
            "deletion_vector": pa.nulls(n, pa.struct([("storageType", pa.string()), ("pathOrInlineDv", pa.string())])),
            "revision_id": pa.array(revision_ids, pa.int64()),
        }
    )


def _cube_pool(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    depths = np.minimum(rng.geometric(0.35, size) - 1, 5)
    depths[0] = 0
    letters = np.array(list(ALPHABET))
    ids = ["".join(letters[rng.integers(0, len(ALPHABET), d)]) for d in depths]
    ids[0] = ""
    return np.array(ids, dtype=object), depths.astype(np.int32)


def qbeast_snapshot(n: int, blocks_per_file: int, rng: np.random.Generator) -> QbeastSnapshot:
    staging = rng.random(n) < 0.10
    rids = np.where(staging, 0, 1).astype(np.int64)
    files = _files(n, rids, rng, None)
    indexed = np.flatnonzero(~staging)
    fi = np.concatenate([np.repeat(indexed, blocks_per_file), np.flatnonzero(staging)])
    nb = fi.size
    n_idx_blocks = indexed.size * blocks_per_file
    pool_ids, pool_depths = _cube_pool(rng, 50_000)
    pick = rng.integers(0, pool_ids.size, nb)
    pick[n_idx_blocks:] = 0
    lo = rng.integers(MIN_W, MAX_W // 2, nb, dtype=np.int64)
    hi = np.where(rng.random(nb) < 0.5, MAX_W, lo + rng.integers(1, 2**30, nb))
    lo[n_idx_blocks:], hi[n_idx_blocks:] = MIN_W, MAX_W
    ec = np.power(10.0, rng.uniform(0, 5.5, nb)).astype(np.int64) + 1
    blocks = pa.table(
        {
            "file_index": pa.array(fi, pa.int64()),
            "revision_id": pa.array(np.where(np.arange(nb) < n_idx_blocks, 1, 0), pa.int64()),
            "cube_id": pa.array(pool_ids[pick].tolist(), pa.string()),
            "depth": pa.array(pool_depths[pick], pa.int32()),
            "min_weight": pa.array(lo, pa.int32()),
            "max_weight": pa.array(np.minimum(hi, MAX_W), pa.int32()),
            "element_count": pa.array(ec, pa.int64()),
        }
    )
    rev = Revision(
        1,
        1000,
        "bench",
        50_000,
        (LinearTransformer("x", "IntegerDataType"),),
        (LinearTransformation(0, 10**6, 0, "IntegerDataType"),),
    )
    config = configuration_with_revision({}, rev)
    return QbeastSnapshot.from_tables(
        files=files, blocks=blocks, version=1, table_root="/bench/qbeast", configuration=config,
        revisions={0: staging_revision("bench", ["x"], 50_000, 999), 1: rev}, schema=pa.schema([("x", pa.int32())]),
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
    files = _files(n, np.zeros(n, dtype=np.int64), rng, stats)
    return QbeastSnapshot.from_tables(
        files=files, blocks=None if n == 0 else pa.table({
            "file_index": pa.array([], pa.int64()), "revision_id": pa.array([], pa.int64()), "cube_id": pa.array([], pa.string()),
            "depth": pa.array([], pa.int32()), "min_weight": pa.array([], pa.int32()), "max_weight": pa.array([], pa.int32()),
            "element_count": pa.array([], pa.int64())}),
        revisions={}, version=1, table_root="/bench/delta", configuration={}, schema=pa.schema([("id", pa.int64())]),
    )  # fmt: skip


def _time(fn, runs: int) -> tuple[float, object]:
    out = None
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--blocks-per-file", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)

    t0 = time.perf_counter()
    qs = qbeast_snapshot(args.files, args.blocks_per_file, rng)
    ds = delta_snapshot(args.files, rng)
    build = time.perf_counter() - t0
    print(f"synthetic snapshots: qbeast {qs.files.num_rows:,} files / {qs.blocks.num_rows:,} blocks, "
          f"delta {ds.files.num_rows:,} files (built in {build:.1f} s)\n")  # fmt: skip

    base = OptimizationConfig(sampling_fraction=0.1, overlap_cluster_key="id")
    cases = [
        ("UnindexedFilesSelection", qs, ["UnindexedFilesSelection"]),
        ("LeveledCompactionSelection", qs, ["LeveledCompactionSelection"]),
        ("CubeDefragmentation", qs, ["CubeDefragmentation"]),
        ("SamplingOverheadReduction", qs, ["SamplingOverheadReduction"]),
        ("BinPacking (qbeast staging)", qs, ["BinPacking"]),
        ("BinPacking (delta)", ds, ["BinPacking"]),
        ("SmallFiles (delta)", ds, ["SmallFiles"]),
        ("ClusterKeyOverlap (delta)", ds, ["ClusterKeyOverlap"]),
        ("default chain (qbeast)", qs, None),
        ("default chain (delta)", ds, None),
    ]
    rows = []
    for label, snap, chain in cases:
        planner = Planner(chain, base)
        secs, plan = _time(lambda planner=planner, snap=snap: planner.plan(snap), args.runs)
        rows.append((label, plan.strategy, len(plan.tasks), plan.num_files, plan.bytes, secs, secs / GOAL_S))

    head = ("case", "winning strategy", "tasks", "files", "bytes", "median s", "s / 5 s goal")
    table = [head] + [(r[0], r[1], str(r[2]), f"{r[3]:,}", f"{r[4]:,}", f"{r[5]:.3f}", f"{r[6]:.2f}") for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for k, row in enumerate(table):
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False))))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    worst = max(r[5] for r in rows)
    print(f"\nslowest: {worst:.3f} s ({'within' if worst < GOAL_S else 'OVER'} the {GOAL_S:.0f} s goal)")


if __name__ == "__main__":
    main()
