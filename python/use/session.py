"""Building the SparkSession USE runs on, with the SQL surface installed.

One place decides the settings every USE process needs: Python workers must run the interpreter
that has this package and pyarrow installed (`PYSPARK_PYTHON`), Arrow must be on for the
executor-side Arrow batches, and a local session should not start a UI or print progress bars.
Anything the caller passes wins over these defaults, so the same code runs on a cluster by
passing another master URL. The helpers USE's own Spark work uses on any session are in
`use.runtime`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

import use.sql
from use.runtime.shim import shim_jar

DRIVER_CLASS_PATH_CONF = "spark.driver.extraClassPath"

DEFAULT_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.driver.memory": "4g",
}


def spark_session(app_name: str = "use", master: str | None = None, conf: Mapping[str, str] | None = None) -> SparkSession:
    """Return the active SparkSession, creating a local one with USE's defaults if there is none."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    master = master or os.environ.get("USE_SPARK_MASTER", "local[*]")
    if master.startswith("local"):
        # A local session talks only to itself; binding to loopback also avoids Spark's warning
        # about the host name resolving to a loopback address.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in session_settings(conf).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    _install_sql(session)
    return session


def _install_sql(session: SparkSession) -> None:
    """Register the SQL surface's Python side when the session runs USE's extension (a session
    without the shim jar, e.g. no Java compiler, keeps the Python API only)."""
    if use.sql.configured(session):
        use.sql.install(session)


def session_settings(conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """USE's defaults under the caller's `conf`, plus the JVM shim's jar on the driver's and the
    executors' class paths (`spark.jars` is given to spark-submit when pyspark launches the JVM, so
    the driver's py4j sees the classes too), after any jars the caller lists, and the SQL
    extension and session catalog that serve Delta/Qbeast tables (`use.sql.session_conf`); no jar
    and no extension when the jar cannot be built (USE then takes its Python paths)."""
    settings = {**DEFAULT_CONF, **(conf or {})}
    jar = shim_jar()
    if jar is not None:
        settings["spark.jars"] = ",".join(j for j in (settings.get("spark.jars", "").strip(), str(jar)) if j)
        # Also on the driver JVM's own class path: `spark.jars` land in a URLClassLoader that Hive's
        # SessionState.close() closes (every JDBC session close in `use serve` does), after which
        # the jar's classes not loaded yet cannot be loaded at all.
        driver_path = settings.get(DRIVER_CLASS_PATH_CONF, "").strip()
        settings[DRIVER_CLASS_PATH_CONF] = os.pathsep.join(p for p in (driver_path, str(jar)) if p)
        settings.update(use.sql.session_conf(settings))
    return settings
