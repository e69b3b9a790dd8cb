"""`use properties`: list, set and unset a table's properties (Delta's SET/UNSET TBLPROPERTIES).

Without `--set`/`--unset` it lists the properties. Every change of one call is one metaData commit,
checked first by the same parser the optimizer and the Python API use
(`use.optimize.properties.alter_properties`), so a bad value changes nothing.
"""

from __future__ import annotations

import argparse

from use.display import text_table
from use.errors import InvalidArgumentError

#: Width of a listed value unless --full: a Qbeast revision property is kilobytes of JSON.
VALUE_WIDTH = 100


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "properties",
        help="list, set or unset table properties",
        description=(
            "List the table's properties, or set (--set key=value) and unset (--unset key) them in one commit. "
            "use.optimization.* values are checked by the optimizer's config parser, delta.* ones by the Delta "
            "log; qbeast.* keys belong to the index and cannot be changed by hand."
        ),
    )
    parser.add_argument("--table-location", required=True, help="path of the table")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="set a property (repeatable)")
    parser.add_argument("--unset", action="append", default=[], metavar="KEY", help="remove a property (repeatable)")
    parser.add_argument("--full", action="store_true", help=f"show values whole (default: cut to {VALUE_WIDTH} characters)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # deferred: pyarrow and the Delta log take a noticeable time to import; `use --help` imports every subcommand module
    from use.optimize.properties import alter_properties, parse_assignment, table_properties

    if args.set or args.unset:
        values: dict[str, str] = {}
        for text in args.set:
            key, value = parse_assignment(text)
            if key in values:
                raise InvalidArgumentError(f"--set gives {key} twice")
            values[key] = value
        version = alter_properties(args.table_location, values, args.unset)
        print(f"committed version {version}" if version is not None else "nothing changed: the values are already set")
    props = table_properties(args.table_location)
    width = None if args.full else VALUE_WIDTH
    print(text_table(["key", "value"], sorted(props.items()), max_width=width) if props else "(no properties)")
    return 0
