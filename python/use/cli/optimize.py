"""`use optimize`: a one-off continuous optimization of one table, until nothing is selected.

The flags are the seed's CubeDefragmentation CLI (`--table-location`, `--revision-id`,
`--bytes-per-iter`, `--revision-rewrite`) plus the engine's own (`--strategy`, `--zorder-by`,
`--dry-run`, `--max-iterations`, `--all-tasks`). The flags become one `OptimizeRequest`, which reads
their text and checks every value before Spark starts: a bad one is one line naming the flag (exit
code 2), as the Python API and `CALL use_catalog.system.optimize` refuse the same values.
"""

from __future__ import annotations

import argparse

from use.errors import CLI


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "optimize",
        help="optimize a Delta/Qbeast table until nothing is selected",
        description=(
            "Plan from a fresh snapshot, rewrite the selected files, commit (dataChange=false) and "
            "repeat until the planner selects nothing. Qbeast tables index unindexed files and compact "
            "fragmented cubes; plain Delta tables are bin-packed."
        ),
    )
    parser.add_argument("--table-location", required=True, help="path of the table")
    parser.add_argument("--revision-id", default=None, help="the revision to optimize (default: the latest)")
    parser.add_argument(
        "--bytes-per-iter", default=None, help="bytes to rewrite per iteration (default: the table's configuration)"
    )
    parser.add_argument("--revision-rewrite", action="store_true", help="rewrite the whole revision instead of selecting files")
    parser.add_argument("--strategy", default=None, help="the file-selection strategy to use (default: the chain)")
    parser.add_argument(
        "--zorder-by",
        default=None,
        help="columns to cluster by, e.g. a,b: Delta's OPTIMIZE ZORDER BY (the ZOrder strategy, or the key of --strategy Hilbert)",
    )
    parser.add_argument(
        "--where",
        default=None,
        help="a predicate on partition columns, e.g. \"date >= '2024-01-01'\": Delta's OPTIMIZE WHERE (only those partitions)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    parser.add_argument("--max-iterations", default=None, help="stop after this many merge tasks")
    parser.add_argument("--all-tasks", action="store_true", help="run every task of each plan (by score) before re-planning")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # deferred: these import pyspark (and pyarrow), and `use --help` imports every subcommand module
    from use.optimize.loop import optimize_path
    from use.optimize.report import format_iteration
    from use.optimize.request import OptimizeRequest
    from use.session import spark_session

    # checked before Spark starts: a bad flag is one line naming it (`surface=CLI`)
    request = OptimizeRequest(
        args.table_location,
        revision_id=args.revision_id,
        strategy=args.strategy,
        zorder_by=args.zorder_by,
        where=args.where,
        bytes_per_iter=args.bytes_per_iter,
        revision_rewrite=True if args.revision_rewrite else None,
        dry_run=args.dry_run,
        max_iterations=args.max_iterations,
        all_tasks=args.all_tasks,
        surface=CLI,
    )
    spark = spark_session("use-optimize")
    result = optimize_path(spark, request, on_iteration=lambda m: print(format_iteration(m), flush=True))
    print(result)  # the plan of a dry run, else the metrics table and a summary line
    return 0
