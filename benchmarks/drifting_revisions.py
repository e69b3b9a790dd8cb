"""Revisions that pile up (issue 14 §1): drifting appends, optimized every few appends.

The issue's repro: `--appends` (60) appends of `--rows` (1,500) rows of uniform random x, y in
[0, 100) without `columnStats`, written with default settings, `optimize()` with default settings
after every `--every` (10) appends. Each append whose values reach a little past the current range
opens a revision. Runs it in configurations, side by side, against the same rows written at once:

* before: revisionMargin 0 (the exact union, as qbeast-spark) and the optimizer without
  SupersededRevisionsSelection (the chain of before the fix);
* fold only: revisionMargin 0, default chain (older revisions re-indexed into the latest);
* margin only: the default revisionMargin, the chain of before;
* after: both (the defaults).

Per configuration: revisions opened, files, files (bytes) read by `sample(0.01)` and by a 1% range
filter, and bytes rewritten per byte appended.

Usage: PYTHONPATH=python .venv/bin/python benchmarks/drifting_revisions.py [--appends 60] [--rows 1500]
       [--every 10] [--margin 0.1] [--configs before,fold,margin,after]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

RANGE_FILTER = "x >= 50 AND x < 51"  # 1% of [0, 100) along x
OLD_CHAIN = "UnindexedFilesSelection,LeveledCompactionSelection"  # the default chain before the fix
CONFIGS = {  # name: (margin or None for --margin, strategy chain or None for the default)
    "before": (0.0, OLD_CHAIN),
    "fold": (0.0, None),
    "margin": (None, OLD_CHAIN),
    "after": (None, None),
}


def rows(spark: Any, start: int, n: int, seed: int) -> Any:
    return spark.range(start, start + n).selectExpr("id", f"rand({seed}) * 100 as x", f"rand({seed + 7919}) * 100 as y")


def measure(spark: Any, path: str) -> dict[str, int]:
    import pyarrow.compute as pc

    from use.qbeast.reader import load_snapshot, plan_read

    q = load_snapshot(path)
    sample = plan_read(spark, q, sample=0.01)
    rng = plan_read(spark, q, filter=RANGE_FILTER)
    return {
        "revisions": len(set(q.files.column("revision_id").to_pylist())),
        "latest": int(q.latest_revision_id),
        "files": q.files.num_rows,
        "bytes": int(pc.sum(q.files.column("size")).as_py() or 0),
        "sample_files": sample.num_files,
        "sample_bytes": sample.bytes,
        "range_files": rng.num_files,
        "range_bytes": rng.bytes,
    }


def run(spark: Any, path: str, args: argparse.Namespace, margin: float, chain: str | None) -> dict[str, Any]:
    from use import QbeastTable
    from use.optimize.loop import optimize_path
    from use.optimize.request import OptimizeRequest

    spark.conf.set("spark.qbeast.index.revisionMargin", str(margin))
    appended = rewritten = 0
    for i in range(args.appends):
        QbeastTable.write(rows(spark, i * args.rows, args.rows, i), path, ["x", "y"])
        appended += measure_bytes_added(path)
        if (i + 1) % args.every == 0 or i + 1 == args.appends:
            result = optimize_path(spark, OptimizeRequest(path, strategy=chain, max_iterations=200))
            rewritten += sum(m.bytes_in for m in result.committed)
    out: dict[str, Any] = measure(spark, path)
    out["rewritten_per_appended"] = rewritten / max(1, appended)
    return out


def measure_bytes_added(path: str) -> int:
    """Bytes the latest commit added (its add actions)."""
    import json

    from use.delta import DeltaLog

    version = DeltaLog.for_path(path).snapshot().version
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return sum(json.loads(line).get("add", {}).get("size", 0) for line in f if '"add"' in line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--appends", type=int, default=60)
    ap.add_argument("--rows", type=int, default=1500)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--margin", type=float, default=None, help="revisionMargin of the margin configs (default: the default)")
    ap.add_argument("--configs", default="before,fold,margin,after")
    args = ap.parse_args()

    from use import QbeastTable
    from use.display import text_table
    from use.qbeast.revision_change import DEFAULT_REVISION_MARGIN
    from use.session import spark_session

    margin = DEFAULT_REVISION_MARGIN if args.margin is None else args.margin
    spark = spark_session("use-bench-drifting", conf={"spark.sql.shuffle.partitions": "4"})
    work = tempfile.mkdtemp(prefix="use-bench-drifting-")
    try:
        one_go = os.path.join(work, "one-go")
        from functools import reduce

        df = reduce(lambda a, b: a.unionByName(b), [rows(spark, i * args.rows, args.rows, i) for i in range(args.appends)])
        QbeastTable.write(df, one_go, ["x", "y"])
        ref = measure(spark, one_go)
        table = [["one-go write", "-", "-", ref["revisions"], ref["files"], ref["sample_files"], ref["range_files"], "-"]]
        for name in args.configs.split(","):
            m, chain = CONFIGS[name]
            m = margin if m is None else m
            res = run(spark, os.path.join(work, name), args, m, chain)
            table.append([name, m, "old" if chain else "default", f"{res['revisions']} (latest {res['latest']})",
                          res["files"], res["sample_files"], res["range_files"], f"{res['rewritten_per_appended']:.2f}"])  # fmt: skip
            print(name, res, flush=True)
        print(f"\n{args.appends} appends x {args.rows} rows, optimize() every {args.every} appends")
        print(text_table(("config", "margin", "chain", "revisions (live)", "files", "sample(0.01) files",
                          "1% range files", "rewritten/appended"), table))  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
