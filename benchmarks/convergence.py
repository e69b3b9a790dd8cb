"""Continuous optimization of a table built by many small appends, until nothing is selected.

Builds a Qbeast table from `--appends` (>= 100) small `QbeastTable.write` appends, and the same rows
written in one go. Then it optimizes the appended table with the optimize loop (default strategy
chain, default `bytes-per-iter`) and prints, per iteration: blocks per file, blocks per cube, files a
`read(sample=0.01)` and a 1% range filter would read, and bytes rewritten. Goals, side by side:

1. the converged table reads within 1.2x the files of the one-go table (sample and range filter);
2. total bytes rewritten <= 3x the bytes appended (write amplification of the optimization);
3. one merge task's throughput (input bytes / second) >= 0.75x that of a plain Spark
   `read.parquet(files).write.parquet` of the same files (measured on copies of the table taken
   before optimizing; best of `--repeat`); the same for a bin-packing task on a plain Delta table of
   as many delta-rs appends, against `read.parquet(files).coalesce(1).write.parquet`.

Usage: .venv/bin/python benchmarks/convergence.py [--appends 100] [--rows-per-append 1000]
       [--cube-size 2000] [--bytes-per-iter B] [--repeat 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

SPACE = {"x_min": 0.0, "x_max": 100.0, "y_min": 0.0, "y_max": 100.0}  # fixed space: appends keep one revision
RANGE_FILTER = "x >= 50 AND x < 51"  # 1% of the indexed space along x


def rows(spark: Any, start: int, n: int) -> Any:
    """Deterministic, well-spread rows in [0, 100)^2 plus a payload column."""
    return spark.range(start, start + n).selectExpr(
        "id",
        "cast(pmod(hash(id, 1), 1000000) as double) / 10000.0 as x",
        "cast(pmod(hash(id, 2), 1000000) as double) / 10000.0 as y",
        "concat('payload-', cast(id as string), '-', repeat('z', 40)) as payload",
    )


def layout(spark: Any, path: str) -> dict[str, float]:
    """Layout facts of the latest snapshot: blocks per file/cube and files read by two queries."""
    import pyarrow.compute as pc

    from use.qbeast.reader import load_snapshot, plan_read

    q = load_snapshot(path)
    blocks = q.blocks
    cubes = len(pc.unique(pc.binary_join_element_wise(pc.cast(blocks.column("revision_id"), "string"), blocks.column("cube_id"), "/")))
    return {
        "files": q.files.num_rows,
        "bytes": int(pc.sum(q.files.column("size")).as_py() or 0),
        "blocks": blocks.num_rows,
        "cubes": cubes,
        "blocks_per_file": blocks.num_rows / max(1, q.files.num_rows),
        "blocks_per_cube": blocks.num_rows / max(1, cubes),
        "sample_files": plan_read(spark, q, sample=0.01).num_files,
        "range_files": plan_read(spark, q, filter=RANGE_FILTER).num_files,
    }


def fmt_table(header: list[str], body: list[list[Any]]) -> str:
    from use.optimize.loop import format_table

    def cell(v: Any) -> Any:
        return f"{v:.2f}" if isinstance(v, float) else v

    return format_table(header, [[cell(v) for v in r] for r in body])


def throughput(spark: Any, src: str, work: str, repeat: int) -> tuple[float, float, int, int]:
    """(plain seconds, merge-task seconds, task input bytes, task files) for the first planned task."""
    from use.delta import DeltaLog
    from use.optimize.executor import run_task
    from use.optimize.planner import Planner
    from use.qbeast.reader import absolute_path
    from use.qbeast.snapshot import QbeastSnapshot

    plain_best = task_best = float("inf")
    nbytes = nfiles = 0
    for i in range(repeat):
        copy = os.path.join(work, f"tp-{i}")
        shutil.copytree(src, copy)
        log = DeltaLog.for_path(copy)
        snap = log.snapshot()
        qsnap = QbeastSnapshot.from_delta(snap)
        planner = Planner()
        task = planner.plan(qsnap).tasks[0]
        nbytes, nfiles = task.bytes, task.num_files
        paths = [absolute_path(copy, p) for p in task.paths]
        out = os.path.join(work, f"plain-{i}")
        t0 = time.perf_counter()
        spark.read.parquet(*paths).write.parquet(out)
        plain_best = min(plain_best, time.perf_counter() - t0)
        t0 = time.perf_counter()
        m = run_task(spark, log, snap, qsnap, task, planner.config)
        task_best = min(task_best, time.perf_counter() - t0)
        assert m.committed, m
        shutil.rmtree(copy)
        shutil.rmtree(out)
    return plain_best, task_best, nbytes, nfiles


def binpack_throughput(spark: Any, work: str, appends: int, n: int, repeat: int) -> tuple[float, float, int, int]:
    """The same comparison for the bin-packing path (plain Delta table of `appends` delta-rs appends):
    (plain seconds, merge-task seconds, task input bytes, task files)."""
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    from use.delta import DeltaLog
    from use.optimize.executor import run_task
    from use.optimize.planner import Planner
    from use.qbeast.reader import absolute_path
    from use.qbeast.snapshot import QbeastSnapshot

    src = os.path.join(work, "plain-delta")
    shutil.rmtree(src, ignore_errors=True)
    rng = np.random.default_rng(0)
    for i in range(appends):
        ids = np.arange(i * n, (i + 1) * n)
        write_deltalake(src, pa.table({
            "id": ids, "x": rng.uniform(0, 100, n), "y": rng.uniform(0, 100, n),
            "payload": pa.array([f"payload-{j}-" + "z" * 40 for j in ids]),
        }), mode="append")  # fmt: skip
    plain_best = task_best = float("inf")
    nbytes = nfiles = 0
    for i in range(repeat):
        copy = os.path.join(work, f"bp-{i}")
        shutil.copytree(src, copy)
        log = DeltaLog.for_path(copy)
        snap = log.snapshot()
        qsnap = QbeastSnapshot.from_delta(snap)
        planner = Planner()
        task = planner.plan(qsnap).tasks[0]
        nbytes, nfiles = task.bytes, task.num_files
        out = os.path.join(work, f"bp-plain-{i}")
        t0 = time.perf_counter()
        spark.read.parquet(*[absolute_path(copy, p) for p in task.paths]).coalesce(1).write.parquet(out)
        plain_best = min(plain_best, time.perf_counter() - t0)
        t0 = time.perf_counter()
        m = run_task(spark, log, snap, qsnap, task, planner.config)
        task_best = min(task_best, time.perf_counter() - t0)
        assert m.committed, m
        shutil.rmtree(copy)
        shutil.rmtree(out)
    return plain_best, task_best, nbytes, nfiles


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--appends", type=int, default=100)
    ap.add_argument("--rows-per-append", type=int, default=1000)
    ap.add_argument("--cube-size", type=int, default=2000)
    ap.add_argument("--bytes-per-iter", type=int, default=None,
                    help="use.optimization.bytes-per-iter (also the task IO limit); default: the table's (1 GB)")
    ap.add_argument("--repeat", type=int, default=2, help="repetitions of the throughput measurement")
    ap.add_argument("--keep", default=None, help="directory to keep the tables in (default: a temp dir, removed)")
    args = ap.parse_args()
    if args.appends < 100:
        print("note: the goals are stated for >= 100 appends", file=sys.stderr)

    from use.optimize.loop import optimize_path
    from use.qbeast.table import QbeastTable
    from use.session import spark_session

    spark = spark_session("use-bench-convergence", conf={"spark.sql.shuffle.partitions": "4"})
    work = args.keep or tempfile.mkdtemp(prefix="use-bench-convergence-")
    os.makedirs(work, exist_ok=True)
    appended, one_go = os.path.join(work, "appended"), os.path.join(work, "one_go")
    for p in (appended, one_go):
        shutil.rmtree(p, ignore_errors=True)
    n, total = args.rows_per_append, args.appends * args.rows_per_append
    try:
        t0 = time.perf_counter()
        for i in range(args.appends):
            QbeastTable.write(rows(spark, i * n, n), appended, ["x", "y"], cube_size=args.cube_size, column_stats=SPACE)
        build_s = time.perf_counter() - t0
        QbeastTable.write(rows(spark, 0, total), one_go, ["x", "y"], cube_size=args.cube_size, column_stats=SPACE)
        before = layout(spark, appended)
        ref = layout(spark, one_go)
        bytes_appended = before["bytes"]
        print(f"built {args.appends} appends of {n} rows ({total} rows, {bytes_appended} bytes) in {build_s:.0f}s; "
              f"cube size {args.cube_size}")  # fmt: skip

        pristine = os.path.join(work, "pristine")
        shutil.rmtree(pristine, ignore_errors=True)
        shutil.copytree(appended, pristine)

        header = ["iter", "strategy", "kind", "files in", "bytes rewritten", "files", "blocks/file", "blocks/cube",
                  "sample 1% files", "range 1% files"]  # fmt: skip
        body: list[list[Any]] = [["0", "-", "-", 0, 0, before["files"], before["blocks_per_file"],
                                  before["blocks_per_cube"], before["sample_files"], before["range_files"]]]  # fmt: skip
        rewritten = [0]

        def on_iteration(m: Any) -> None:
            rewritten[0] += m.bytes_in if m.committed else 0
            lay = layout(spark, appended)
            body.append([m.iteration, m.strategy, m.kind if m.committed else "abandoned", m.files_in, rewritten[0],
                         lay["files"], lay["blocks_per_file"], lay["blocks_per_cube"], lay["sample_files"],
                         lay["range_files"]])  # fmt: skip
            print(f"  iteration {m.iteration}: {m.kind} {m.files_in}->{m.files_out} files, {m.time_ms} ms", flush=True)

        t0 = time.perf_counter()
        result = optimize_path(spark, appended, bytes_per_iter=args.bytes_per_iter, on_iteration=on_iteration)
        opt_s = time.perf_counter() - t0
        after = layout(spark, appended)
        body.append(["one-go", "-", "-", "-", "-", ref["files"], ref["blocks_per_file"], ref["blocks_per_cube"],
                     ref["sample_files"], ref["range_files"]])  # fmt: skip
        print()
        print(fmt_table(header, body))
        print(f"\noptimization: {len(result.iterations)} iterations, outcome {result.outcome}, {opt_s:.0f}s")

        plain_s, task_s, task_bytes, task_files = throughput(spark, pristine, work, args.repeat)
        bp_plain_s, bp_task_s, bp_bytes, bp_files = binpack_throughput(spark, work, args.appends, n, args.repeat)

        goals = [
            ["sample(0.01) files: converged / one-go", after["sample_files"], ref["sample_files"],
             after["sample_files"] / max(1, ref["sample_files"]), "<= 1.2"],
            ["1% range files: converged / one-go", after["range_files"], ref["range_files"],
             after["range_files"] / max(1, ref["range_files"]), "<= 1.2"],
            ["bytes rewritten / bytes appended", rewritten[0], bytes_appended, rewritten[0] / max(1, bytes_appended), "<= 3"],
            [f"merge task vs plain read+write ({task_files} files, {task_bytes} B): throughput",
             f"{task_s:.2f}s", f"{plain_s:.2f}s", plain_s / task_s if task_s else float("nan"), ">= 0.75"],
            [f"bin-packing task vs plain read+coalesce(1)+write ({bp_files} files, {bp_bytes} B): throughput",
             f"{bp_task_s:.2f}s", f"{bp_plain_s:.2f}s", bp_plain_s / bp_task_s if bp_task_s else float("nan"), ">= 0.75"],
        ]  # fmt: skip
        print()
        print(fmt_table(["measure", "ours", "baseline", "ratio", "goal"], goals))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
