"""What a reader pays per file: the measurement behind the write rule's open cost (`use.qbeast.write_shuffle`).

An unshuffled OTree write splits each planned file into one part per write task
(`use.qbeast.write_shuffle`); the parts hold the same bytes as the whole file, so what the split
costs a reader is a fixed price per extra file (an open, a footer read, a share of a task). This
writes the same rows (the table of `qbeast_write_read.py`, ~200 bytes a row in memory) as plain
parquet in k files for several k, reads each copy in full (all columns aggregated, Spark), best of
`--rounds` alternated rounds, and fits time = a + o * files + bytes / r. It prints the per-file
overhead o, the scan rate r, and the part size at which a part's overhead is 10% / 25% of its read
(10 * o * r, 4 * o * r), in parquet bytes and in the in-memory bytes the write rule measures.

Usage: nice .venv/bin/python benchmarks/fragmented_reads.py [--rows 2000000] [--files 4,16,64,256,1024]
       [--rounds 3] [--driver-memory 4g]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

from qbeast_write_read import all_columns_agg, dir_bytes, generate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--files", default="4,16,64,256,1024")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--driver-memory", default="4g")
    args = ap.parse_args()
    counts = [int(c) for c in args.files.split(",")]

    import numpy as np

    from use.qbeast.index_plan import DATA_BYTES_ALIAS, collect_stats
    from use.session import spark_session

    spark = spark_session("fragmented-reads", conf={"spark.driver.memory": args.driver_memory})
    base = tempfile.mkdtemp(prefix="fragmented-reads-")
    try:
        df = generate(spark, args.rows).cache()
        df.count()
        # The rows' bytes in memory, as the write rule counts them.
        memory_bytes = collect_stats(df, [], data_bytes=True)[DATA_BYTES_ALIAS]
        paths = {}
        for k in counts:
            paths[k] = os.path.join(base, f"k{k}")
            df.repartition(k).write.parquet(paths[k])
        agg = all_columns_agg()
        for k in counts:  # warm-up: the JVM compiles the scan's code paths
            spark.read.parquet(paths[k]).agg(*agg).collect()
        best = {k: float("inf") for k in counts}
        for _ in range(args.rounds):
            for k in counts:
                t0 = time.perf_counter()
                spark.read.parquet(paths[k]).agg(*agg).collect()
                best[k] = min(best[k], time.perf_counter() - t0)
        size = dir_bytes(paths[counts[0]])
        files = np.array(counts, dtype=float)
        times = np.array([best[k] for k in counts])
        overhead, fixed = np.polyfit(files, times, 1)  # seconds per file, the rest
        rate = size / max(1e-9, fixed)  # parquet bytes scanned per second (one file's price aside)
        ratio = memory_bytes / size
        print(
            f"rows={args.rows:,}  parquet {size / 2**20:,.0f} MiB ({memory_bytes / 2**20:,.0f} MiB in memory)  "
            f"master={spark.sparkContext.master}  best of {args.rounds}"
        )
        print(f"{'files':>7} {'MiB/file':>9} {'scan (s)':>9}")
        for k in counts:
            print(f"{k:>7} {size / k / 2**20:>9.2f} {best[k]:>9.3f}")
        print(f"per-file overhead o = {1000 * overhead:.2f} ms; scan rate r = {rate / 2**20:,.0f} MiB/s")
        print(f"open cost o*r = {overhead * rate / 2**20:.2f} MiB of parquet (Spark's openCostInBytes default: 4 MiB)")
        for share in (0.10, 0.25):
            part = overhead * rate / share
            print(
                f"part with overhead {share:.0%} of its read: {part / 2**20:,.1f} MiB parquet, "
                f"{part * ratio / 2**20:,.1f} MiB in memory"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
