"""The files each scan of a SQL query reads: one call per query from the shim's optimizer rule.

Each scan names its table, version (None: the latest now), Qbeast sample fraction and filters (a
Catalyst expression). The filters are translated with `use.qbeast.reader.expression_to_predicate`
and the files selected with `use.qbeast.reader.plan_read` (partition pruning and Delta stats
skipping for every table, cube-space and sample weight-range pruning for Qbeast tables): the same
planning `QbeastTable.read` does. Scans of one table in one query read one snapshot, so a query
never mixes versions; a file removed by a later commit stays readable until VACUUM removes it
after the retention period, so a planned query always finds its files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from use.delta.deletion_vectors import deleted_rows
from use.delta.log_cache import shared_log
from use.delta.vacuum import check_version_files
from use.errors import UnsupportedFeatureError
from use.qbeast.reader import expression_to_predicate, plan_read
from use.qbeast.snapshot import QbeastSnapshot
from use.sql.protocol import SCAN_FILES_SCHEMA, PlanScansReply, PlanScansRequest, SampleFilter, ScanPlan, arrow_stream
from use.sql.tables import snapshot_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def file_uris(root_uri: str, paths: list[str]) -> list[str]:
    """Log paths (URL-encoded, relative to the root, or absolute URIs) as file URIs."""
    prefix = root_uri.rstrip("/") + "/"
    return [p if ":" in p.split("/", 1)[0] else prefix + p for p in paths]


def scan_plan(
    root: str,
    files: pa.Table,
    keys: Sequence[str],
    version: int,
    total_files: int,
    total_bytes: int,
    sample: SampleFilter | None = None,
) -> ScanPlan:
    """The files one scan reads (rows of a snapshot's `files`) as the shim reads them: an Arrow
    stream of URIs, sizes, times and partition values by `keys` (physical names under Delta column
    mapping; "" is null, as in Delta), the rows each file's deletion vector deletes
    (`deleted_rows_column`), the snapshot's totals and a Qbeast sample's row filter."""
    partition_values: list[list[str | None]] = [[] for _ in range(files.num_rows)]
    if keys and files.num_rows:
        partition_values = [
            [values.get(k) or None for k in keys]
            for values in (dict(found or ()) for found in files.column("partition_values").to_pylist())
        ]
    rows = pa.table(
        [
            pa.array(file_uris(Path(root).as_uri(), files.column("path").to_pylist()), pa.string()),
            files.column("size").cast(pa.int64()),
            files.column("modification_time").cast(pa.int64()),
            pa.array(partition_values, pa.list_(pa.string())),
            deleted_rows_column(root, files),
        ],
        schema=SCAN_FILES_SCHEMA,
    )
    return ScanPlan(version, arrow_stream(rows), total_files, total_bytes, sample)


def deleted_rows_column(root: str, files: pa.Table) -> pa.Array:
    """Per file, the rows its deletion vector deletes as a portable 32-bit roaring bitmap, which the
    shim's parquet reader drops (`DeletedRows` in the shim); null for a file without one. The vectors
    are read and checked here, once per query: a damaged one fails the query with
    CorruptDeletionVectorError before any row is read."""
    out: list[bytes | None] = [None] * files.num_rows
    deleted = deleted_rows(root, files, root)
    if len(deleted):
        position = {p: i for i, p in enumerate(files.column("path").to_pylist())}
        for path, rows in zip(deleted.paths, deleted.rows, strict=True):
            if len(rows) and int(rows[-1]) >= 1 << 32:
                raise UnsupportedFeatureError(
                    f"the deletion vector of {path} in table {root} deletes row {int(rows[-1])}: SQL scans read files of up "
                    "to 2^32 rows; read the table with the Python API (DeltaTable.read)",
                    feature="deletionVectors",
                )
            out[position[path]] = BitMap(rows.astype(np.uint32)).serialize()
    return pa.array(out, pa.binary())


def _scan(qsnap: QbeastSnapshot, sample: float | None, predicate: Any, *, pinned: bool = False) -> ScanPlan:
    """One scan's files; of a `pinned` version (time travel), checked to be still on storage."""
    plan = plan_read(None, qsnap, sample=sample, predicate=predicate)
    if pinned:
        check_version_files(shared_log(qsnap.table_root), qsnap.version, plan.files.column("path").to_pylist())
    weight = None
    if plan.weight_range is not None:
        weight = SampleFilter(tuple(plan.indexed_columns), int(plan.weight_range[1]))
    return scan_plan(
        qsnap.table_root, plan.files, qsnap.partition_value_keys, qsnap.version, plan.total_files, plan.total_bytes, weight
    )


def plan_scans(spark: SparkSession, req: PlanScansRequest, filters: list[Any]) -> PlanScansReply:
    """One plan per requested scan, in order (`filters`: each scan's Catalyst filter, or None)."""
    snapshots: dict[tuple[str, int | None], QbeastSnapshot] = {}
    out = []
    for scan, condition in zip(req.scans, filters, strict=False):
        key = (scan.table.root, scan.version)
        qsnap = snapshots.get(key)
        if qsnap is None:
            qsnap = snapshots[key] = QbeastSnapshot.from_delta(snapshot_of(key[0], key[1]))
        predicate = expression_to_predicate(condition) if condition is not None else None
        # an older version's files may be gone (VACUUM); the latest's are kept (a DELETE, UPDATE or
        # MERGE pins the latest: no stat per file for those)
        pinned = key[1] is not None and key[1] < shared_log(key[0]).snapshot().version
        out.append(_scan(qsnap, scan.sample, predicate, pinned=pinned))
    return PlanScansReply(tuple(out))
