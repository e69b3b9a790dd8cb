"""`use history`: the table's commits, newest first (like Delta's DESCRIBE HISTORY)."""

from __future__ import annotations

import argparse
import json


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("history", help="show the table's commits, newest first")
    parser.add_argument("--table-location", required=True, help="path of the Delta table")
    parser.add_argument("--limit", type=int, default=20, help="how many commits to show (default 20)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from use.delta import DeltaLog
    from use.errors import InvalidArgumentError

    if args.limit <= 0:
        raise InvalidArgumentError(f"--limit must be a positive number of commits, got {args.limit}")
    for entry in DeltaLog.for_path(args.table_location).history(limit=args.limit):
        print(
            f"{entry.version:>6}  {entry.timestamp}  {entry.operation:<20} "
            f"params={json.dumps(entry.parameters, sort_keys=True)} metrics={json.dumps(entry.metrics, sort_keys=True)}"
        )
    return 0
