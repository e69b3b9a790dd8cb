"""`use serve`: run the SQL server (JDBC/ODBC through Spark's Thrift server) until stopped."""

from __future__ import annotations

import argparse

from use.errors import ConfigError
from use.server.config import DEFAULT_DATA_DIR, DEFAULT_HOST, DEFAULT_MASTER, DEFAULT_PORT, ServerOptions
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

    if not args.demo:
        options = ServerOptions.from_flags(args.data_dir, args.host, args.port, args.master, args.conf, not args.no_service)
        return serve(options)

    if args.no_service:
        raise ConfigError("--demo shows the optimization service at work; leave out --no-service")
    options = ServerOptions.from_flags(args.data_dir, args.host, args.port, args.master, demo_conf(args.conf))
    return serve(options, demo_services(options), after_ready=print_demo)
