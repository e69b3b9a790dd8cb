"""`use optimize`: a one-off continuous optimization of one table, until nothing is selected.

The flags are the seed's CubeDefragmentation CLI (`--table-location`, `--revision-id`,
`--bytes-per-iter`, `--revision-rewrite`) plus the engine's own (`--strategy`, `--zorder-by`,
`--dry-run`, `--max-iterations`). Values are handed to the optimization config as strings, so a bad value gets the
same typed error (one line, exit code 2) as a bad table property would.
"""

from __future__ import annotations

import argparse

from use.errors import InvalidArgumentError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
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


def _positive_int(value: str | None, flag: str) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise InvalidArgumentError(f"{flag} must be an integer, got {value!r}") from None
    if number < 0 or (number == 0 and flag != "--revision-id"):
        raise InvalidArgumentError(f"{flag} must be {'>= 0' if flag == '--revision-id' else '> 0'}, got {number}")
    return number


def run(args: argparse.Namespace) -> int:
    # deferred: these import pyspark (and pyarrow), and `use --help` imports every subcommand module
    from use.optimize.loop import optimize_path
    from use.optimize.report import format_iteration
    from use.session import spark_session

    revision_id = _positive_int(args.revision_id, "--revision-id")
    max_iterations = _positive_int(args.max_iterations, "--max-iterations")
    spark = spark_session("use-optimize")
    result = optimize_path(
        spark,
        args.table_location,
        revision_id=revision_id,
        strategy=args.strategy,
        zorder_by=args.zorder_by,
        where=args.where,
        bytes_per_iter=args.bytes_per_iter,
        revision_rewrite=True if args.revision_rewrite else None,
        dry_run=args.dry_run,
        max_iterations=max_iterations,
        all_tasks=args.all_tasks,
        on_iteration=lambda m: print(format_iteration(m), flush=True),
    )
    print(result)  # the plan of a dry run, else the metrics table and a summary line
    return 0
