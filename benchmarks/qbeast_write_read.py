"""Qbeast write and read on the same generated data, side by side with plain parquet on Spark.

Measures, in one run:
1. indexed write time (`QbeastTable.write`) vs plain `df.write.parquet` (goal: <= 1.5x);
2. `read(sample=0.01)`: bytes of the files it reads / total bytes (goal: <= 3%), and its time vs a
   full scan with Spark's `df.sample(0.01)` over the plain parquet copy (goal: >= 10x faster);
   both run `count` + `avg` so the work is really done;
3. a range filter selecting 1% of the indexed space: files read / total files, and its time vs the
   same filter over the plain parquet copy.

Spark's fixed cost per query (planning, codegen, task scheduling: ~0.3-0.5 s on a 2-core box)
bounds the time ratios at this data size; the bytes ratios are what grows with the data.

Usage: .venv/bin/python benchmarks/qbeast_write_read.py [--rows N] [--cube-size C] [--keep DIR]

A sample of fraction f reads about max(f, C/N) of the data (the root cube holds the C rows of
lowest weight), so the default cube size is N/50; the chosen value is printed with the results.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))


def timed(fn: Callable[[], object], repeat: int = 1) -> tuple[float, object]:
    best = float("inf")
    out: object = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def dir_bytes(path: str) -> int:
    total = 0
    for d, _, files in os.walk(path):
        if "_delta_log" in d:
            continue
        for f in files:
            if f.endswith(".parquet"):
                total += os.path.getsize(os.path.join(d, f))
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--cube-size", type=int, default=None)
    ap.add_argument("--keep", default=None, help="directory to keep the tables in (default: a temp dir, removed)")
    args = ap.parse_args()
    rows = args.rows
    cube_size = args.cube_size or max(1000, rows // 50)

    from pyspark.sql import functions as F

    from use import QbeastTable
    from use.qbeast.reader import load_snapshot, plan_read
    from use.session import spark_session

    spark = spark_session("qbeast-bench", conf={"spark.driver.memory": "8g", "spark.sql.shuffle.partitions": "8"})
    base = args.keep or tempfile.mkdtemp(prefix="qbeast-bench-")
    plain_dir = os.path.join(base, "plain")
    qbeast_dir = os.path.join(base, "qbeast")
    for d in (plain_dir, qbeast_dir):
        shutil.rmtree(d, ignore_errors=True)

    df = (
        spark.range(rows, numPartitions=8)
        .select(
            (F.rand(1) * 1000).alias("x"),
            (F.rand(2) * 1000).alias("y"),
            (F.rand(3) * 1000).alias("z"),
            F.sha1(F.col("id").cast("string")).alias("payload"),
        )
        .cache()
    )
    df.count()  # materialize once: both writers then read the same cached rows
    # Warm both writers (JVM code paths, and the Python workers the OTree writer's tasks run in).
    warm = spark.range(1000).selectExpr("rand(9) * 1000 as x", "rand(8) * 1000 as y", "rand(7) * 1000 as z", "'p' as payload")
    warm.write.mode("overwrite").parquet(os.path.join(base, "warmup-plain"))
    QbeastTable.write(warm, os.path.join(base, "warmup-qbeast"), ["x", "y", "z"], cube_size=100)

    t_plain, _ = timed(lambda: df.write.parquet(plain_dir))
    t_qbeast, result = timed(lambda: QbeastTable.write(df, qbeast_dir, ["x", "y", "z"], cube_size=cube_size))
    df.unpersist()

    qt = QbeastTable.for_path(spark, qbeast_dir)
    qsnap = load_snapshot(qbeast_dir)
    plain = spark.read.parquet(plain_dir)

    # sample 1%
    plan = plan_read(spark, qsnap, sample=0.01)
    agg = [F.count("*").alias("n"), F.avg("x").alias("avg_x")]
    qbeast_sample = lambda: qt.read(sample=0.01).agg(*agg).collect()[0]  # noqa: E731
    plain_sample = lambda: plain.sample(0.01, seed=7).agg(*agg).collect()[0]  # noqa: E731
    qbeast_sample()
    plain_sample()  # warm both (file listing, JIT)
    t_qs, q_row = timed(qbeast_sample, repeat=3)
    t_ps, p_row = timed(plain_sample, repeat=3)
    # The same, aggregating every column: the plain scan must then read all its bytes (I/O bound).
    agg_all = agg + [F.avg("y"), F.avg("z"), F.max("payload")]
    t_qs_all, _ = timed(lambda: qt.read(sample=0.01).agg(*agg_all).collect(), repeat=2)
    t_ps_all, _ = timed(lambda: plain.sample(0.01, seed=7).agg(*agg_all).collect(), repeat=2)

    # range filter over 1% of the indexed space (0.215^3 ~= 1%)
    side = 1000 * 0.01 ** (1 / 3)
    flt = f"x >= 100 and x < {100 + side} and y >= 300 and y < {300 + side} and z >= 500 and z < {500 + side}"
    fplan = plan_read(spark, qsnap, filter=flt)
    qbeast_filter = lambda: qt.read(filter=flt).agg(*agg).collect()[0]  # noqa: E731
    plain_filter = lambda: plain.filter(flt).agg(*agg).collect()[0]  # noqa: E731
    qbeast_filter()
    plain_filter()
    t_qf, qf_row = timed(qbeast_filter, repeat=3)
    t_pf, pf_row = timed(plain_filter, repeat=3)
    plain_files = len([f for f in os.listdir(plain_dir) if f.endswith(".parquet")])

    total_bytes = plan.total_bytes
    lines = [
        f"rows={rows:,}  cube_size={cube_size:,}  indexed=x,y,z (+payload)  master={spark.sparkContext.master}",
        f"qbeast: version {result.version}, revision {result.revision_id}, {result.num_files} files, "
        f"{total_bytes / 1e6:,.1f} MB; plain parquet: {plain_files} files, {dir_bytes(plain_dir) / 1e6:,.1f} MB",
        "",
        f"{'measure':<44} {'qbeast':>12} {'baseline':>12} {'ratio':>9} {'goal':>10}",
        f"{'write time (s) vs df.write.parquet':<44} {t_qbeast:>12.2f} {t_plain:>12.2f} {t_qbeast / t_plain:>8.2f}x {'<= 1.5x':>10}",
        f"{'sample(0.01): bytes read / total':<44} {plan.bytes / 1e6:>10.1f}MB {total_bytes / 1e6:>10.1f}MB "
        f"{100 * plan.bytes / total_bytes:>8.2f}% {'<= 3%':>10}",
        f"{'sample(0.01): files read / total':<44} {plan.num_files:>12} {plan.total_files:>12} "
        f"{100 * plan.num_files / plan.total_files:>8.2f}% {'':>10}",
        f"{'sample(0.01) time (s) vs plain df.sample':<44} {t_qs:>12.3f} {t_ps:>12.3f} {t_ps / t_qs:>8.1f}x {'>= 10x':>10}",
        f"{'  rows / avg(x)':<44} {q_row['n']:>12,} {p_row['n']:>12,} "
        f"{q_row['avg_x']:>9.2f} {p_row['avg_x']:>10.2f}",
        f"{'sample(0.01) time, all columns aggregated':<44} {t_qs_all:>12.3f} {t_ps_all:>12.3f} "
        f"{t_ps_all / t_qs_all:>8.1f}x {'>= 10x':>10}",
        f"{'1% range filter: files read / total':<44} {fplan.num_files:>12} {fplan.total_files:>12} "
        f"{100 * fplan.num_files / fplan.total_files:>8.2f}% {'':>10}",
        f"{'1% range filter: bytes read / total':<44} {fplan.bytes / 1e6:>10.1f}MB {total_bytes / 1e6:>10.1f}MB "
        f"{100 * fplan.bytes / total_bytes:>8.2f}% {'':>10}",
        f"{'1% range filter time (s) vs plain filter':<44} {t_qf:>12.3f} {t_pf:>12.3f} {t_pf / t_qf:>8.1f}x {'':>10}",
        f"{'  rows (must be equal)':<44} {qf_row['n']:>12,} {pf_row['n']:>12,}",
    ]
    print("\n".join(lines))
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
