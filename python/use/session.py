"""Building the SparkSession USE runs on.

One place decides the settings every USE process needs: Python workers must run the interpreter
that has this package and pyarrow installed (`PYSPARK_PYTHON`), Arrow must be on for the
executor-side Arrow batches, and a local session should not start a UI or print progress bars.
Anything the caller passes wins over these defaults, so the same code runs on a cluster by
passing another master URL.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DEFAULT_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.driver.memory": "4g",
}


def spark_session(app_name: str = "use", master: str | None = None, conf: Mapping[str, str] | None = None):
    """Return the active SparkSession, creating a local one with USE's defaults if there is none."""
    from pyspark.sql import SparkSession

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
    import use.sql

    if use.sql.configured(session):
        use.sql.install(session)


def session_settings(conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """USE's defaults under the caller's `conf`, plus the JVM shim's jar on the driver's and the
    executors' class paths (`spark.jars` is given to spark-submit when pyspark launches the JVM, so
    the driver's py4j sees the classes too), after any jars the caller lists, and the SQL
    extension and session catalog that serve Delta/Qbeast tables (`use.sql.session_conf`); no jar
    and no extension when the jar cannot be built (USE then takes its Python paths)."""
    from use.shim import shim_jar
    from use.sql import session_conf

    settings = {**DEFAULT_CONF, **(conf or {})}
    jar = shim_jar()
    if jar is not None:
        settings["spark.jars"] = ",".join(j for j in (settings.get("spark.jars", "").strip(), str(jar)) if j)
        # Also on the driver JVM's own class path: `spark.jars` land in a URLClassLoader that Hive's
        # SessionState.close() closes (every JDBC session close in `use serve` does), after which
        # the jar's classes not loaded yet cannot be loaded at all.
        driver_path = settings.get(DRIVER_CLASS_PATH_CONF, "").strip()
        settings[DRIVER_CLASS_PATH_CONF] = os.pathsep.join(p for p in (driver_path, str(jar)) if p)
        settings.update(session_conf(settings))
    return settings


PARQUET_CODEC_CONF = "spark.sql.parquet.compression.codec"
DRIVER_CLASS_PATH_CONF = "spark.driver.extraClassPath"


@contextlib.contextmanager
def statement_table_defaults(spark: SparkSession) -> Iterator[None]:
    """Tables created in this block take the default properties the session sets with Delta's
    `spark.databricks.delta.properties.defaults.*` (checked here, before anything is written)."""
    from use.delta.log import new_table_defaults
    from use.delta.snapshot import PROPERTY_DEFAULTS_PREFIX, property_defaults

    settings = {k: v for k, v in spark.conf.getAll.items() if k.startswith(PROPERTY_DEFAULTS_PREFIX)}
    with new_table_defaults(property_defaults(settings)):
        yield


def parquet_codec(spark: SparkSession) -> str:
    """The parquet codec USE's data files are written with: the session's
    `spark.sql.parquet.compression.codec` (snappy by default), as Spark's and Delta's own writers
    take it, checked on the driver (`use.delta.datafile.parquet_compression`) before any file is
    written, and passed to the write tasks by its Spark name."""
    from use.delta.datafile import parquet_compression

    codec = spark.conf.get(PARQUET_CODEC_CONF, "snappy") or "snappy"
    parquet_compression(codec, f"the Spark conf {PARQUET_CODEC_CONF}")
    return codec.strip().lower()


def first_switch(sources: Sequence[tuple[str, object]]) -> bool | None:
    """The first of `(name, raw value)` pairs that is set (not None), as a boolean switch (true/false in
    any case): how a Spark setting that wins over a table property is read (None when none is set).
    A value other than true/false is a ConfigError naming it."""
    from use.errors import ConfigError

    for name, raw in sources:
        if raw is None:
            continue
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(f"{name} must be true or false, got {raw!r}")
        return text == "true"
    return None


def int_conf(spark: SparkSession, key: str, default: int) -> int:
    """An integer Spark setting as Spark would read it, `default` when unset or not a number: for
    settings USE only tunes around (a bad value there is Spark's to report, not ours)."""
    raw = spark.conf.get(key, None)
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def await_job_group_tasks(spark: SparkSession, timeout_s: float = 60.0) -> bool:
    """Wait until no task of this thread's Spark job group is running (True), or `timeout_s` passed.

    A cancelled or failed job returns to the driver at once while its tasks are still running on
    the executors: a task that is not interrupted stops only at its next check, and on its way out it
    may still write or delete files. Cleanup that deletes what a failed write wrote must come after
    them, or it races them (and a file created after the cleanup is left behind). Without a job group
    there is nothing to tell this thread's jobs by: returns at once (USE's writes and merge tasks
    always run in one, see `job_group`). Spark has no event for it, so
    the status tracker is polled."""
    import time

    sc = spark.sparkContext
    group = sc.getLocalProperty("spark.jobGroup.id")
    if not group:
        return True
    tracker = sc.statusTracker()
    deadline = time.monotonic() + timeout_s
    while True:
        active = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = tracker.getStageInfo(stage_id)
                active += stage.numActiveTasks if stage is not None else 0
        if active == 0:
            return True
        if time.monotonic() >= deadline:
            log.warning("%d task(s) of job group %s still running after %.0f s", active, group, timeout_s)
            return False
        time.sleep(0.02)


#: The thread-local properties a job group sets (`SparkContext.setJobGroup`), restored by `job_group`.
JOB_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


@contextlib.contextmanager
def job_group(spark: SparkSession, group: str, description: str, *, keep_existing: bool = False) -> Iterator[str]:
    """Run the block's Spark jobs of this thread in job group `group` (yielded), then restore the
    thread's previous group and description. With `keep_existing`, a group the caller already set
    (a Thrift server's statement, a service run) is kept and yielded instead.

    A job group is what tells this thread's jobs apart: a stop cancels it, and the cleanup of a failed
    write waits for its tasks (`await_job_group_tasks`) before deleting what they wrote."""
    sc = spark.sparkContext
    current = sc.getLocalProperty("spark.jobGroup.id")
    if keep_existing and current:
        yield current
        return
    previous = {key: sc.getLocalProperty(key) for key in JOB_PROPERTIES}
    sc.setJobGroup(group, description)
    try:
        yield group
    finally:
        for key, value in previous.items():
            sc.setLocalProperty(key, value)  # type: ignore[arg-type]


@contextlib.contextmanager
def session_conf(spark: SparkSession, changes: Mapping[str, str]) -> Iterator[None]:
    """Session settings changed for the duration of a block, then restored (unset again when they
    were unset). For settings that tune how USE runs its own Spark work; a query another thread
    starts meanwhile sees them too, so they must never change results."""
    previous = {key: spark.conf.get(key, None) for key in changes}
    for key, value in changes.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


#: PySpark's loggers that print a query error (with its whole Java stack, as JSON) when the error is
#: created, whether or not the caller handles it (pyspark.errors.exceptions.base._log_exception).
QUERY_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


@contextlib.contextmanager
def quiet_query_errors() -> Iterator[None]:
    """Silence PySpark's query-error loggers while USE checks user input through Spark (a filter
    string analyzed against a table): a bad input then gives only USE's own one-line typed error,
    not also an ERROR log with a Java stack. Other errors and other loggers are untouched."""
    from pyspark.logger import PySparkLogger

    # PySpark's own logger class: a plain logging.Logger made under one of these names first would
    # make PySpark's later error logging (with its `errorClass=` keyword) raise TypeError in place of
    # the query's error, for every query error of the process.
    loggers = [PySparkLogger.getLogger(name) for name in QUERY_ERROR_LOGGERS]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before, strict=False):
            lg.disabled = was
