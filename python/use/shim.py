"""`python -m use.shim`: the JVM shim's jar for sessions USE does not build itself.

Without arguments it builds the jar (`use.runtime.shim`) and prints its path; with `--conf` it prints
the `pyspark`/`spark-submit` flags that give a session the jar, USE's SQL extension and its session
catalog, and the one Python call the driver then needs (`use.sql.install(spark)`).
"""

from __future__ import annotations

import shlex
import sys

from use.runtime.shim import build_shim
from use.sql import session_conf

__all__ = ["launch_flags", "main"]


def launch_flags() -> list[str]:
    """The `pyspark`/`spark-submit` flags that give a session USE's jar, SQL extension and session
    catalog (static settings: they must be given when the session starts)."""
    flags = ["--jars", str(build_shim())]
    for key, value in session_conf().items():
        flags += ["--conf", f"{key}={value}"]
    return flags


def main(argv: list[str] | None = None) -> int:
    """`python -m use.shim`: build the jar and print its path; with `--conf`, print the launch
    flags for pyspark/spark-submit and the one Python call their driver needs."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--conf"]:
        print(" ".join(shlex.quote(f) for f in launch_flags()))
        print("# then, once in the Python driver:  import use.sql; use.sql.install(spark)", file=sys.stderr)
        return 0
    if args:
        print("usage: python -m use.shim [--conf]", file=sys.stderr)
        return 2
    print(build_shim())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
