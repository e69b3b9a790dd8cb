"""The names optimization settings go by: the table-property prefix `use.optimization.`, the Spark
conf spellings under `spark.qbeast.use.`, and the service's own keys and Spark settings. Apart from
`use.optimize.config` (which reads the values) so that the strategies, which the config names, can
name their keys too, and so that reading a key's name imports nothing (`use --help` shows some)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "ADMINS_KEY",
    "ALLOWED_ROOTS_KEY",
    "SESSION_USER_KEY",
    "GC_ENABLED_KEY",
    "GC_INTERVAL_KEY",
    "INTERVAL_KEY",
    "MAX_CONCURRENT_KEY",
    "POOL",
    "POOL_PROPERTY",
    "PREFIX",
    "SPARK_CONF",
    "SPARK_OPT_PREFIX",
    "SPARK_PREFIX",
]

PREFIX = "use.optimization."
SPARK_PREFIX = "spark.qbeast.use."
SPARK_OPT_PREFIX = SPARK_PREFIX + "optimization."
INTERVAL_KEY = SPARK_PREFIX + "optimization-interval"
MAX_CONCURRENT_KEY = SPARK_PREFIX + "max-concurrent-optimizations"
GC_INTERVAL_KEY = SPARK_PREFIX + "gc-interval"
#: The directories statements may read and write (comma-separated; unset: anywhere). `use serve` sets
#: it (its data dir and warehouse, plus `--allowed-root`); the shim's `UseAccess` enforces it.
ALLOWED_ROOTS_KEY = SPARK_PREFIX + "allowedRoots"
#: The users who may run administrators' operations (VACUUM with force); `use serve --admin`.
ADMINS_KEY = SPARK_PREFIX + "admins"
#: The JDBC user of a SQL session, set by `use serve` as the session opens (commits carry it as `userName`).
SESSION_USER_KEY = SPARK_PREFIX + "session.user"
#: Table property: the service garbage-collects the table (vacuum + expired log cleanup).
GC_ENABLED_KEY = "use.gc.enabled"

#: The FAIR scheduler pool of the service's optimization jobs (`use.service.runner` puts its runs there).
POOL = "use-optimizer"
POOL_PROPERTY = "spark.scheduler.pool"
#: Spark conf the server's session needs for the pool to matter (FIFO ignores pools).
SPARK_CONF: Mapping[str, str] = {"spark.scheduler.mode": "FAIR"}
