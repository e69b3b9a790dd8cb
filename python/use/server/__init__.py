"""`use serve`: the long-running SQL server (Spark's Thrift server in a USE session).

`config` holds the options and the data directory layout (pure, checked before any JVM starts);
`process` runs the server: session, Thrift server, services, clean stop (`use.server.process.serve`);
`demo` is `use serve --demo`. Importing the package imports `config` only, so the command line's
`--help` needs no Spark.
"""

from use.server.config import READY_PREFIX, DataDir, ServerOptions

__all__ = ["READY_PREFIX", "DataDir", "ServerOptions"]
