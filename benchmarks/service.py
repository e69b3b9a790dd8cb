"""The continuous optimization service at work: a table appended to every few seconds over JDBC.

One `use serve` (the service on, `--interval`) gets a Qbeast table with
`use.optimization.autoOptimize.enabled=true`, then one small `INSERT` over JDBC every `--every`
seconds for `--minutes`. Every `--measure-every` seconds (and once the service has converged after
the last append) the table's layout is measured from its log, without Spark: the files and bytes a
`sample(0.01)` and a 1% range filter (`x >= 50 AND x < 51`) read (the reader's own file pruning),
against the same rows written at once (a CTAS over JDBC per measured row count, with the same
options). Then the idle service's cost to JDBC users: the same small query in a loop against this
server (its service idle, the table converged) and against a second server started with
`--no-service` on a copy of the table, alternating query by query so both see the same machine.

Goals (issue 13 §5):
1. after the service's first run, at every measured moment, sample and range reads within 1.5x the
   files and bytes of the table written at once. Each moment also shows the appended files no
   optimization has rewritten yet ("unmerged appends"), and the goal is checked a second time over
   the moments with none: an append's file holds rows of every weight, so a sample reads it until a
   run merges it, and where the table written at once reads one file for a sample, a moment with an
   unmerged append reads at least twice its files whatever the layout (see docs/benchmarks.md,
   "The service under appends");
2. total bytes rewritten by the optimizations per byte appended: reported;
3. idle service overhead on the JDBC query latency <= 5% (median of the loop).

Usage: .venv/bin/python benchmarks/service.py [--minutes 4] [--every 5] [--rows 2000]
       [--cube-size 2000] [--interval 10s] [--max-wait 30s] [--idle-after 20s] [--measure-every 30] [--queries 40]
       [--keep DIR]
About 9 minutes with the defaults on 2 busy cores; `--minutes 30` for a longer run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import fmt_table, read_cost
from use.optimize.config_values import parse_duration

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from server_support import ServerProcess  # the one way to run a `use serve` subprocess and talk to it

AUTO = "use.optimization.autoOptimize.enabled"
MAX_WAIT = "use.optimization.tiering.max-wait"
IDLE_AFTER = "use.optimization.tiering.idle-after"
SAMPLE = 0.01
RANGE = ("x", 50.0, 51.0)  # 1% of the indexed space along x
QUERY = "SELECT count(*) FROM bench WHERE x >= 50 AND x < 51"
CONVERGE_TIMEOUT_S = 300.0


def select_rows(lo: int, hi: int) -> str:
    """Deterministic, well-spread rows in [0, 100)^2 with a payload (as benchmarks/convergence.py)."""
    return (
        "SELECT id, CAST(pmod(hash(id, 1), 1000000) AS DOUBLE) / 10000.0 AS x, "
        "CAST(pmod(hash(id, 2), 1000000) AS DOUBLE) / 10000.0 AS y, "
        f"concat('payload-', CAST(id AS STRING), '-', repeat('z', 40)) AS payload FROM range({lo}, {hi})"
    )


def options(cube_size: int) -> str:
    return f"USING qbeast OPTIONS ('columnsToIndex'='x,y', 'cubeSize'='{cube_size}')"


@dataclass(frozen=True)
class Reads:
    files: int
    sample_files: int
    sample_bytes: int
    range_files: int
    range_bytes: int


def reads(path: Path) -> Reads:
    """What a sample and the range filter read in the table's latest snapshot (no Spark)."""
    from use.delta.predicates import And, Comparison
    from use.qbeast.reader import load_snapshot

    q = load_snapshot(str(path))
    column, lo, hi = RANGE
    sf, sb = read_cost(q, sample=SAMPLE)
    rf, rb = read_cost(q, predicate=And(Comparison(column, ">=", lo), Comparison(column, "<", hi)))
    return Reads(q.files.num_rows, sf, sb, rf, rb)


class Commits:
    """Bytes appended (data-changing adds) and rewritten (adds of optimizations) so far, and the
    appended files no optimization has rewritten yet, read incrementally from the commit files."""

    def __init__(self, path: Path) -> None:
        self.log = path / "_delta_log"
        self.next = 0
        self.appended = 0
        self.rewritten = 0
        self.optimizations = 0
        self.unmerged: set[str] = set()

    def update(self) -> None:
        while (f := self.log / f"{self.next:020d}.json").exists():
            optimize = False
            adds = []
            for line in f.read_text().splitlines():
                action = json.loads(line)
                if "commitInfo" in action:
                    optimize = action["commitInfo"].get("operation") == "OPTIMIZE"
                if "add" in action:
                    adds.append(action["add"])
                if "remove" in action:
                    self.unmerged.discard(action["remove"]["path"])
            for add in adds:
                if optimize:
                    self.rewritten += int(add["size"])
                elif add.get("dataChange", True):
                    self.appended += int(add["size"])
                    self.unmerged.add(add["path"])
            self.optimizations += int(optimize)
            self.next += 1


