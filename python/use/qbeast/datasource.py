"""`format("qbeast")`: a PySpark Python Data Source over Qbeast tables.

`spark.read.format("qbeast").load(path)` plans on the driver's Python planner process exactly like
`use.qbeast.reader`: the filters Spark pushes down are translated into the typed predicate language
and the same `select_files` prunes the file list (Delta stats + cube space); each surviving file is
then read with pyarrow in a worker task. Every pushed filter is also handed back to Spark, so rows
are always re-checked and the result equals an unpruned read.

`df.write.format("qbeast").mode("append").save(path)` cannot run the OTree's two-pass indexing (a
data source writer sees one partition at a time), so its rows land honestly as *staging* files:
plain Delta data files without Qbeast tags (revision 0), one per task, committed by the driver in
one transaction. An optimization of revision 0, or the next `QbeastTable.write`, indexes them. A
missing table is created, with the staging revision when the `columnsToIndex` option is given
(and `cubeSize`, default 5,000,000).

Register it on a session with `register(spark)`; the workers must be able to import `use` (the
package installed in the interpreter `PYSPARK_PYTHON` names).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    WriterCommitMessage,
)

from use.delta import predicates as P
from use.errors import InvalidArgumentError, SchemaMismatchError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

NAME = "qbeast"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
# Files per read task: small files are grouped so a table of many tiny files is not thousands of tasks.
TARGET_TASK_BYTES = 128 * 1024 * 1024

_OPS: dict[type, str] = {
    EqualTo: "=",
    EqualNullSafe: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}


# The shim's provider behind `USING qbeast`; Spark then resolves `format("qbeast")` to it, and it
# hands paths to this source registered under another name (`use.sql.install`).
_JVM_PROVIDER = "qbeast.DefaultSource"


def register(spark: "SparkSession") -> None:
    """Make `format("qbeast")` available on this session (idempotent). In a session with USE's JVM
    shim the name belongs to the shim's provider, which serves paths with this source (registered
    by `use.sql.install`), so there is nothing to register here."""
    from use.shim import shim_loaded

    spark.conf.set(PUSHDOWN_CONF, "true")
    if shim_loaded(spark, _JVM_PROVIDER):
        return
    spark.dataSource.register(QbeastDataSource)


def _path_option(options: Any) -> str:
    path = options.get("path")
    if not path:
        raise InvalidArgumentError('format("qbeast") needs a table path: .load(path) / .save(path) or .option("path", ...)')
    return os.path.abspath(str(path))


def filter_to_predicate(f: Filter) -> P.Predicate:
    """A pushed-down data source filter as a typed predicate (unknown shapes prune nothing)."""
    attr = getattr(f, "attribute", None)
    if attr is not None and len(attr) != 1:
        return P.Unknown(repr(f))  # nested fields: stats are not kept for them here
    col = attr[0] if attr is not None else ""
    if type(f) in _OPS:
        value = f.value  # type: ignore[attr-defined]
        if value is None:
            return P.IsNull(col) if isinstance(f, EqualNullSafe) else P.Unknown(repr(f))
        if isinstance(value, (list, tuple, dict)):
            return P.Unknown(repr(f))
        return P.Comparison(col, _OPS[type(f)], value)  # type: ignore[arg-type]
    if isinstance(f, In):
        values = tuple(v for v in f.value if v is not None)
        if any(isinstance(v, (list, tuple, dict)) for v in values):
            return P.Unknown(repr(f))
        return P.InList(col, values)
    if isinstance(f, IsNull):
        return P.IsNull(col)
    if isinstance(f, IsNotNull):
        return P.IsNotNull(col)
    if isinstance(f, Not):
        return P.Not(filter_to_predicate(f.child))
    return P.Unknown(repr(f))


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
    def __init__(self, path: str, schema: "StructType") -> None:
        self.path = path
        self.schema = schema
        self.predicates: list[P.Predicate] = []

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            self.predicates.append(filter_to_predicate(f))
            yield f  # Spark re-checks every row: pruning is file-level only

    def _predicate(self) -> P.Predicate | None:
        preds = [p for p in self.predicates if not isinstance(p, P.Unknown)]
        if not preds:
            return None
        out = preds[0]
        for p in preds[1:]:
            out = P.And(out, p)
        return out

    def partitions(self) -> Sequence[InputPartition]:
        from use.delta.storage import absolute_path
        from use.qbeast.reader import load_snapshot
        from use.qbeast.query import select_files

        qsnap = load_snapshot(self.path)
        files = qsnap.files.filter(select_files(qsnap, self._predicate(), None))
        paths = [absolute_path(qsnap.table_root, p) for p in files.column("path").to_pylist()]
        sizes = files.column("size").to_pylist()
        groups: list[list[str]] = []
        acc = 0
        for p, size in zip(paths, sizes):
            if not groups or acc + int(size) > TARGET_TASK_BYTES:
                groups.append([])
                acc = 0
            groups[-1].append(p)
            acc += int(size)
        return [InputPartition(g) for g in groups] or [InputPartition([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(self.schema, prefers_large_types=False) if hasattr(self.schema, "fields") else self.schema
        for path in partition.value:
            table = _conform(pq.read_table(path), schema)
            yield from table.to_batches()


@dataclass(frozen=True)
class StagedFiles(WriterCommitMessage):
    """What one write task produced: the `AddFile`s of its (untagged, staging) data files."""

    adds: tuple[Any, ...]


class QbeastStagingWriter(DataSourceArrowWriter):
    def __init__(self, path: str, arrow_schema: pa.Schema, options: dict[str, str]) -> None:
        self.path = path
        self.arrow_schema = arrow_schema
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFiles:
        from use.delta.datafile import write_data_file

        os.makedirs(self.path, exist_ok=True)
        batches = [b for b in iterator if b.num_rows]
        if not batches:
            return StagedFiles(())
        return StagedFiles((write_data_file(self.path, batches, schema=self.arrow_schema),))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        from use.delta import DeltaLog

        adds = [a for m in messages if isinstance(m, StagedFiles) for a in m.adds]
        log = DeltaLog.for_path(self.path)
        if not log.exists():
            _create_table(log, self.path, self.arrow_schema, self.options)
        if not adds:
            return
        txn = log.start_transaction()
        txn.add(*adds)
        txn.commit("WRITE", {"mode": "Append", "partitionBy": "[]"}, {"numFiles": len(adds)})

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        from use.delta.storage import absolute_path

        for m in messages:
            if isinstance(m, StagedFiles):
                for a in m.adds:
                    try:
                        os.unlink(absolute_path(self.path, a.path))
                    except OSError:
                        pass


def _create_table(log: Any, path: str, schema: pa.Schema, options: dict[str, str]) -> None:
    """A new table; with `columnsToIndex`, a Qbeast one holding only the staging revision.
    `options` has lower-case keys."""
    from use.errors import TableAlreadyExistsError

    configuration: dict[str, str] = {}
    columns = options.get("columnstoindex")
    if columns:
        import time

        from use.qbeast.convert import DEFAULT_CUBE_SIZE, index_column_names
        from use.qbeast.revision import configuration_with_revision, staging_revision

        names = index_column_names(columns, schema, f"the data written to {path!r}")
        cube_size = _cube_size_option(options.get("cubesize"), DEFAULT_CUBE_SIZE)
        revision = staging_revision(path, names, cube_size, int(time.time() * 1000))
        configuration = configuration_with_revision({}, revision)
    try:
        log.create(schema, configuration=configuration)
    except TableAlreadyExistsError:
        pass  # created concurrently: append to it


def _cube_size_option(value: Any, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        n = int(str(value))
    except ValueError:
        n = 0
    if n < 1:
        raise InvalidArgumentError(f'option cubeSize must be a positive integer (rows per cube), got {value!r}')
    return n


class QbeastDataSource(DataSource):
    """`format("qbeast")`: pruning reads and staging (revision 0) appends."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> "StructType":
        from use.qbeast.reader import load_snapshot, spark_schema

        return spark_schema(load_snapshot(_path_option(self.options)))

    def reader(self, schema: "StructType") -> QbeastReader:
        return QbeastReader(_path_option(self.options), schema)

    def writer(self, schema: "StructType", overwrite: bool) -> QbeastStagingWriter:
        from pyspark.sql.pandas.types import to_arrow_schema

        from use.delta import DeltaLog

        path = _path_option(self.options)
        if overwrite:
            raise InvalidArgumentError(
                f'format("qbeast") only appends (its rows land in the staging revision); to replace the table at '
                f"{path!r} use QbeastTable.write(df, path, columns_to_index, mode='overwrite')"
            )
        arrow_schema = to_arrow_schema(schema, prefers_large_types=False)
        arrow_schema = pa.schema([pa.field(f.name, f.type, True) for f in arrow_schema])
        log = DeltaLog.for_path(path)
        if log.exists():
            table_schema = log.snapshot().schema
            if [(f.name, f.type) for f in table_schema] != [(f.name, f.type) for f in arrow_schema]:
                raise SchemaMismatchError(
                    f"the data's schema {arrow_schema} does not match the table at {path!r} ({table_schema}); select and "
                    f"cast the columns to the table's schema first"
                )
            arrow_schema = table_schema
        elif self.options.get("columnsToIndex"):
            from use.qbeast.convert import index_column_names

            index_column_names(self.options["columnsToIndex"], arrow_schema, f"the data written to {path!r}")
            _cube_size_option(self.options.get("cubeSize"), 1)
        # Spark's options are case-insensitive; the copy sent to the tasks keeps lower-case keys.
        return QbeastStagingWriter(path, arrow_schema, {str(k).lower(): str(v) for k, v in self.options.items()})
