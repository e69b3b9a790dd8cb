"""`use vacuum`: delete data files the table no longer references (Delta VACUUM)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("vacuum", help="delete unreferenced data files older than the retention")
    parser.add_argument("--table-location", required=True, help="path of the Delta table")
    parser.add_argument(
        "--retention-hours",
        type=float,
        default=None,
        help="keep files removed less than this many hours ago (default: delta.deletedFileRetentionDuration, 168h)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    parser.add_argument("--force", action="store_true", help="allow a retention below the table's safety threshold")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # deferred: pyarrow and the Delta log take a noticeable time to import; `use --help` imports every subcommand module
    from use.delta import DeltaLog
    from use.delta.vacuum import vacuum

    result = vacuum(
        DeltaLog.for_path(args.table_location),
        args.retention_hours,
        dry_run=args.dry_run,
        enforce_retention_check=not args.force,
    )
    print(result)  # what was deleted, with its size, then the files
    return 0
