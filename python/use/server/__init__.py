"""`use serve`: the long-running SQL server (Spark's Thrift server in a USE session).

`config` holds the options and the data directory layout (pure, checked before any JVM starts);
`process` runs the server: session, Thrift server, services, clean stop.
"""

from use.server.config import READY_PREFIX, DataDir, ServerOptions
from use.server.process import Service, UseServer, serve

__all__ = ["READY_PREFIX", "DataDir", "ServerOptions", "Service", "UseServer", "serve"]
