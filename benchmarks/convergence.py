"""Continuous optimization of a table built by many small appends, until nothing is selected.

Builds a Qbeast table from `--appends` (>= 100) small `QbeastTable.write` appends, and the same rows
written in one go, then optimizes it in two modes, each with the optimize loop (default strategy
chain, default `bytes-per-iter` unless given):

* after: all appends first, then optimize until nothing is selected;
* continuous: optimize until nothing is selected after every `--every` appends (as the service does
  on its interval), and once more after the last append.

Per iteration (after) and per round (continuous) it prints blocks per file, blocks per cube, the
files (and bytes) a `read(sample=0.01)` and a 1% range filter read, and the bytes rewritten. Then
(sampling phase) SamplingOverheadReduction with `--sampling-fraction` runs on the converged table
until nothing is selected, and the bytes a sample of that fraction reads are compared. Goals, side
by side:

1. the converged table reads within 1.2x the files of the one-go table (sample and range filter);
2. total bytes rewritten <= 3x the bytes appended (write amplification of the optimization);
3. one merge task's throughput (input bytes / second) >= 0.75x that of a plain Spark
   `read.parquet(files).write.parquet` of the same files (measured on copies of the table taken
   before optimizing; best of `--repeat`); the same for a bin-packing task on a plain Delta table of
   as many delta-rs appends, against `read.parquet(files).coalesce(1).write.parquet`. Every repeat's
   ratio is printed too (median and range): the two runs alternate which goes first, and on a busy
   machine single runs of a second or two vary widely, so judge by several repeats (at the default
   sizes a task is about one second of mostly fixed Spark costs: the first repeat's JIT warm-up and
   any other load show in full, single repeats ranged 0.4-2.6 around a median of ~1; the process
   CPU ratio varies less).
   `--mode throughput` runs only this comparison.

Usage: .venv/bin/python benchmarks/convergence.py [--appends 100] [--rows-per-append 1000]
       [--cube-size 2000] [--bytes-per-iter B] [--mode both|after|continuous|throughput] [--every 10]
       [--sampling-fraction 0.01] [--repeat 2] [--no-throughput] [--keep DIR] [--cache DIR]

`--cache DIR` keeps the built append-only and one-go tables there and reuses them on the next run
with the same sizes (the continuous mode always builds its own table, appending as it goes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import SPACE, fmt_table, live_file_sizes, read_cost, timed_cpu

RANGE_FILTER = "x >= 50 AND x < 51"  # 1% of the indexed space along x


def rows(spark: Any, start: int, n: int) -> Any:
    """Deterministic, well-spread rows in [0, 100)^2 plus a payload column."""
    return spark.range(start, start + n).selectExpr(
        "id",
        "cast(pmod(hash(id, 1), 1000000) as double) / 10000.0 as x",
        "cast(pmod(hash(id, 2), 1000000) as double) / 10000.0 as y",
        "concat('payload-', cast(id as string), '-', repeat('z', 40)) as payload",
    )


def layout(spark: Any, path: str, fraction: float = 0.01) -> dict[str, float]:
    """Layout facts of the latest snapshot: blocks per file/cube and what two queries read."""
    import pyarrow.compute as pc

    from use.qbeast.reader import load_snapshot, spark_schema, translate_filter

    q = load_snapshot(path)
    blocks = q.blocks
    cubes = len(
        pc.unique(pc.binary_join_element_wise(pc.cast(blocks.column("revision_id"), "string"), blocks.column("cube_id"), "/"))
    )
    sample_files, sample_bytes = read_cost(q, sample=fraction)
    range_files, range_bytes = read_cost(q, predicate=translate_filter(spark, spark_schema(q), RANGE_FILTER))
    return {
        "files": q.files.num_rows,
        "bytes": int(pc.sum(q.files.column("size")).as_py() or 0),
        "blocks": blocks.num_rows,
        "cubes": cubes,
        "blocks_per_file": blocks.num_rows / max(1, q.files.num_rows),
        "blocks_per_cube": blocks.num_rows / max(1, cubes),
        "sample_files": sample_files,
        "sample_bytes": sample_bytes,
        "range_files": range_files,
        "range_bytes": range_bytes,
    }


LAYOUT_HEADER = ["files", "blocks/file", "blocks/cube", "sample files", "sample KiB", "range files", "range KiB"]


def layout_cells(lay: dict[str, float]) -> list[Any]:
    return [lay["files"], lay["blocks_per_file"], lay["blocks_per_cube"], lay["sample_files"],
            lay["sample_bytes"] // 1024, lay["range_files"], lay["range_bytes"] // 1024]  # fmt: skip


@dataclass(frozen=True)
class Timing:
    """Wall and CPU seconds (this process tree: the driver, the Spark JVM, its Python workers) of the
    plain Spark read+write and of the merge task, one pair per repeat."""

    plain: tuple[float, ...]
    task: tuple[float, ...]
    plain_cpu: tuple[float, ...]
    task_cpu: tuple[float, ...]
    bytes: int
    files: int

    @property
    def ratios(self) -> list[float]:
        """Per repeat: merge-task throughput / plain throughput (= plain seconds / task seconds)."""
        return [p / t for p, t in zip(self.plain, self.task, strict=False)]

    @property
    def cpu_ratios(self) -> list[float]:
        return [p / t for p, t in zip(self.plain_cpu, self.task_cpu, strict=False)]

    @property
    def best_ratio(self) -> float:
        """Best plain time over best task time (each side's least disturbed run)."""
        return min(self.plain) / min(self.task)

    def cells(self) -> str:
        r, c = sorted(self.ratios), sorted(self.cpu_ratios)
        return (f"wall: best {self.best_ratio:.2f}, median {statistics.median(r):.2f}, range {r[0]:.2f}-{r[-1]:.2f} "
                f"(plain {min(self.plain):.2f}-{max(self.plain):.2f}s, task {min(self.task):.2f}-{max(self.task):.2f}s); "
                f"CPU: median {statistics.median(c):.2f}, range {c[0]:.2f}-{c[-1]:.2f} "
                f"(plain {statistics.median(self.plain_cpu):.2f}s, task {statistics.median(self.task_cpu):.2f}s)")  # fmt: skip


def timed_pairs(spark: Any, src: str, work: str, repeat: int, coalesce: bool) -> Timing:
    """The first planned merge task of a copy of `src`, against a plain Spark read+write of the same
    files (`coalesce`: into one file, as a bin-packing task writes), `repeat` times on fresh copies.
    The two alternate which runs first, so neither always gets the warmer JVM and page cache."""
    from use.delta import DeltaLog
    from use.delta.storage import absolute_path
    from use.optimize.executor import run_task
    from use.optimize.planner import Planner
    from use.qbeast.snapshot import QbeastSnapshot

    wall: dict[str, list[float]] = {"plain": [], "task": []}
    cpu: dict[str, list[float]] = {"plain": [], "task": []}
    nbytes = nfiles = 0
    for i in range(repeat):
        copy, out = os.path.join(work, f"tp-{i}"), os.path.join(work, f"tp-plain-{i}")
        shutil.copytree(src, copy)
        log = DeltaLog.for_path(copy)
        snap = log.snapshot()
        qsnap = QbeastSnapshot.from_delta(snap)
        planner = Planner()
        task = planner.plan(qsnap).tasks[0]
        nbytes, nfiles = task.bytes, task.num_files
        paths = [absolute_path(copy, p) for p in task.paths]

        def run_plain(paths: list[str] = paths, out: str = out) -> None:
            df = spark.read.parquet(*paths)
            (df.coalesce(1) if coalesce else df).write.parquet(out)

        def run_merge(log: Any = log, snap: Any = snap, qsnap: Any = qsnap, task: Any = task, planner: Any = planner) -> None:
            m = run_task(spark, log, snap, qsnap, task, planner.config)
            assert m.committed, m

        order = (("plain", run_plain), ("task", run_merge))
        for label, fn in order if i % 2 == 0 else order[::-1]:
            w, c, _ = timed_cpu(fn)
            wall[label].append(w)
            cpu[label].append(c)
        shutil.rmtree(copy)
        shutil.rmtree(out)
    return Timing(tuple(wall["plain"]), tuple(wall["task"]), tuple(cpu["plain"]), tuple(cpu["task"]), nbytes, nfiles)


def plain_delta(work: str, appends: int, n: int) -> str:
    """A plain Delta table of `appends` delta-rs appends of n rows (the bin-packing comparison's input)."""
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    src = os.path.join(work, "plain-delta")
    shutil.rmtree(src, ignore_errors=True)
    rng = np.random.default_rng(0)
    for i in range(appends):
        ids = np.arange(i * n, (i + 1) * n)
        write_deltalake(src, pa.table({
            "id": ids, "x": rng.uniform(0, 100, n), "y": rng.uniform(0, 100, n),
            "payload": pa.array([f"payload-{j}-" + "z" * 40 for j in ids]),
        }), mode="append")  # fmt: skip
    return src


def build(spark: Any, path: str, args: argparse.Namespace, n: int, start: int = 0, count: int | None = None) -> None:
    from use import QbeastTable

    for i in range(start, start + (args.appends if count is None else count)):
        QbeastTable.write(rows(spark, i * n, n), path, ["x", "y"], cube_size=args.cube_size, column_stats=SPACE)


def cached_tables(spark: Any, args: argparse.Namespace, work: str) -> tuple[str, str, float]:
    """(append-only table, one-go table, build seconds): built in `work`, or copied from --cache."""
    from use import QbeastTable

    n, total = args.rows_per_append, args.appends * args.rows_per_append
    key = f"a{args.appends}-r{n}-c{args.cube_size}"
    appended, one_go = os.path.join(work, "appended"), os.path.join(work, "one_go")
    for p in (appended, one_go):
        shutil.rmtree(p, ignore_errors=True)
    cache = os.path.join(args.cache, key) if args.cache else None
    if cache and os.path.isdir(os.path.join(cache, "appended")) and os.path.isdir(os.path.join(cache, "one_go")):
        shutil.copytree(os.path.join(cache, "appended"), appended)
        shutil.copytree(os.path.join(cache, "one_go"), one_go)
        return appended, one_go, float("nan")
    t0 = time.perf_counter()
    build(spark, appended, args, n)
    build_s = time.perf_counter() - t0
    QbeastTable.write(rows(spark, 0, total), one_go, ["x", "y"], cube_size=args.cube_size, column_stats=SPACE)
    if cache:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(appended, os.path.join(cache, "appended"))
        shutil.copytree(one_go, os.path.join(cache, "one_go"))
    return appended, one_go, build_s


def goal_rows(label: str, after: dict[str, float], ref: dict[str, float], rewritten: int, appended: int) -> list[list[Any]]:
    return [
        [f"{label}: sample(0.01) files, converged / one-go", after["sample_files"], ref["sample_files"],
         after["sample_files"] / max(1, ref["sample_files"]), "<= 1.2"],
        [f"{label}: 1% range files, converged / one-go", after["range_files"], ref["range_files"],
         after["range_files"] / max(1, ref["range_files"]), "<= 1.2"],
        [f"{label}: bytes rewritten / bytes appended", rewritten, appended, rewritten / max(1, appended), "<= 3"],
    ]  # fmt: skip


def run_after(spark: Any, args: argparse.Namespace, appended: str, ref: dict[str, float]) -> tuple[dict[str, float], int, int]:
    """Optimize the append-only table until nothing is selected: (final layout, bytes rewritten, bytes appended)."""
    from use.optimize.loop import optimize_path
    from use.optimize.request import OptimizeRequest

    before = layout(spark, appended)
    header = ["iter", "strategy", "kind", "files in", "bytes rewritten", *LAYOUT_HEADER]
    body: list[list[Any]] = [["0", "-", "-", 0, 0, *layout_cells(before)]]
    rewritten = [0]

    def on_iteration(m: Any) -> None:
        rewritten[0] += m.bytes_in if m.committed else 0
        lay = layout(spark, appended)
        body.append(
            [m.iteration, m.strategy, m.kind if m.committed else "abandoned", m.files_in, rewritten[0], *layout_cells(lay)]
        )
        print(
            f"  iteration {m.iteration}: {m.kind} {m.files_in}->{m.files_out} files, {m.time_ms} ms: {m.reason[:90]}", flush=True
        )

    t0 = time.perf_counter()
    result = optimize_path(spark, OptimizeRequest(appended, bytes_per_iter=args.bytes_per_iter), on_iteration=on_iteration)
    opt_s = time.perf_counter() - t0
    after = layout(spark, appended)
    body.append(["one-go", "-", "-", "-", "-", *layout_cells(ref)])
    print()
    print(fmt_table(header, body))
    print(f"\nafter mode: {len(result.iterations)} iterations, outcome {result.outcome}, {opt_s:.0f}s")
    return after, rewritten[0], int(before["bytes"])


def run_continuous(spark: Any, args: argparse.Namespace, work: str, ref: dict[str, float]) -> tuple[dict[str, float], int, int]:
    """Append, optimizing until nothing is selected after every `--every` appends and at the end:
    (final layout, bytes rewritten, bytes appended)."""
    from use.optimize.loop import optimize_path
    from use.optimize.request import OptimizeRequest

    path = os.path.join(work, "continuous")
    shutil.rmtree(path, ignore_errors=True)
    n = args.rows_per_append
    header = ["round", "appends", "iterations", "outcome", "round rewritten", "bytes rewritten", "bytes appended",
              *LAYOUT_HEADER]  # fmt: skip
    body: list[list[Any]] = []
    rewritten = appended_bytes = 0
    done = 0
    round_no = 0
    t0 = time.perf_counter()
    while done < args.appends:
        step = min(args.every, args.appends - done)
        before_files = live_file_sizes(path)
        build(spark, path, args, n, start=done, count=step)
        after_files = live_file_sizes(path)
        appended_bytes += sum(v for k, v in after_files.items() if k not in before_files)
        done += step
        round_no += 1
        result = optimize_path(spark, OptimizeRequest(path, bytes_per_iter=args.bytes_per_iter))
        got = sum(m.bytes_in for m in result.iterations if m.committed)
        rewritten += got
        body.append([round_no, done, len(result.iterations), result.outcome, got, rewritten, appended_bytes,
                     *layout_cells(layout(spark, path))])  # fmt: skip
        print(f"  round {round_no}: {done} appends, {len(result.iterations)} iterations ({result.outcome}), "
              f"{got} bytes rewritten", flush=True)  # fmt: skip
    cont_s = time.perf_counter() - t0
    body.append(["one-go", "-", "-", "-", "-", "-", "-", *layout_cells(ref)])
    print()
    print(fmt_table(header, body))
    print(f"\ncontinuous mode (optimize every {args.every} appends): {round_no} rounds, {cont_s:.0f}s incl. appends")
    return layout(spark, path), rewritten, appended_bytes


def run_sampling(spark: Any, args: argparse.Namespace, path: str, ref: dict[str, float]) -> list[list[Any]]:
    """SamplingOverheadReduction on a converged table until nothing is selected."""
    from use.optimize.loop import optimize_path
    from use.optimize.request import OptimizeRequest

    f = args.sampling_fraction
    before = layout(spark, path, f)
    ref_f = layout(spark, os.path.dirname(path) + "/one_go", f)
    result = optimize_path(
        spark,
        OptimizeRequest(
            path,
            strategy="SamplingOverheadReduction",
            bytes_per_iter=args.bytes_per_iter,
            overrides={"sampling-fraction": str(f)},
        ),
    )
    after = layout(spark, path, f)
    again = optimize_path(
        spark, OptimizeRequest(path, dry_run=True, strategy="SamplingOverheadReduction", overrides={"sampling-fraction": str(f)})
    )
    rewritten = sum(m.bytes_in for m in result.iterations if m.committed)
    print(f"\nsampling phase: SamplingOverheadReduction (f={f}): {len(result.iterations)} iterations, outcome "
          f"{result.outcome}, {rewritten} bytes rewritten; a new plan selects {len(again.plan.tasks) if again.plan else 0} task(s)")  # fmt: skip
    return [
        [f"sampling: sample({f}) bytes read, before / after SamplingOverheadReduction", before["sample_bytes"],
         after["sample_bytes"], after["sample_bytes"] / max(1, before["sample_bytes"]), "< 1"],
        [f"sampling: sample({f}) bytes read, after / one-go", after["sample_bytes"], ref_f["sample_bytes"],
         after["sample_bytes"] / max(1, ref_f["sample_bytes"]), "-"],
        [f"sampling: sample({f}) files, after / one-go", after["sample_files"], ref_f["sample_files"],
         after["sample_files"] / max(1, ref_f["sample_files"]), "-"],
    ]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--appends", type=int, default=100)
    ap.add_argument("--rows-per-append", type=int, default=1000)
    ap.add_argument("--cube-size", type=int, default=2000)
    ap.add_argument(
        "--bytes-per-iter",
        type=int,
        default=None,
        help="use.optimization.bytes-per-iter (also the task IO limit); default: the table's (1 GB)",
    )
    ap.add_argument(
        "--mode",
        choices=("both", "after", "continuous", "throughput"),
        default="both",
        help="throughput: only the merge-task throughput comparison",
    )
    ap.add_argument("--every", type=int, default=10, help="continuous mode: optimize after every N appends")
    ap.add_argument(
        "--sampling-fraction",
        type=float,
        default=0.01,
        help="sampling phase: SamplingOverheadReduction's fraction (0 to skip the phase)",
    )
    ap.add_argument("--repeat", type=int, default=2, help="repetitions of the throughput measurement")
    ap.add_argument("--no-throughput", action="store_true", help="skip the merge-task throughput comparison")
    ap.add_argument("--keep", default=None, help="directory to keep the tables in (default: a temp dir, removed)")
    ap.add_argument("--cache", default=None, help="directory caching the built tables between runs")
    args = ap.parse_args()
    if args.appends < 100:
        print("note: the goals are stated for >= 100 appends", file=sys.stderr)
    if args.every < 1:
        ap.error("--every must be >= 1")

    from use.session import spark_session

    spark = spark_session("use-bench-convergence", conf={"spark.sql.shuffle.partitions": "4"})
    work = args.keep or tempfile.mkdtemp(prefix="use-bench-convergence-")
    os.makedirs(work, exist_ok=True)
    n, total = args.rows_per_append, args.appends * args.rows_per_append
    goals: list[list[Any]] = []
    try:
        appended, one_go, build_s = cached_tables(spark, args, work)
        ref = layout(spark, one_go)
        print(f"{args.appends} appends of {n} rows ({total} rows), cube size {args.cube_size}, "
              f"bytes-per-iter {args.bytes_per_iter or 'default'}; built in {build_s:.0f}s")  # fmt: skip
        pristine = os.path.join(work, "pristine")
        shutil.rmtree(pristine, ignore_errors=True)
        shutil.copytree(appended, pristine)

        if args.mode == "throughput" and args.no_throughput:
            ap.error("--mode throughput and --no-throughput exclude each other")
        if args.mode in ("both", "after"):
            after, rewritten, appended_bytes = run_after(spark, args, appended, ref)
            goals += goal_rows("after", after, ref, rewritten, appended_bytes)
            if args.sampling_fraction > 0:
                goals += run_sampling(spark, args, appended, ref)
        if args.mode in ("both", "continuous"):
            after, rewritten, appended_bytes = run_continuous(spark, args, work, ref)
            goals += goal_rows(f"continuous/{args.every}", after, ref, rewritten, appended_bytes)

        if not args.no_throughput:
            qb = timed_pairs(spark, pristine, work, args.repeat, coalesce=False)
            bp = timed_pairs(spark, plain_delta(work, args.appends, n), work, args.repeat, coalesce=True)
            goals += [
                [f"merge task vs plain read+write ({qb.files} files, {qb.bytes} B): throughput",
                 f"{min(qb.task):.2f}s", f"{min(qb.plain):.2f}s", qb.best_ratio, ">= 0.75"],
                [f"bin-packing task vs plain read+coalesce(1)+write ({bp.files} files, {bp.bytes} B): throughput",
                 f"{min(bp.task):.2f}s", f"{min(bp.plain):.2f}s", bp.best_ratio, ">= 0.75"],
            ]  # fmt: skip
            print(f"\nthroughput ratios over {args.repeat} repeats (plain seconds / task seconds, order alternating):")
            print(f"  merge task:       {qb.cells()}: {', '.join(f'{r:.2f}' for r in qb.ratios)}")
            print(f"  bin-packing task: {bp.cells()}: {', '.join(f'{r:.2f}' for r in bp.ratios)}")
        print()
        print(fmt_table(["measure", "ours", "baseline", "ratio", "goal"], goals))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
