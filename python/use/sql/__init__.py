"""SQL surface: Delta and Qbeast tables as tables of Spark's session catalog.

The JVM shim (`jvm-shim/src/main/scala/use/sql/`) holds the Spark-facing adapters: the session
catalog `use.sql.UseCatalog`, the extension `use.sql.UseSparkSessionExtension` (read planning,
TABLESAMPLE pushdown, refused DML) and the V1 write that hands a query's DataFrame over. Everything
that knows the Delta log, the Qbeast index or how to commit lives here, reached from the JVM
through one py4j callback object (`use.sql.bridge.Bridge`) that `install` registers, in the typed
messages of `use.sql.protocol` (mirrored by the shim's `Protocol.scala`):

- `tables`: describe / create / stage / replace / alter properties / truncate (DDL on the log);
- `scan`: the files each scan of a query reads (partition, stats, cube and sample pruning);
- `write`: INSERT/CTAS/RTAS/writeTo/saveAsTable into Qbeast (OTree write) and Delta tables
  (`DeltaTable.write`'s Spark file write), one commit each.

`use_catalog` (`use.sql.UseLakeCatalog`) is the second catalog: insight tables (`LakeTables`) and
`CALL use_catalog.system.<name>(...)` procedures plus the manual trigger (`UseProcedures`).

A session built by `use.session.spark_session()` has it all; `pyspark`/`spark-submit` users add the
flags `python -m use.shim --conf` prints and call `install(spark)` once in the driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from use.errors import InvalidArgumentError, ShimBuildError
from use.runtime.jvm import driver_jvm
from use.runtime.shim import shim_loaded
from use.sql import insight_source
from use.sql.bridge import register_bridge

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "EXTENSION_CLASS",
    "CATALOG_CLASS",
    "LAKE_CATALOG_CLASS",
    "LAKE_CATALOG_NAME",
    "session_conf",
    "install",
    "installed",
    "configured",
]

EXTENSION_CLASS = "use.sql.UseSparkSessionExtension"
CATALOG_CLASS = "use.sql.UseCatalog"
LAKE_CATALOG_NAME = "use_catalog"
LAKE_CATALOG_CLASS = "use.sql.UseLakeCatalog"
_EXTENSIONS_KEY = "spark.sql.extensions"
_CATALOG_KEY = "spark.sql.catalog.spark_catalog"
_LAKE_CATALOG_KEY = f"spark.sql.catalog.{LAKE_CATALOG_NAME}"


def session_conf(conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The static Spark conf the SQL surface needs, merged into `conf` (another extension the
    caller lists is kept; another session catalog is an error: there can be only one)."""
    conf = dict(conf or {})
    extensions = [e.strip() for e in conf.get(_EXTENSIONS_KEY, "").split(",") if e.strip()]
    if EXTENSION_CLASS not in extensions:
        extensions.append(EXTENSION_CLASS)
    catalog = conf.get(_CATALOG_KEY, CATALOG_CLASS)
    if catalog != CATALOG_CLASS:
        raise InvalidArgumentError(
            f"{_CATALOG_KEY}={catalog} replaces the session catalog USE needs ({CATALOG_CLASS}); drop that setting"
        )
    return {_EXTENSIONS_KEY: ",".join(extensions), _CATALOG_KEY: CATALOG_CLASS, _LAKE_CATALOG_KEY: LAKE_CATALOG_CLASS}


def configured(spark: SparkSession) -> bool:
    """Whether the session was started with USE's extension and session catalog."""
    conf = spark.sparkContext.getConf()
    extensions = [e.strip() for e in (conf.get(_EXTENSIONS_KEY) or "").split(",")]
    return EXTENSION_CLASS in extensions and conf.get(_CATALOG_KEY) == CATALOG_CLASS


def installed(spark: SparkSession) -> bool:
    """Whether the JVM has a Python side registered (SQL on USE tables works)."""
    if not shim_loaded(spark):
        return False
    return bool(driver_jvm(spark).use.sql.Bridge.isRegistered())


def install(spark: SparkSession) -> None:
    """Register this driver's Python side with the JVM so that SQL on Delta/Qbeast tables works.

    The session must have been started with the shim jar and the conf of `session_conf()` (both
    static: `python -m use.shim --conf` prints them). Idempotent; `use.session.spark_session` calls
    it.
    """
    if not shim_loaded(spark):
        raise ShimBuildError(
            "the session was started without USE's JVM shim jar; start it with the flags `python -m use.shim --conf` "
            "prints, or with use.session.spark_session()"
        )
    if not configured(spark):
        raise InvalidArgumentError(
            f"the session was started without USE's SQL extension: set {_EXTENSIONS_KEY}={EXTENSION_CLASS} and "
            f"{_CATALOG_KEY}={CATALOG_CLASS} when it is built (`python -m use.shim --conf` prints the flags)"
        )
    register_bridge(spark)
    insight_source.register(spark)
    _stream_through_v1_sink(spark)


#: The shim's `format("delta")` and `format("qbeast")` provider classes, as Spark names them in
#: `disabledV2Writers`.
PATH_PROVIDER_CLASSES = ("delta.DefaultSource", "qbeast.DefaultSource")
_DISABLED_V2_WRITERS = "spark.sql.streaming.disabledV2Writers"


def _stream_through_v1_sink(spark: SparkSession) -> None:
    """`writeStream.format("delta")` (or "qbeast") takes the provider's micro-batch sink only when
    Spark is told not to look for a DSv2 streaming write on it (the provider's tables have none);
    other entries kept."""
    current = [c.strip() for c in (spark.conf.get(_DISABLED_V2_WRITERS, "") or "").split(",") if c.strip()]
    missing = [c for c in PATH_PROVIDER_CLASSES if c not in current]
    if missing:
        spark.conf.set(_DISABLED_V2_WRITERS, ",".join([*current, *missing]))
