"""Session settings as USE's Spark work reads them: integers Spark would accept, settings changed for a
block, the parquet codec data files are written with, and the Delta table defaults a session sets."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from use.delta.datafile import parquet_compression
from use.delta.snapshot import PROPERTY_DEFAULTS_PREFIX, property_defaults

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PARQUET_CODEC_CONF = "spark.sql.parquet.compression.codec"


def session_table_defaults(spark: SparkSession) -> dict[str, str]:
    """The properties tables a statement of this session creates take where their own do not set
    them: Delta's `spark.databricks.delta.properties.defaults.*` (checked here, before anything is
    written), a statement's `CommitOptions.table_defaults`."""
    settings = {k: v for k, v in spark.conf.getAll.items() if k.startswith(PROPERTY_DEFAULTS_PREFIX)}
    return property_defaults(settings)


def parquet_codec(spark: SparkSession) -> str:
    """The parquet codec USE's data files are written with: the session's
    `spark.sql.parquet.compression.codec` (snappy by default), as Spark's and Delta's own writers
    take it, checked on the driver (`use.delta.datafile.parquet_compression`) before any file is
    written, and passed to the write tasks by its Spark name."""
    codec = spark.conf.get(PARQUET_CODEC_CONF, "snappy") or "snappy"
    parquet_compression(codec, f"the Spark conf {PARQUET_CODEC_CONF}")
    return codec.strip().lower()


def int_conf(spark: SparkSession, key: str, default: int) -> int:
    """An integer Spark setting as Spark would read it, `default` when unset or not a number: for
    settings USE only tunes around (a bad value there is Spark's to report, not ours)."""
    raw = spark.conf.get(key, None)
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


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
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
