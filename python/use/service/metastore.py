"""The table source of `use serve`: every Delta/Qbeast table of the Spark session catalog, plus the
Delta tables found under the warehouse directory.

Why both: the metastore is how SQL users name their tables (`spark_catalog.db.t`), but a table
written by path into the warehouse (the Python API, delta-rs, another Spark) has no registration and
must be served too. A location listed by both keeps its metastore name.

Cheap by design: one listing of the metastore per refresh (namespaces, then every table of each
namespace in one `getTablesByName` call on the external catalog), no query per table; properties come
from each table's Delta log through `read_table` (cached `DeltaLog`s), never from the metastore,
whose copy of the properties is not the truth for Delta tables. It runs on the service thread: Spark
catalog calls from a background thread are fine.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from use.delta.listing import LOG_DIR_NAME
from use.delta.storage import resolve_table_root
from use.service.registry import TableInfo, TableSource
from use.service.sources import read_table

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["CombinedSource", "MetastoreSource", "SERVED_PROVIDERS"]

_log = logging.getLogger("use.service.metastore")

#: Providers whose tables the service serves (others only when their location holds a Delta log).
SERVED_PROVIDERS = frozenset({"delta", "qbeast"})
CATALOG = "spark_catalog"


def _seq(jvm: Any, scala_seq: Any) -> list[Any]:
    """A Scala Seq from py4j as a Python list."""
    return list(jvm.scala.jdk.javaapi.CollectionConverters.asJava(scala_seq))


def _option(opt: Any) -> Any:
    return opt.get() if opt.isDefined() else None


class MetastoreSource:
    """Delta and Qbeast tables of the session catalog (see the module docstring)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def locations(self) -> list[tuple[str, str]]:
        """(location, `spark_catalog.db.t`) of every served table now; raises if the listing fails."""
        jvm = self.spark.sparkContext._jvm  # type: ignore[attr-defined]
        external = self.spark._jsparkSession.sharedState().externalCatalog()  # type: ignore[attr-defined]
        out: list[tuple[str, str]] = []
        for db in _seq(jvm, external.listDatabases()):
            names = external.listTables(db)
            if names.isEmpty():
                continue
            for table in _seq(jvm, external.getTablesByName(db, names)):
                uri = _option(table.storage().locationUri())
                if uri is None:
                    continue  # a view: no location
                provider = (_option(table.provider()) or "").lower()
                location = resolve_table_root(str(uri.toString()))
                if provider in SERVED_PROVIDERS or os.path.isdir(os.path.join(location, LOG_DIR_NAME)):
                    out.append((location, f"{CATALOG}.{db}.{table.identifier().table()}"))
        return out

    def list_tables(self) -> Iterable[TableInfo]:
        out = []
        for location, name in self.locations():
            info = read_table(location, name)
            if info is not None:
                out.append(info)
        return out


class CombinedSource:
    """Several sources as one: a location listed twice keeps the first source's entry (its name)."""

    def __init__(self, *sources: TableSource) -> None:
        self.sources = sources

    def list_tables(self) -> Iterable[TableInfo]:
        seen: dict[str, TableInfo] = {}
        for source in self.sources:
            for info in source.list_tables():
                seen.setdefault(info.location, info)
        return list(seen.values())
