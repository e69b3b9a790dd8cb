"""What "the same table" means between USE and delta-spark: the same rows and the same snapshot.

A snapshot is compared as Delta defines a table version: its version number, its live files (path,
size, partition values, deletion vector), its protocol (versions and features) and its metadata
(id, schema, partition columns, configuration). USE's side comes from its own log (`use.delta`), in
this process; delta-spark's from `DeltaLog.update()` in the engine's process (worker.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from oracles.engine import EngineProcess

# Run in delta-spark's process: its snapshot of a path, as JSON (Action.json() is Delta's own form).
_DELTA_SPARK_SNAPSHOT = """
import json
from pyspark.sql import DataFrame
log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, args["path"])
none = jvm.scala.Option.empty()
snap = log.update(False, none, none) if args.get("version") is None else log.getSnapshotAt(args["version"], none, none, False)
files = DataFrame(snap.allFiles().toDF(), spark).selectExpr("path", "size", "partitionValues", "deletionVector IS NOT NULL AS dv")
result = {
    "version": snap.version(),
    "protocol": json.loads(snap.protocol().json())["protocol"],
    "metadata": json.loads(snap.metadata().json())["metaData"],
    "files": sorted([r.path, r.size, dict(r.partitionValues or {}), r.dv] for r in files.collect()),
}
"""


def delta_spark_snapshot(engine: EngineProcess, path: str, version: int | None = None) -> dict[str, Any]:
    raw = engine.py(_DELTA_SPARK_SNAPSHOT, path=path, version=version)
    meta, proto = raw["metadata"], raw["protocol"]
    return {
        "version": raw["version"],
        "protocol": _protocol(
            proto["minReaderVersion"], proto["minWriterVersion"], proto.get("readerFeatures"), proto.get("writerFeatures")
        ),
        "metadata": {
            "id": meta["id"],
            "schema": json.loads(meta["schemaString"]),
            "partition_columns": list(meta["partitionColumns"]),
            "configuration": dict(meta.get("configuration") or {}),
        },
        "files": [tuple(f[:2]) + (dict(sorted(f[2].items())), f[3]) for f in raw["files"]],
    }


def use_snapshot(path: str, version: int | None = None) -> dict[str, Any]:
    from use.delta import DeltaLog

    snap = DeltaLog.for_path(path).snapshot(version=version)
    p, m = snap.protocol, snap.metadata
    files = snap.files
    dv = files.column("deletion_vector").to_pylist() if "deletion_vector" in files.column_names else [None] * files.num_rows
    rows = zip(files.column("path").to_pylist(), files.column("size").to_pylist(), _partition_values(files), dv, strict=True)
    return {
        "version": snap.version,
        "protocol": _protocol(p.min_reader_version, p.min_writer_version, p.reader_features, p.writer_features),
        "metadata": {
            "id": m.id,
            "schema": json.loads(m.schema_string),
            "partition_columns": list(m.partition_columns),
            "configuration": dict(m.configuration),
        },
        "files": sorted((path_, size, dict(sorted(pv.items())), d is not None) for path_, size, pv, d in rows),
    }


def _partition_values(files: pa.Table) -> list[dict[str, str | None]]:
    if "partition_values" not in files.column_names:
        return [{} for _ in range(files.num_rows)]
    return [dict(v) if v else {} for v in files.column("partition_values").to_pylist()]


def _protocol(
    reader: int, writer: int, reader_features: Iterable[str] | None, writer_features: Iterable[str] | None
) -> dict[str, Any]:
    return {
        "min_reader_version": reader,
        "min_writer_version": writer,
        "reader_features": sorted(reader_features) if reader_features is not None else None,
        "writer_features": sorted(writer_features) if writer_features is not None else None,
    }


def canonical_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows as sorted tuples (NaN made comparable, nested values as their repr)."""

    def cell(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, (dict, list)):
            return repr(v)
        return v

    return sorted((tuple(cell(v) for v in row.values()) for row in table.to_pylist()), key=repr)


def delta_spark_rows(engine: EngineProcess, path: str, version: int | None = None, columns: str = "*") -> list[tuple[Any, ...]]:
    travel = f" VERSION AS OF {version}" if version is not None else ""
    return canonical_rows(engine.sql(f"SELECT {columns} FROM delta.`{path}`{travel}"))


def use_rows(spark: Any, path: str, version: int | None = None, columns: str = "*") -> list[tuple[Any, ...]]:
    travel = f" VERSION AS OF {version}" if version is not None else ""
    return canonical_rows(spark.sql(f"SELECT {columns} FROM delta.`{path}`{travel}").toArrow())


def history(engine: EngineProcess, path: str) -> list[dict[str, Any]]:
    """delta-spark's DESCRIBE HISTORY, oldest first: version, timestamp, operation, parameters."""
    t = engine.py(
        "result = spark.sql(f\"DESCRIBE HISTORY delta.`{args['path']}`\")"
        ".select('version', 'timestamp', 'operation', 'operationParameters', 'isBlindAppend')",
        path=path,
    )
    return sorted(t.to_pylist(), key=lambda r: r["version"])
