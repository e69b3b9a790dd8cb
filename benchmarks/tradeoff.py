"""Read quality per byte rewritten, side by side: our default chain vs Delta's bin packing, Z-order and Hilbert.

A table is built by `--appends` small appends (default 200) and optimized every k appends (k in
`--every`, default 1, 10, 50, and once more after the last append when k does not divide the
appends) by each contender:

* ours: a Qbeast table optimized with `QbeastTable.optimize()` and default settings (the default
  strategy chain), as a new user would;
* binpack: Delta's auto-compaction on a plain Delta table: the `SmallFiles` strategy with Delta's
  auto-compaction thresholds (`spark.databricks.delta.autoCompact.*`): files smaller than
  minFileSize = maxFileSize / 2 count as small; once `--autocompact-min-files` (Delta's minNumFiles,
  50) of them exist they are bin-packed (Delta's OPTIMIZE bins) into files of at most maxFileSize;
  `--autocompact-min-files 0` runs plain `BinPacking` (Delta OPTIMIZE) with the same sizes every round;
* zorder: `DeltaTable.optimize(zorder_by=["x", "y"])`, Delta's OPTIMIZE ZORDER BY, with
  `zorder.min-cube-size` set past any table size so every round re-sorts the whole table, as Delta's
  command does (our ZOrder strategy otherwise settles ZCubes past min-cube-size);
* hilbert: the same with `strategy="Hilbert"`.

maxFileSize (the plain-Delta contenders' file size) is the bytes of `--cube-size` rows, so every
contender aims at files of the same size as ours (Delta's 128 MiB default would make one file of the
whole table at these sizes).

Two data shapes: `fixed`, uniform x, y in [0, 100) (Qbeast writes declare that space with
`column_stats`, so the table keeps one revision), and `drift`, where append i holds x uniform in
[i*d, i*d + 100) (d = `--drift`): each append reaches a little past the current range, as timestamps
or ids do; Qbeast writes get no `column_stats`, so a write whose values leave the revision's space
opens a new revision, as a new user's would.

After every round it records the files and bytes that `sample(0.01)` and a 1% range filter on x
(`x` in [W/2, W/2 + W/100) of the final x range W) read: the reader's own file pruning, without
running the query. A plain Delta table cannot prune a sample: `df.sample(0.01)` scans every file
(Spark samples rows after reading them), so its sample cost is the whole table. Each is divided by
the same read on the same rows written at once as a Qbeast table (one write, one task): the best
layout of that data we know, one yardstick for every contender. The one-go tables are written at
every `--ref-every` appends (and before the first such point); a round between two points is held
against the point at or below it (fewer rows, so never a flattering ratio).

One table: per shape, k and contender, bytes rewritten per byte appended and the median and worst
round of each read ratio, with the issue's goals beside ours. The per-round curves go to a PNG (and
JSON) next to it, in `--out` (paths printed).

Usage: .venv/bin/python benchmarks/tradeoff.py [--quick] [--appends 200] [--rows-per-append 1000]
       [--cube-size 2000] [--every 1,10,50] [--shapes fixed,drift] [--contenders ours,binpack,zorder,hilbert]
       [--drift 0.5] [--autocompact-min-files 50] [--ref-every 10] [--jobs 2] [--out DIR] [--keep DIR]
       [--ours-property tiering.ratio=0 ...]
       .venv/bin/python benchmarks/tradeoff.py --replot baselines.json,ours.json [--out DIR]

`--jobs` runs that many contenders at once on the one Spark session (tiny Spark jobs are latency
bound; only bytes and files are compared, never times, so the results do not depend on it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import SPACE, live_file_sizes, read_cost
from _tradeoff_report import (
    CONTENDERS,
    DELTA_AUTOCOMPACT_MIN_FILES,
    SAMPLE,
    SHAPES,
    Reads,
    Round,
    Run,
    Settings,
    combine,
    load,
    report,
    save,
    save_rounds,
)

INDEXED = ("x", "y")
#: zorder.min-cube-size past any table here: no ZCube ever settles, every round re-sorts the table.
NEVER_SETTLED = 10**15
_OPEN_LOCK = threading.Lock()

# --- data -----------------------------------------------------------------------------------


def batch(s: Settings, shape: str, i: int) -> Any:
    """Append i of a shape (a pyarrow table), the same for every contender."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = s.rows_per_append
    rng = np.random.default_rng([s.seed, SHAPES.index(shape), i])
    ids = np.arange(i * n, (i + 1) * n, dtype=np.int64)
    shift = s.drift * i if shape == "drift" else 0.0
    payload = pc.binary_join_element_wise("payload-", pa.array(ids).cast(pa.string()), "-" + "z" * 40, "")
    return pa.table({"id": ids, "x": rng.uniform(0.0, 100.0, n) + shift, "y": rng.uniform(0.0, 100.0, n),
                     "payload": payload})  # fmt: skip


