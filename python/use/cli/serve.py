"""`use serve`: run the SQL server (JDBC/ODBC through Spark's Thrift server) until stopped."""

from __future__ import annotations

import argparse
import sys

from use.errors import ConfigError
from use.server.config import (
    AUTH_MODES,
    DEFAULT_DATA_DIR,
    DEFAULT_HOST,
    DEFAULT_MASTER,
    DEFAULT_PORT,
    AuthOptions,
    ServerOptions,
    is_loopback,
)
from use.server.demo import DEMO_INTERVAL, demo_conf, demo_services, print_demo


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the SQL server for JDBC/ODBC clients (beeline, PyHive, BI tools) until Ctrl-C",
        description="Start a Spark session with the Hive metastore under the data directory and Spark's "
        "Thrift server in it. Prints the JDBC URL once it accepts connections; stops cleanly on "
        "SIGINT/SIGTERM; a restart on the same data directory finds every table again.",
    )
    parser.add_argument(
        "--data-dir",
        default=DEFAULT_DATA_DIR,
        help=f"metastore, warehouse (managed tables), logs and scratch space (default ./{DEFAULT_DATA_DIR})",
    )
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}, this machine only; 0.0.0.0 for every interface)",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"JDBC port (default {DEFAULT_PORT})")
    parser.add_argument("--master", default=DEFAULT_MASTER, help=f"Spark master URL (default {DEFAULT_MASTER})")
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark conf for the server's session (repeatable), e.g. --conf spark.driver.memory=8g",
    )
    parser.add_argument(
        "--auth",
        choices=AUTH_MODES,
        default=None,
        help="who may connect: password (users of --password-file, see `use passwd`), ldap (a simple bind as "
        "uid=USER,<--ldap-base-dn> on --ldap-url), none (anyone who reaches the port). Default: none, and only on a "
        "loopback --host; another --host needs --auth",
    )
    parser.add_argument("--password-file", metavar="FILE", help="--auth password: the users' file `use passwd` writes")
    parser.add_argument("--ldap-url", metavar="URL", help="--auth ldap: the LDAP server, e.g. ldap://ldap.example.org:389")
    parser.add_argument("--ldap-base-dn", metavar="DN", help="--auth ldap: where users are, e.g. ou=people,dc=example,dc=org")
    parser.add_argument(
        "--admin",
        action="append",
        default=[],
        metavar="USER[,USER...]",
        help="users who may run administrators' operations (VACUUM with force => true); default: the process owner "
        "without --auth, nobody with it",
    )
    parser.add_argument(
        "--allowed-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory SQL statements may read and write besides the data dir (repeatable); paths outside every "
        "allowed root are refused",
    )
    parser.add_argument(
        "--no-service",
        action="store_true",
        help="do not run the continuous optimization service (tables are optimized only when asked)",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="`make run`: on a fresh data dir, create a small demo Qbeast table with continuous optimization "
        f"on (interval {DEMO_INTERVAL} unless --conf sets one) and print how to query it",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from use.server.process import serve  # deferred: imports pyspark; `use --help` imports every subcommand module

    if args.demo and args.no_service:
        raise ConfigError("--demo shows the optimization service at work; leave out --no-service")
    auth = AuthOptions.from_flags(args.auth, args.password_file, args.ldap_url, args.ldap_base_dn)
    conf = demo_conf(args.conf) if args.demo else args.conf
    options = ServerOptions.from_flags(
        args.data_dir, args.host, args.port, args.master, conf, not args.no_service, auth, args.admin, args.allowed_root
    )
    if auth.mode == "none" and not is_loopback(options.host):
        print(
            f"use serve: warning: --auth none on --host {options.host}: anyone who reaches port {options.port} runs SQL "
            "as this server, with no password",
            file=sys.stderr,
            flush=True,
        )
    if not args.demo:
        return serve(options)
    return serve(options, demo_services(options), after_ready=print_demo)
