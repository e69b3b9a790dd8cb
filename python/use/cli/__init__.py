"""The `use` command line.

Each subcommand lives in its own module under `use.cli` and exposes `add_parser(subparsers)`,
which registers its arguments and sets `func(args) -> int` as the handler; this module only
dispatches. Typed USE errors become one clear line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from use.cli import demo, history, optimize, passwd, properties, restore, serve, vacuum
from use.errors import CLI, UseError

# Subcommand modules, in the order `use --help` lists them. `--help` imports them all, so each
# defers what imports Spark into the function that runs its command.
SUBCOMMANDS = (demo, optimize, vacuum, restore, history, properties, serve, passwd)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="use", description="USE, the Universal Storage Engine.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UseError as exc:
        # One line: the message in the command line's terms (its flags, not Python arguments).
        text = " ".join(exc.for_surface(CLI).split())
        print(f"use {args.command}: error: {text}", file=sys.stderr)
        return 2