def write_qbeast(spark: Any, s: Settings, shape: str, data: Any, path: str) -> None:
    """One write of `data` to a Qbeast table, in one task (one small append = one writer)."""
    from use import QbeastTable

    QbeastTable.write(spark.createDataFrame(data).coalesce(1), path, list(INDEXED), cube_size=s.cube_size,
                      column_stats=SPACE if shape == "fixed" else None)  # fmt: skip


def append(spark: Any, s: Settings, shape: str, contender: str, i: int, path: str) -> None:
    data = batch(s, shape, i)
    if contender == "ours":
        write_qbeast(spark, s, shape, data, path)
    else:
        from deltalake import write_deltalake

        write_deltalake(path, data, mode="append")


def optimize(spark: Any, s: Settings, contender: str, path: str, target: int) -> Any:
    """One round of a contender: its optimizer until nothing is selected (an OptimizeResult)."""
    from use import DeltaTable, QbeastTable

    if contender == "ours":
        with _OPEN_LOCK:  # opening registers format("qbeast"); Spark refuses two registrations at once
            qt = QbeastTable.for_path(spark, path)
        return qt.optimize(progress=False, **{k: v for k, v in s.ours_properties})
    dt = DeltaTable.for_path(spark, path)
    if contender == "binpack":
        sizes = {"max-file-size": target, "min-file-size": max(1, target // 2)}
        if s.autocompact_min_files >= 2:
            return dt.optimize(strategy="SmallFiles", progress=False, overrides={
                **sizes, "small-files.max-size": max(1, target // 2), "task-max-bytes": target,
                "small-files.count-threshold": s.autocompact_min_files})  # fmt: skip
        return dt.optimize(strategy="BinPacking", progress=False, overrides=sizes)
    strategy = "Hilbert" if contender == "hilbert" else None
    return dt.optimize(strategy=strategy, zorder_by=list(INDEXED), progress=False,
                       overrides={"max-file-size": target, "zorder.min-cube-size": NEVER_SETTLED})  # fmt: skip


class Measurer:
    """Read costs of a table's latest snapshot; the range filter is translated once per run."""

    def __init__(self, spark: Any, s: Settings, shape: str) -> None:
        self._spark, self._filter, self._predicate = spark, s.range_filter(shape), None

    def __call__(self, qsnap: Any) -> Reads:
        from use.qbeast.reader import spark_schema, translate_filter

        if self._predicate is None:
            self._predicate = translate_filter(self._spark, spark_schema(qsnap), self._filter)
        sf, sb = read_cost(qsnap, sample=SAMPLE)
        rf, rb = read_cost(qsnap, predicate=self._predicate)
        return Reads(sf, sb, rf, rb)


# --- runs -----------------------------------------------------------------------------------


def one_go(spark: Any, s: Settings, shape: str, n: int, work: str) -> tuple[Reads, int, int]:
    """The first n appends of a shape written at once as a Qbeast table: (reads, bytes, files)."""
    import pyarrow as pa

    from use.qbeast.reader import load_snapshot

    path = os.path.join(work, f"one-go-{shape}-{n}")
    shutil.rmtree(path, ignore_errors=True)
    write_qbeast(spark, s, shape, pa.concat_tables([batch(s, shape, i) for i in range(n)]), path)
    qsnap = load_snapshot(path)
    reads = Measurer(spark, s, shape)(qsnap)
    sizes = qsnap.files.column("size").to_pylist()
    shutil.rmtree(path, ignore_errors=True)
    return reads, sum(sizes), len(sizes)


def run_one(spark: Any, s: Settings, shape: str, contender: str, k: int, target: int,
            refs: dict[int, Reads], work: str, log: Callable[[str], None], run: Run | None = None) -> Run:  # fmt: skip
    """Append, optimizing every k appends; the table's reads after every round (added to `run` as
    they come, so a caller can save a long run's progress)."""
    from use.qbeast.reader import load_snapshot

    path = os.path.join(work, f"{shape}-{contender}-k{k}")
    shutil.rmtree(path, ignore_errors=True)
    run = run if run is not None else Run(shape, contender, k)
    measure = Measurer(spark, s, shape)
    ref_points = sorted(refs)
    live: dict[str, int] = {}
    appended = rewritten = 0
    t_run = time.perf_counter()
    points = set(s.round_points(k))
    for i in range(s.appends):
        append(spark, s, shape, contender, i, path)
        now = live_file_sizes(path)
        appended += sum(size for p, size in now.items() if p not in live)
        live = now
        if i + 1 not in points:
            continue
        t0 = time.perf_counter()
        result = optimize(spark, s, contender, path, target)
        seconds = time.perf_counter() - t0
        got = result.totals()["bytes_in"]
        rewritten += got
        qsnap = load_snapshot(path)
        live = dict(zip(qsnap.files.column("path").to_pylist(), qsnap.files.column("size").to_pylist(), strict=False))
        ref_n = max(p for p in ref_points if p <= i + 1)
        run.rounds.append(Round(
            appends=i + 1, appended_bytes=appended, rewritten_bytes=rewritten, round_bytes=got,
            table_files=len(live), table_bytes=sum(live.values()),
            revisions=sum(1 for r in qsnap.revisions if r != 0), iterations=len(result.iterations),
            seconds=seconds, reads=measure(qsnap), ref=refs[ref_n], ref_appends=ref_n))  # fmt: skip
        if len(run.rounds) % 25 == 0:
            log(f"  {shape}/{contender}/k={k}: {i + 1} appends, {time.perf_counter() - t_run:.0f}s")
    run.seconds = time.perf_counter() - t_run
    log(f"  done {shape}/{contender}/k={k}: {len(run.rounds)} rounds, rewrite {run.rewrite_ratio:.2f}x, "
        f"{run.seconds:.0f}s")  # fmt: skip
    shutil.rmtree(path, ignore_errors=True)
    return run


def run_benchmark(spark: Any, s: Settings, work: str, log: Callable[[str], None] = print,
                  progress: list[Run] | None = None) -> list[Run]:  # fmt: skip
    """Every (shape, contender, k) run of the settings, `s.jobs` at a time; runs in settings order.
    `progress` receives every run as it starts (its rounds grow as they are measured)."""
    lock = threading.Lock()

    def say(msg: str) -> None:
        with lock:
            log(msg)

    pool = ThreadPoolExecutor(max_workers=max(1, s.jobs))
    try:
        refs: dict[str, dict[int, Reads]] = {}
        targets: dict[str, int] = {}
        for shape in s.shapes:
            points = s.ref_points()
            got = list(pool.map(lambda n, shape=shape: one_go(spark, s, shape, n, work), points))
            refs[shape] = {n: r for n, (r, _, _) in zip(points, got, strict=False)}
            _, total_bytes, total_files = got[-1]
            total_rows = s.appends * s.rows_per_append
            targets[shape] = max(1, int(total_bytes / total_rows * s.cube_size))
            say(f"  {shape}: {len(points)} one-go tables; all {s.appends} appends at once: {total_files} files, "
                f"{total_bytes} B; plain-Delta maxFileSize {targets[shape]} B ({s.cube_size} rows)")  # fmt: skip
        jobs = [(shape, c, k) for shape in s.shapes for k in s.every for c in s.contenders]
        # longest first (most rounds, ours first: its appends are Spark writes), so the pool ends together
        order = sorted(range(len(jobs)), key=lambda j: (jobs[j][2], CONTENDERS.index(jobs[j][1])))
        runs = [Run(shape, c, k) for shape, c, k in jobs]
        if progress is not None:
            progress.extend(runs)
        futures = {j: pool.submit(run_one, spark, s, jobs[j][0], jobs[j][1], jobs[j][2], targets[jobs[j][0]],
                                  refs[jobs[j][0]], work, say, runs[j]) for j in order}  # fmt: skip
        return [futures[j].result() for j in range(len(jobs))]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# --- command line ---------------------------------------------------------------------------

QUICK = {"appends": 12, "rows_per_append": 250, "cube_size": 2500, "every": (1, 4), "ref_every": 4,
         "autocompact_min_files": 5}  # fmt: skip


def parse_args(argv: Sequence[str] | None = None) -> tuple[Settings, argparse.Namespace]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: " + ", ".join(f"{k}={v}" for k, v in QUICK.items()))
    ap.add_argument("--appends", type=int)
    ap.add_argument("--rows-per-append", type=int)
    ap.add_argument("--cube-size", type=int)
    ap.add_argument("--every", help="comma-separated k values: optimize after every k appends (default 1,10,50)")
    ap.add_argument("--shapes", help=f"comma-separated, of {','.join(SHAPES)}")
    ap.add_argument("--contenders", help=f"comma-separated, of {','.join(CONTENDERS)}")
    ap.add_argument("--drift", type=float, help="drift shape: x shift per append (x starts in [0, 100)); default 0.5")
    ap.add_argument("--autocompact-min-files", type=int,
                    help=f"binpack: small files before Delta auto-compaction acts (default {DELTA_AUTOCOMPACT_MIN_FILES}; "
                         "0 or 1: BinPacking every round)")  # fmt: skip
    ap.add_argument("--ref-every", type=int, help="write the one-go reference every N appends (default 10)")
    ap.add_argument("--jobs", type=int, help="runs at once on the one Spark session (default 2)")
    ap.add_argument(
        "--ours-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a use.optimization.* key (without the prefix) for ours' optimize(), e.g. tiering.ratio=0; repeatable",
    )
    ap.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
        help="directory for tradeoff.txt/.png/.json (default benchmarks/results)",
    )
    ap.add_argument("--keep", default=None, help="work directory kept after the run (default: a temp dir, removed)")
    ap.add_argument(
        "--replot",
        metavar="JSON[,JSON...]",
        help="only re-render the table and plot of a saved tradeoff.json; several (comma-separated) "
        "saved runs of the same data are combined into one table",
    )
    args = ap.parse_args(argv)
    values: dict[str, Any] = dict(QUICK) if args.quick else {}
    for name in ("appends", "rows_per_append", "cube_size", "drift", "autocompact_min_files", "ref_every", "jobs"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    for name, allowed in (("every", None), ("shapes", SHAPES), ("contenders", CONTENDERS)):
        raw = getattr(args, name)
        if raw is None:
            continue
        items = tuple(p.strip() for p in raw.split(",") if p.strip())
        if allowed is None:
            try:
                values[name] = tuple(int(p) for p in items)
            except ValueError:
                ap.error(f"--{name} takes comma-separated integers, got {raw!r}")
        else:
            bad = [p for p in items if p not in allowed]
            if bad or not items:
                ap.error(f"--{name} takes names of {', '.join(allowed)}, got {raw!r}")
            values[name] = items
    for item in args.ours_property:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            ap.error(f"--ours-property takes KEY=VALUE, got {item!r}")
        values.setdefault("ours_properties", ())
        values["ours_properties"] += ((key.strip(), value.strip()),)
    s = Settings(**values)
    if s.appends < 1 or s.rows_per_append < 1 or s.cube_size < 1 or s.ref_every < 1 or s.jobs < 1:
        ap.error("--appends, --rows-per-append, --cube-size, --ref-every and --jobs must be >= 1")
    if not s.every or min(s.every) < 1:
        ap.error("--every takes k values >= 1")
    return s, args


def run_with_progress(spark: Any, s: Settings, work: str, partial: str, every_s: float = 60.0) -> list[Run]:
    """`run_benchmark`, saving the rounds measured so far to `partial` every minute (a long run cut
    short can still be read with --replot); the file is removed once the run completes."""
    progress: list[Run] = []
    done = threading.Event()

    def dump() -> None:
        while not done.wait(every_s):
            try:
                save_rounds(s, [r for r in progress if r.rounds], partial)
            except (OSError, RuntimeError, ValueError):
                pass  # a snapshot taken while rounds are appended; the next one will do

    os.makedirs(os.path.dirname(partial) or ".", exist_ok=True)
    saver = threading.Thread(target=dump, name="tradeoff-progress", daemon=True)
    saver.start()
    try:
        runs = run_benchmark(spark, s, work, log=lambda m: print(m, flush=True), progress=progress)
    finally:
        done.set()
        saver.join()
    if os.path.exists(partial):
        os.remove(partial)
    return runs


def main(argv: Sequence[str] | None = None) -> None:
    s, args = parse_args(argv)
    if args.replot:
        s, runs = combine([load(p.strip()) for p in args.replot.split(",") if p.strip()])
        text = report(s, runs)
        print(text)
        txt, png, js = save(s, runs, text, args.out)
        print(f"\ntable: {txt}\nplot: {png}\nrounds: {js}")
        return
    from use.session import spark_session

    # small tables, but two one-go writes of up to appends x rows rows at once (--jobs 2): 1 GiB ran out
    # of heap at 200 x 1,000 rows; 2 GiB leaves room, and the benchmark shares its machine with other work
    spark = spark_session("use-bench-tradeoff", conf={"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g"})
    work = args.keep or tempfile.mkdtemp(prefix="use-bench-tradeoff-")
    os.makedirs(work, exist_ok=True)
    t0 = time.perf_counter()
    try:
        runs = run_with_progress(spark, s, work, os.path.join(args.out, "tradeoff.partial.json"))
        text = report(s, runs) + f"\n({time.perf_counter() - t0:.0f}s, {s.jobs} at a time)"
        print()
        print(text)
        txt, png, js = save(s, runs, text, args.out)
        print(f"\ntable: {txt}\nplot: {png}\nrounds: {js}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
