"""`format("qbeast")` in a session without USE's SQL extension: a PySpark Python Data Source.

Sessions made by `use.session.spark_session` (the shim loaded) never use it: there `format("qbeast")`
is the shim's provider, which plans each query's files (pruning, exact Qbeast samples) and writes
through the OTree write. This source is the fallback a plain PySpark session gets from
`QbeastTable.for_path`: reads list every file of the latest snapshot (each read with pyarrow in a
worker task; no filter is pushed, see `QbeastReader`).

`df.write.format("qbeast")` here cannot run the OTree's two-pass indexing (a data source writer sees
one partition at a time), so its rows land honestly as *staging* files: plain Delta data files
without Qbeast tags (revision 0), one per task, committed by the driver in one transaction. An
optimization of revision 0, or the next `QbeastTable.write`, indexes them. The rules are
`QbeastTable.write`'s:

* a new table needs the `columnsToIndex` option (and takes `cubeSize`, default 5,000,000); it is
  created with only the staging revision;
* appending to a table with `columnsToIndex` different from its indexed columns is refused (leave
  the option out, or give the same columns); the data must have the table's schema;
* `mode("overwrite")` replaces the table's data, schema and revisions with the new rows as staging
  files (the index columns from `columnsToIndex`, else the table's); one commit, which fails rather
  than drop rows a concurrent writer appended;
* only Qbeast tables are written (a plain Delta table is refused: convert it first);
* Spark's default save mode (`errorifexists`) and `ignore` are refused by Spark itself before this
  source runs (Python data sources support only append and overwrite): say `.mode("append")` or
  `.mode("overwrite")`.

Errors raised while Spark sets up the write reach the caller inside Spark's
`PYTHON_DATA_SOURCE_ERROR` AnalysisException, whose message ends with USE's one-line error.

Register it on a session with `register(spark)`; the workers must be able to import `use` (the
package installed in the interpreter `PYSPARK_PYTHON` names).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema

from use.delta import DeltaLog
from use.delta.actions import remove_actions
from use.delta.datafile import write_data_file
from use.delta.deletion_vectors import deleted_rows
from use.delta.schema import schema_to_json
from use.delta.snapshot import check_write_support
from use.delta.storage import absolute_path
from use.delta.transaction import Transaction
from use.errors import (
    ConcurrentModificationError,
    IndexColumnError,
    InvalidArgumentError,
    NotAQbeastTableError,
    SchemaMismatchError,
    TableAlreadyExistsError,
)
from use.qbeast.convert import DEFAULT_CUBE_SIZE, index_column_names
from use.qbeast.reader import load_snapshot, spark_schema
from use.qbeast.revision import configuration_with_revision, cube_size_option, staging_revision
from use.qbeast.snapshot import QbeastSnapshot
from use.runtime.shim import shim_loaded

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

NAME = "qbeast"
# Files per read task: small files are grouped so a table of many tiny files is not thousands of tasks.
TARGET_TASK_BYTES = 128 * 1024 * 1024


# The shim's provider behind `USING qbeast` and `format("qbeast")` in sessions with the extension.
_JVM_PROVIDER = "qbeast.DefaultSource"


def register(spark: SparkSession) -> None:
    """Make `format("qbeast")` available on this session (idempotent). In a session with USE's JVM
    shim the name belongs to the shim's provider, so there is nothing to register here."""
    if shim_loaded(spark, _JVM_PROVIDER):
        return
    spark.dataSource.register(QbeastDataSource)


def _path_option(options: Any) -> str:
    path = options.get("path")
    if not path:
        raise InvalidArgumentError('format("qbeast") needs a table path: .load(path) / .save(path) or .option("path", ...)')
    return os.path.abspath(str(path))


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A file's rows in the table schema (columns missing from an older file read as nulls)."""
    cols = []
    for field in schema:
        if field.name in table.column_names:
            cols.append(table.column(field.name).cast(field.type))
        else:
            cols.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(cols, schema=schema)