@dataclass(frozen=True)
class Moment:
    t: float
    rows: int
    optimizations: int
    appended: int
    rewritten: int
    unmerged: int  # appended files no optimization has rewritten yet
    reads: Reads


def service_state(server: ServerProcess, path: Path) -> dict[str, Any] | None:
    from use.delta.storage import resolve_table_root

    file = server.data_dir / "service" / "optimization-service.json"
    if not file.exists():
        return None
    tables = json.loads(file.read_text())["tables"]
    return next((t for t in tables if t["location"] == resolve_table_root(str(path))), None)


def converged(server: ServerProcess, path: Path) -> bool:
    """The service has run, and its plan check of the latest version found nothing to do."""
    from use.delta import DeltaLog

    st = service_state(server, path)
    if not (st and st["run"] is None and st["runs"] > 0 and st["layout"]):
        return False
    return st["layout"]["pending_tasks"] == 0 and st["layout"]["version"] == DeltaLog(str(path)).snapshot().version


def run_appends(server: ServerProcess, path: Path, args: argparse.Namespace) -> tuple[list[Moment], bool]:
    props = f"'{AUTO}'='true'" + (f", '{MAX_WAIT}'='{args.max_wait}'" if args.max_wait else "")
    props += f", '{IDLE_AFTER}'='{args.idle_after}'" if args.idle_after else ""
    server.sql(f"CREATE TABLE bench (id BIGINT, x DOUBLE, y DOUBLE, payload STRING) {options(args.cube_size)} "
                f"TBLPROPERTIES ({props})")  # fmt: skip
    commits = Commits(path)
    moments: list[Moment] = []
    conn = server.connect()
    cur = conn.cursor()
    start = time.monotonic()
    end = start + args.minutes * 60
    next_append, next_measure, rows = start, start + args.measure_every, 0

    def measure() -> None:
        commits.update()
        m = Moment(time.monotonic() - start, rows, commits.optimizations, commits.appended, commits.rewritten,
                   len(commits.unmerged), reads(path))  # fmt: skip
        moments.append(m)
        print(f"  t={m.t:5.0f}s rows={rows:,} files={m.reads.files} optimizations={m.optimizations}", flush=True)

    try:
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_append:
                cur.execute(f"INSERT INTO bench {select_rows(rows, rows + args.rows)}")
                rows += args.rows
                next_append += args.every
            if now >= next_measure:
                measure()
                next_measure += args.measure_every
            time.sleep(max(0.0, min(next_append, next_measure, end) - time.monotonic()))
    finally:
        conn.close()
    deadline = time.monotonic() + CONVERGE_TIMEOUT_S
    while not (done := converged(server, path)) and time.monotonic() < deadline:
        time.sleep(0.5)  # another process: poll its state file
    if done and (args.max_wait or args.idle_after):
        # The time factor acts once the files have waited, or the table has been quiet: converged
        # again, and no commit for the shorter of max-wait and idle-after plus two intervals (the
        # service had a run in which the wait was over).
        waits = [parse_duration(w) for w in (args.max_wait, args.idle_after) if w]
        quiet = min(waits) + 2 * parse_duration(args.interval)
        while time.monotonic() < deadline and not (converged(server, path) and time.time() - last_commit_s(path) > quiet):
            time.sleep(0.5)
        done = converged(server, path)
    measure()
    return moments, done


def last_commit_s(path: Path) -> float:
    """When the table's latest commit file was written (seconds since the epoch)."""
    return max(f.stat().st_mtime for f in (path / "_delta_log").glob("*.json"))


def one_go_reads(server: ServerProcess, counts: list[int], cube_size: int) -> dict[int, Reads]:
    """The same rows written at once (one CTAS per distinct row count), measured as the table is."""
    out: dict[int, Reads] = {}
    for n in sorted(set(counts)):
        server.sql(f"CREATE TABLE bench_one_go {options(cube_size)} AS {select_rows(0, n)}")
        out[n] = reads(server.data_dir / "warehouse" / "bench_one_go")
        server.sql("DROP TABLE bench_one_go")
    return out


def latency(a: ServerProcess, b: ServerProcess, queries: int) -> tuple[float, float]:
    """Median seconds of the same query on two servers, alternating which goes first."""
    conns = [a.connect(), b.connect()]
    times: list[list[float]] = [[], []]
    try:
        curs = [c.cursor() for c in conns]
        # Warm both up as much as measured: the service's server has already run every append and
        # CTAS, and a cold JIT alone made the other one 20-30% slower in the first runs.
        for cur in curs:
            for _ in range(queries):
                cur.execute(QUERY)
                cur.fetchall()
        for i in range(queries):
            for k in (0, 1) if i % 2 == 0 else (1, 0):
                t0 = time.perf_counter()
                curs[k].execute(QUERY)
                curs[k].fetchall()
                times[k].append(time.perf_counter() - t0)
    finally:
        for c in conns:
            c.close()
    return statistics.median(times[0]), statistics.median(times[1])


