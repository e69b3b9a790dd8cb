"""Where our rewriting goes: bytes read by each optimization task, by what the input files are.

`benchmarks/tradeoff.py` reports one figure per run for ours, bytes rewritten per byte appended.
This takes the same table (the same appends, shape and settings, ours only) and, before every task
of every round, asks the planner for the task and sorts its input files into kinds:

* `append`: a file an append wrote, not yet rewritten;
* `d<k>`: a file written by an optimization whose shallowest cube (of the task's revision) is at
  depth k, so `d0` is the root's file with the rows it buffers, `d1` a depth-1 cube's file or a
  fragment of one;
* `older-revision`: a file of a revision older than the latest, re-indexed into the latest (a
  superseded revision's files, after the data drifted out of its space, or staging files), whatever
  its depth.

Each kind's bytes are summed over the run and divided by the bytes appended, so the kinds add up to
the run's rewritten / appended figure. One line per task with `--tasks`. The figures are bytes only,
so they do not depend on the machine.

Usage: PYTHONPATH=python .venv/bin/python benchmarks/tradeoff_breakdown.py [--every 10]
       [--shape fixed|drift] [--appends 200] [--tasks] [--ours-property tiering.ratio=2 ...]
About 2 minutes at the defaults (k = 10, fixed) on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tradeoff
from _common import fmt_table, live_file_sizes
from _tradeoff_report import Settings

APPEND, OLDER = "append", "older-revision"


def kinds_of(snapshot: Any, task: Any, appended: set[str]) -> dict[str, int]:
    """The task's input bytes by kind (module docstring)."""
    from use.optimize.strategies._common import RevisionBlocks

    paths = snapshot.files.column("path").to_pylist()
    sizes = snapshot.files.column("size").to_pylist()
    index = {p: i for i, p in enumerate(paths)}
    revision = snapshot.files.column("revision_id").to_pylist()
    latest = snapshot.latest_revision_id
    rb = RevisionBlocks.of(snapshot, task.revision_id)
    depth = rb.cube_depth()
    out: dict[str, int] = {}
    for path in task.paths:
        i = index.get(path)
        if i is None:  # the task names files by their log path; a relative one matches its suffix
            i = next(j for j, p in enumerate(paths) if path.endswith(p))
        mine = rb.file == i
        if paths[i] in appended:
            kind = APPEND
        elif revision[i] != latest:
            kind = OLDER
        else:
            kind = f"d{int(depth[rb.code[mine]].min())}" if mine.any() else OLDER
        out[kind] = out.get(kind, 0) + int(sizes[i])
    return out


def run(spark: Any, s: Settings, shape: str, k: int, work: str, show_tasks: bool) -> tuple[dict[str, int], int, list[str]]:
    """Bytes read per kind over the run, bytes appended, and one line per task."""
    from use import QbeastTable
    from use.optimize.config import OptimizationConfig
    from use.optimize.planner import plan
    from use.qbeast.reader import load_snapshot

    path = os.path.join(work, "t")
    overrides = dict(s.ours_properties)
    totals: dict[str, int] = {}
    appended_bytes, lines = 0, []
    live: dict[str, int] = {}
    appended: set[str] = set()
    for i in range(s.appends):
        tradeoff.append(spark, s, shape, "ours", i, path)
        now = live_file_sizes(path)
        new = {p: n for p, n in now.items() if p not in live}
        appended_bytes += sum(new.values())
        appended |= set(new)
        live = now
        if (i + 1) % k and i + 1 != s.appends:
            continue
        while True:
            snapshot = load_snapshot(path)
            config = OptimizationConfig.from_properties(snapshot.configuration, overrides)
            task = next(iter(plan(snapshot, config).tasks), None)
            if task is None:
                break
            kinds = kinds_of(snapshot, task, appended)
            result = QbeastTable.for_path(spark, path).optimize(progress=False, max_iterations=1, **overrides)
            if not result.committed:
                break  # planned but not committed (a guard or a conflict): the round ends as optimize() would
            if task.kind == "relabel":
                kinds = {}  # files moved by their tags: nothing read
            for kind, n in kinds.items():
                totals[kind] = totals.get(kind, 0) + n
            if show_tasks:
                parts = " ".join(f"{kind}={n / 1000:.0f}k" for kind, n in sorted(kinds.items()))
                lines.append(f"append {i + 1:>4}: {task.bytes / 1000:>7.0f} kB  {parts}  ({task.strategy}: {task.reason})")
        live = live_file_sizes(path)
    return totals, appended_bytes, lines


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--every", type=int, default=10, help="optimize every k appends (default 10)")
    p.add_argument("--shape", choices=("fixed", "drift"), default="fixed")
    p.add_argument("--appends", type=int, default=200)
    p.add_argument("--tasks", action="store_true", help="one line per task, with its strategy and reason")
    p.add_argument(
        "--ours-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a use.optimization.* override for ours (without the prefix), e.g. tiering.ratio=2",
    )
    args = p.parse_args(argv)
    if args.every < 1 or args.appends < 1:
        p.error("--every and --appends must be >= 1")
    props = tuple(tuple(a.split("=", 1)) for a in args.ours_property)
    if any(len(kv) != 2 for kv in props):
        p.error("--ours-property takes KEY=VALUE")
    s = Settings(shapes=(args.shape,), contenders=("ours",), every=(args.every,), appends=args.appends, ours_properties=props)  # type: ignore[arg-type]

    from use.session import spark_session

    spark = spark_session("tradeoff-breakdown", conf={"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g"})
    work = tempfile.mkdtemp(prefix="use-tradeoff-breakdown-")
    try:
        totals, appended, lines = run(spark, s, args.shape, args.every, work, args.tasks)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for line in lines:
        print(line)
    order = sorted(totals, key=lambda kind: (kind != APPEND, kind == OLDER, kind))
    rows = [[kind, f"{totals[kind] / 1e6:.2f}", f"{totals[kind] / appended:.2f}"] for kind in order]
    rows.append(["total", f"{sum(totals.values()) / 1e6:.2f}", f"{sum(totals.values()) / appended:.2f}"])
    print(
        f"\n{args.shape}, optimized every {args.every} of {args.appends} appends ({appended / 1e6:.2f} MB appended)"
        + (f", {', '.join('='.join(kv) for kv in props)}" if props else "")
        + ":"
    )
    print(fmt_table(["input files", "MB read by tasks", "per byte appended"], rows))


if __name__ == "__main__":
    main()
