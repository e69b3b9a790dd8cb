"""`use passwd`: the users of `use serve --auth password` (add or change, remove, list; never a hash)."""

from __future__ import annotations

import argparse
import getpass
import sys

from use.errors import ConfigError
from use.server.passwords import add_user, check_user_name, read_entries, remove_user


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "passwd",
        help="add, remove or list the users of `use serve --auth password`",
        description="Manage the password file of `use serve --auth password --password-file FILE`: salted "
        "PBKDF2-HMAC-SHA256 hashes, one user a line (docs/server.md). A running server reads the file at every "
        "connection: changes count at once. Passwords are read from the terminal (asked twice) or, with "
        "--password-stdin, from the first line of standard input; they are never printed.",
    )
    parser.add_argument("--file", required=True, metavar="FILE", help="the password file (created by the first add)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add a user, or set a user's new password")
    add.add_argument("user")
    add.add_argument("--password-stdin", action="store_true", help="read the password from standard input's first line")
    remove = actions.add_parser("remove", help="remove a user")
    remove.add_argument("user")
    actions.add_parser("list", help="list the users (names only)")
    parser.set_defaults(func=run)


def _password(user: str, from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if not sys.stdin.isatty():
        raise ConfigError("no terminal to ask for the password; pipe it in with --password-stdin")
    first = getpass.getpass(f"password for {user}: ")
    if getpass.getpass("again: ") != first:
        raise ConfigError("the two passwords differ; run the command again")
    return first


def run(args: argparse.Namespace) -> int:
    if args.action == "list":
        for user in sorted(read_entries(args.file)):
            print(user)
        return 0
    user = check_user_name(args.user)
    if args.action == "remove":
        remove_user(args.file, user)
        print(f"removed {user} from {args.file}")
        return 0
    new = add_user(args.file, user, _password(user, args.password_stdin))
    print(f"{'added' if new else 'changed the password of'} {user} in {args.file}")
    return 0