def ratio(a: int, b: int) -> float:
    return a / b if b else (1.0 if a == 0 else float("inf"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=4.0, help="how long appends go on")
    p.add_argument("--every", type=float, default=5.0, help="seconds between appends")
    p.add_argument("--rows", type=int, default=2000, help="rows per append")
    p.add_argument("--cube-size", type=int, default=2000)
    p.add_argument("--interval", default="10s", help="the service's optimization interval")
    p.add_argument(
        "--max-wait",
        default=None,
        help="the table's use.optimization.tiering.max-wait (the time factor; without it the table's default, "
        "1h, which the run does not wait for); with it the converged moment is measured once the table "
        "has been quiet that long",
    )
    p.add_argument(
        "--idle-after",
        default=None,
        help="the table's use.optimization.tiering.idle-after (without it the table's default, 10 minutes, "
        "which the run does not wait for); with it the converged moment is measured once the table "
        "has been quiet that long",
    )
    p.add_argument("--measure-every", type=float, default=30.0, help="seconds between layout measurements")
    p.add_argument("--queries", type=int, default=40, help="queries per server in the latency loop")
    p.add_argument("--keep", help="keep the data dirs here (default: a temporary directory, removed)")
    args = p.parse_args()

    work = Path(args.keep or tempfile.mkdtemp(prefix="use-bench-service-"))
    with_service = ServerProcess(
        work / "service", work / "cwd-service", args=("--conf", f"spark.qbeast.use.optimization-interval={args.interval}")
    )
    without = ServerProcess(work / "no-service", work / "cwd-no-service", args=("--no-service",))
    t0 = time.monotonic()
    try:
        print(f"starting use serve (service interval {args.interval}) ...", flush=True)
        with_service.start()
        path = with_service.data_dir / "warehouse" / "bench"
        print(f"appending {args.rows} rows every {args.every:g}s for {args.minutes:g} min ...", flush=True)
        moments, done = run_appends(with_service, path, args)
        print("writing the same rows at once for each measured moment ...", flush=True)
        refs = one_go_reads(with_service, [m.rows for m in moments if m.rows], args.cube_size)

        print("starting use serve --no-service on a copy of the table ...", flush=True)
        copy = work / "bench-copy"
        shutil.copytree(path, copy)
        without.start()
        without.sql(f"CREATE TABLE bench USING qbeast LOCATION '{copy}'")
        on, off = latency(with_service, without, args.queries)
    finally:
        for s in (with_service, without):
            if s.proc is not None:
                s.stop(signal.SIGTERM)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    header = [
        "t s",
        "rows",
        "opt commits",
        "files",
        "unmerged appends",
        "sample files x",
        "sample bytes x",
        "range files x",
        "range bytes x",
        "rewritten/appended",
    ]
    body, worst, worst_merged = [], 0.0, 0.0
    for m in moments:
        if not m.rows:
            continue
        r = refs[m.rows]
        x = [ratio(m.reads.sample_files, r.sample_files), ratio(m.reads.sample_bytes, r.sample_bytes),
             ratio(m.reads.range_files, r.range_files), ratio(m.reads.range_bytes, r.range_bytes)]  # fmt: skip
        if m.optimizations:
            worst = max(worst, *x)
            if not m.unmerged:
                worst_merged = max(worst_merged, *x)
        body.append([f"{m.t:.0f}", m.rows, m.optimizations, m.reads.files, m.unmerged, *x, m.rewritten / max(1, m.appended)])
    print()
    print("reads against the same rows written at once (x = ratio), over time:")
    print(fmt_table(header, body))
    last = moments[-1]
    overhead = on / off - 1.0
    print()
    print(fmt_table(
        ["goal", "measured", "target", "met"],
        [
            ["reads vs one go, worst moment after the first run", f"{worst:.2f}x", "<= 1.5x", "yes" if worst <= 1.5 else "NO"],
            ["  the same, moments with every append merged", f"{worst_merged:.2f}x" if any(not m.unmerged and m.optimizations for m in moments) else "none measured", "<= 1.5x",
             "yes" if worst_merged <= 1.5 else "NO"],
            ["bytes rewritten per byte appended", f"{last.rewritten / max(1, last.appended):.2f}", "reported", "-"],
            ["idle service: JDBC query latency (median)", f"{on * 1000:.0f} ms vs {off * 1000:.0f} ms: {overhead:+.1%}",
             "<= +5%", "yes" if overhead <= 0.05 else "NO"],
        ],
    ))  # fmt: skip
    print(f"\n{args.minutes:g} min of appends ({last.rows:,} rows, {last.optimizations} optimization commits), "
          f"{len(moments)} moments measured; the service converged after the last append: {'yes' if done else 'NO'}; "
          f"total {time.monotonic() - t0:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