class QbeastReader(DataSourceReader):
    """Every file of the table's latest snapshot. No filter is pushed: Spark 4.1 keeps the read
    plan a pushdown made on the data source object a DataFrame shares between its queries, so
    files pruned for one query's filters would be all a later query of the same DataFrame read
    (rows silently missing). Sessions with USE's SQL extension read `format("qbeast")` through
    the shim instead, which plans pruning and samples per query."""

    def __init__(self, path: str, schema: StructType) -> None:
        self.path = path
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        qsnap = load_snapshot(self.path)
        files = qsnap.files
        paths = [absolute_path(qsnap.table_root, p) for p in files.column("path").to_pylist()]
        sizes = files.column("size").to_pylist()
        # rows deletion vectors delete, per file: decoded (and checked) once here, dropped by the tasks
        deleted = deleted_rows(qsnap.table_root, files, qsnap.table_root)
        gone = {absolute_path(qsnap.table_root, p): rows for p, rows in zip(deleted.paths, deleted.rows, strict=True)}
        groups: list[list[str]] = []
        acc = 0
        for p, size in zip(paths, sizes, strict=False):
            if not groups or acc + int(size) > TARGET_TASK_BYTES:
                groups.append([])
                acc = 0
            groups[-1].append(p)
            acc += int(size)
        # Under column mapping the files hold physical names: the mapping travels with each partition.
        mapping = qsnap.column_mapping if qsnap.column_mapping is not None and qsnap.column_mapping.active else None
        return [InputPartition((g, mapping, {p: gone[p] for p in g if p in gone})) for g in groups] or [
            InputPartition(([], None, {}))
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        schema = to_arrow_schema(self.schema, prefers_large_types=False) if hasattr(self.schema, "fields") else self.schema
        paths, mapping, gone = partition.value
        for path in paths:
            data = pq.read_table(path)
            if path in gone:
                keep = np.ones(data.num_rows, dtype=bool)
                keep[gone[path][gone[path] < data.num_rows].astype(np.int64)] = False
                data = data.filter(pa.array(keep))
            if mapping is not None:
                data = mapping.to_logical(data)
            yield from _conform(data, schema).to_batches()


@dataclass(frozen=True)
class StagedFiles(WriterCommitMessage):
    """What one write task produced: the `AddFile`s of its (untagged, staging) data files."""

    adds: tuple[Any, ...]


@dataclass(frozen=True)
class WritePlan:
    """What the driver decided before any row is written (sent to the tasks and the commit).

    `columns`/`cube_size` are set when the commit must (re)declare the staging revision: a new table
    or an overwrite. `read_version` is the snapshot the decision was made on (None: a new table);
    an overwrite commits against it, so a concurrent change fails the write instead of being lost.
    """

    path: str
    arrow_schema: pa.Schema
    overwrite: bool
    columns: tuple[str, ...] | None
    cube_size: int | None
    read_version: int | None


class QbeastStagingWriter(DataSourceArrowWriter):
    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan
        self.path = plan.path
        self.arrow_schema = plan.arrow_schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFiles:
        os.makedirs(self.path, exist_ok=True)
        batches = [b for b in iterator if b.num_rows]
        if not batches:
            return StagedFiles(())
        return StagedFiles((write_data_file(self.path, batches, schema=self.arrow_schema),))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        adds = [a for m in messages if isinstance(m, StagedFiles) for a in m.adds]
        log = DeltaLog.for_path(self.path)
        plan = self.plan
        try:
            if plan.read_version is None:
                _create_and_append(log, plan, adds)
            elif plan.overwrite:
                _overwrite(log, plan, adds)
            elif adds:
                txn = log.start_transaction()
                txn.add(*adds)
                txn.commit("WRITE", {"mode": "Append", "partitionBy": "[]"}, {"numFiles": str(len(adds))})
        except BaseException:
            self.abort(messages)
            raise

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        for m in messages:
            if isinstance(m, StagedFiles):
                for a in m.adds:
                    try:
                        os.unlink(absolute_path(self.path, a.path))
                    except OSError:
                        pass


def _staging_configuration(plan: WritePlan, base: dict[str, str]) -> dict[str, str]:
    """`base` with every revision replaced by a staging revision on the plan's columns."""
    assert plan.columns is not None and plan.cube_size is not None
    revision = staging_revision(plan.path, list(plan.columns), plan.cube_size, int(time.time() * 1000))
    return configuration_with_revision(base, revision, overwrite=True)


def _create_and_append(log: Any, plan: WritePlan, adds: list[Any]) -> None:
    """A new table holding only the staging revision, and the rows, in one commit (version 0)."""
    try:
        txn = log.create_transaction(plan.arrow_schema, configuration=_staging_configuration(plan, {}))
        txn.add(*adds)
        txn.commit("WRITE", {"mode": "Append", "partitionBy": "[]"}, {"numFiles": str(len(adds))})
    except (TableAlreadyExistsError, ConcurrentModificationError):
        # Created concurrently (another writer's first commit won): append to it, as Spark would.
        if not adds:
            return
        txn = log.start_transaction()
        txn.add(*adds)
        txn.commit("WRITE", {"mode": "Append", "partitionBy": "[]"}, {"numFiles": str(len(adds))})


def _overwrite(log: Any, plan: WritePlan, adds: list[Any]) -> None:
    """Replace data, schema and revisions in one commit planned on the snapshot the driver read."""
    snap = log.snapshot(version=plan.read_version)
    conf = _staging_configuration(plan, dict(snap.metadata.configuration))
    metadata = replace(snap.metadata, configuration=conf, schema_string=schema_to_json(plan.arrow_schema))
    txn = Transaction(log, snap)
    txn.add(metadata)
    txn.read_whole_table()
    txn.add(*remove_actions(snap.files, data_change=True), *adds)
    txn.commit(
        "WRITE",
        {"mode": "Overwrite", "partitionBy": "[]"},
        {"numFiles": str(len(adds)), "numRemovedFiles": str(snap.files.num_rows)},
    )


def plan_write(options: Any, schema: pa.Schema, overwrite: bool) -> WritePlan:
    """Decide a `format("qbeast")` write on the driver, by `QbeastTable.write`'s rules (module
    docstring); every refusal is a typed error raised before any row is written."""
    path = _path_option(options)
    columns_opt = options.get("columnsToIndex")
    cube_opt = options.get("cubeSize")
    log = DeltaLog.for_path(path)
    if not log.exists():
        if not columns_opt:
            raise IndexColumnError(
                f'format("qbeast") creates the table at {path!r} and needs its index columns: add '
                '.option("columnsToIndex", "x,y") (and optionally .option("cubeSize", "5000000"))'
            )
        new_columns = tuple(index_column_names(columns_opt, schema, f"the data written to {path!r}"))
        return WritePlan(path, schema, overwrite, new_columns, cube_size_option(cube_opt, DEFAULT_CUBE_SIZE), None)
    snap = log.snapshot()
    check_write_support(snap.protocol, snap.metadata, path)  # before any task writes a file
    qsnap = QbeastSnapshot.from_delta(snap)
    if not qsnap.is_qbeast:
        raise NotAQbeastTableError(
            f"{path!r} is a Delta table without Qbeast metadata; convert it with QbeastTable.convert(spark, path, "
            'columns_to_index) first, or write it with format("delta")'
        )
    latest = qsnap.revisions[qsnap.latest_revision_id]
    table_columns = tuple(latest.columns)
    names = tuple(index_column_names(columns_opt, schema, f"the data written to {path!r}")) if columns_opt else None
    if overwrite:
        columns = names or table_columns
        if not names:
            index_column_names(list(columns), schema, f"the data written to {path!r}")
        cube_size = cube_size_option(cube_opt, int(latest.desired_cube_size))
        return WritePlan(path, schema, True, columns, cube_size, snap.version)
    if names is not None and names != table_columns:
        raise IndexColumnError(
            f"columnsToIndex {','.join(names)} differs from the indexed columns {','.join(table_columns)} of "
            f"{path!r}; leave the option out (or give the same columns) to append, or write with "
            '.mode("overwrite") to index other columns'
        )
    if cube_opt not in (None, "") and cube_size_option(cube_opt, 1) != int(latest.desired_cube_size):
        raise InvalidArgumentError(
            f"cubeSize {cube_opt} differs from the table's desired cube size {latest.desired_cube_size} at {path!r}; "
            "an append keeps the table's cube size (QbeastTable.write with another cube_size starts a new revision)"
        )
    table_schema = snap.schema
    if [(f.name, f.type) for f in table_schema] != [(f.name, f.type) for f in schema]:
        raise SchemaMismatchError(
            f"the data's schema {schema} does not match the table at {path!r} ({table_schema}); select and cast "
            "the columns to the table's schema first"
        )
    return WritePlan(path, table_schema, False, None, None, snap.version)


class QbeastDataSource(DataSource):
    """`format("qbeast")`: pruning reads and staging (revision 0) appends."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return spark_schema(load_snapshot(_path_option(self.options)))

    def reader(self, schema: StructType) -> QbeastReader:
        return QbeastReader(_path_option(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> QbeastStagingWriter:
        arrow_schema = to_arrow_schema(schema, prefers_large_types=False)
        arrow_schema = pa.schema([pa.field(f.name, f.type, True) for f in arrow_schema])
        return QbeastStagingWriter(plan_write(self.options, arrow_schema, overwrite))
