"""`use restore`: bring a table back to an earlier version in one new commit (Delta RESTORE)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("restore", help="bring the table back to an earlier version (one new commit)")
    parser.add_argument("--table-location", required=True, help="path of the Delta table")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--version", type=int, help="the version to restore")
    target.add_argument("--timestamp", help="restore the version current at this time, e.g. '2025-01-01 00:00:00' (UTC)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # deferred: pyarrow and the Delta log take a noticeable time to import; `use --help` imports every subcommand module
    from use.delta import DeltaLog
    from use.delta.restore import restore

    print(restore(DeltaLog.for_path(args.table_location), args.version, args.timestamp))
    return 0
