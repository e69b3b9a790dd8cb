"""`use history`: the table's commits, newest first (like Delta's DESCRIBE HISTORY)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from use.display import format_ms, text_table
from use.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from use.delta.log import HistoryEntry

#: Width of the parameters and metrics cells unless --full is given: a commit's parameters can be
#: kilobytes of JSON (table properties, optimization reasons), which would bury the table.
CELL_WIDTH = 60


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("history", help="show the table's commits, newest first")
    parser.add_argument("--table-location", required=True, help="path of the Delta table")
    parser.add_argument("--limit", type=int, default=20, help="how many commits to show (default 20)")
    parser.add_argument(
        "--full", action="store_true", help=f"show parameters and metrics whole (default: cut to {CELL_WIDTH} characters)"
    )
    parser.set_defaults(func=run)


def _pairs(values: Mapping[str, Any]) -> str:
    """`k=v, k=v` with JSON-encoded values left as the log stores them, other values as JSON."""
    return ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v, sort_keys=True)}" for k, v in values.items())


def render_history(entries: Sequence[HistoryEntry], *, full: bool = False) -> str:
    """Commits as a text table: version, ISO timestamp (UTC), operation, parameters, metrics."""
    rows = [[e.version, format_ms(e.timestamp), e.operation, _pairs(e.parameters) or "-", _pairs(e.metrics) or "-"]
            for e in entries]  # fmt: skip
    return text_table(
        ["version", "timestamp", "operation", "parameters", "metrics"], rows, max_width=None if full else CELL_WIDTH
    )


def run(args: argparse.Namespace) -> int:
    # deferred: pyarrow and the Delta log take a noticeable time to import; `use --help` imports every subcommand module
    from use.delta import DeltaLog

    if args.limit <= 0:
        raise InvalidArgumentError(f"--limit must be a positive number of commits, got {args.limit}")
    print(render_history(DeltaLog.for_path(args.table_location).history(limit=args.limit), full=args.full))
    return 0
