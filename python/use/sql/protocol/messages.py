"""Every message between the JVM shim and the Python side, as frozen dataclasses.

Each bridge method has one request class (`METHOD`: its name on the wire, `REPLY`: the class of its
answer); the other classes are the values messages carry. The shim mirrors each class field for
field, in the same order, as a case class of `jvm-shim/src/main/scala/use/sql/Protocol.scala`
(camelCase names there and on the wire); `tests/protocol/<Class>.json` holds one full example of
each, which both sides must read and write back unchanged (tests/unit/test_protocol.py,
tests/spark/test_sql_protocol.py), so a field added or renamed on one side alone fails a test.

Rows travel as Arrow IPC streams (`bytes`): a scan's files, a procedure's arguments and its result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import pyarrow as pa

from use.delta.storage import resolve_table_root
from use.sql.protocol.codec import Scalar

__all__ = [
    "AbandonRequest",
    "AlterPropertiesRequest",
    "AlterSchemaRequest",
    "CallProcedureReply",
    "CallProcedureRequest",
    "CommitStagedRequest",
    "CreateReply",
    "CreateRequest",
    "CreateSpec",
    "DescribeRequest",
    "Done",
    "ErrorReply",
    "InsightNamesReply",
    "InsightNamesRequest",
    "InsightReadReply",
    "InsightReadRequest",
    "ManualTriggerReply",
    "ManualTriggerRequest",
    "MergeMetrics",
    "MetastoreTable",
    "PartitionFilter",
    "PlanScansReply",
    "PlanScansRequest",
    "ProcedureParameter",
    "ProcedureSpec",
    "ProceduresReply",
    "ProceduresRequest",
    "Providers",
    "ProvidersRequest",
    "Registration",
    "RewriteRowsReply",
    "RewriteRowsRequest",
    "RowLevelBeginRequest",
    "RowLevelEndRequest",
    "SCAN_FILES_SCHEMA",
    "SampleFilter",
    "SaveReply",
    "SaveRequest",
    "ScanPlan",
    "ScanRequest",
    "StageReply",
    "StageRequest",
    "StreamBatchRequest",
    "StreamLatestReply",
    "StreamLatestRequest",
    "StreamPosition",
    "StreamSource",
    "StreamVersionReply",
    "StreamVersionRequest",
    "TableDescription",
    "TableRef",
    "TableReply",
    "TruncateRequest",
    "WriteRequest",
]

# --- values ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableRef:
    """A table as a statement names it, resolved by the shim: `name` as shown to the user, its
    `location` (None: a catalog entry without one, e.g. a view), its `provider` (None: unknown, a
    path), `by_path` when the statement gave a path rather than a registered name, and for a table
    of the session catalog its registration (`database`, `table`, `partition_schema` as Spark JSON),
    which a converting procedure changes."""

    name: str
    location: str | None = None
    provider: str | None = None
    by_path: bool = False
    database: str | None = None
    table: str | None = None
    partition_schema: str | None = None

    @property
    def root(self) -> str:
        """The absolute local path the table's log lives under."""
        if not self.location:
            raise ValueError(f"{self.name} has no location")
        return resolve_table_root(self.location)

    @property
    def ident(self) -> tuple[str, str] | None:
        """(database, table) of a session catalog table's registration."""
        return (self.database, self.table) if self.database and self.table else None


@dataclass(frozen=True)
class TableDescription:
    """What the Delta log says about a table at one version (the shim's `TableMeta`): schema and
    partitioning as Spark reads them, properties, size; under Delta column mapping also the schema
    the files are read with (`stored_schema`: physical names) and the mode."""

    root: str
    uri: str
    provider: str
    version: int
    schema: str
    partition_columns: tuple[str, ...]
    configuration: Mapping[str, str]
    description: str | None
    is_qbeast: bool
    num_files: int
    size_in_bytes: int
    stored_schema: str | None = None
    column_mapping: str = "none"


@dataclass(frozen=True)
class Done:
    """The answer of a method that returns nothing."""


@dataclass(frozen=True)
class ErrorReply:
    """A failure as SQL users see it (sent as `{"error": ...}` in place of the reply): the error
    class, its message, its SQLSTATE, and whether running the statement's step again on the latest
    snapshot may succeed (a lost conflict; the shim retries DML steps only then)."""

    kind: str
    message: str
    sql_state: str
    retryable: bool = False


@dataclass(frozen=True)
class TableReply:
    """The table after a change (its new version)."""

    table: TableDescription


# --- DDL ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DescribeRequest:
    """The table's description: the latest version, `version`, or the version current at `timestamp_ms`."""

    METHOD: ClassVar[str] = "describe"
    REPLY: ClassVar[type] = TableDescription

    table: TableRef
    version: int | None = None
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class CreateSpec:
    """A CREATE / CTAS / RTAS / REPLACE statement's table: `mode` is "create" (create, or register
    the table at LOCATION), "ctas" (a new table written by the query) or "replace"; `root` is set
    once the Python side has checked the spec (`stage`)."""

    mode: str
    name: str
    provider: str
    location: str
    managed: bool
    location_given: bool
    by_path: bool
    schema: str | None
    partition_columns: tuple[str, ...]
    properties: Mapping[str, str]
    options: Mapping[str, str]
    comment: str | None
    owner: str | None
    table: TableRef
    root: str | None = None


@dataclass(frozen=True)
class CreateReply:
    """The created (or registered) table; `created`: a new log was written (undone by `abandon`)."""

    table: TableDescription
    created: bool


@dataclass(frozen=True)
class CreateRequest:
    METHOD: ClassVar[str] = "create"
    REPLY: ClassVar[type] = CreateReply

    spec: CreateSpec


@dataclass(frozen=True)
class AbandonRequest:
    """Undo a `create` whose metastore registration failed."""

    METHOD: ClassVar[str] = "abandon"
    REPLY: ClassVar[type] = Done

    table: TableRef


@dataclass(frozen=True)
class StageReply:
    spec: CreateSpec


@dataclass(frozen=True)
class StageRequest:
    """Check a CTAS/RTAS/REPLACE before anything is written."""

    METHOD: ClassVar[str] = "stage"
    REPLY: ClassVar[type] = StageReply

    spec: CreateSpec


@dataclass(frozen=True)
class CommitStagedRequest:
    """REPLACE TABLE / CREATE OR REPLACE TABLE without a query."""

    METHOD: ClassVar[str] = "commitStaged"
    REPLY: ClassVar[type] = TableReply

    spec: CreateSpec


@dataclass(frozen=True)
class AlterPropertiesRequest:
    METHOD: ClassVar[str] = "alterProperties"
    REPLY: ClassVar[type] = TableReply

    table: TableRef
    set: Mapping[str, str]
    unset: tuple[str, ...]


@dataclass(frozen=True)
class AlterSchemaRequest:
    """The schema Spark computed for an ALTER TABLE from the table as of `read_version`; `added`:
    the columns ADD COLUMNS names."""

    METHOD: ClassVar[str] = "alterSchema"
    REPLY: ClassVar[type] = TableReply

    table: TableRef
    schema: str
    read_version: int
    added: tuple[str, ...]


@dataclass(frozen=True)
class TruncateRequest:
    METHOD: ClassVar[str] = "truncate"
    REPLY: ClassVar[type] = Done

    table: TableRef


# --- reads ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanRequest:
    """One scan of a query: its table, version (None: the latest when planned), Qbeast sample
    fraction. Its filter travels beside the request, as the Catalyst expression it is."""

    table: TableRef
    version: int | None = None
    sample: float | None = None


@dataclass(frozen=True)
class SampleFilter:
    """A Qbeast sample's exact row filter: `hash(columns) < upper`."""

    columns: tuple[str, ...]
    upper: int


#: The rows of `ScanPlan.files`: one per file.
SCAN_FILES_SCHEMA = pa.schema(
    [
        ("uri", pa.string()),
        ("size", pa.int64()),
        ("modification_time", pa.int64()),
        ("partition_values", pa.list_(pa.string())),
        # the rows the file's deletion vector deletes: a portable 32-bit roaring bitmap (null: none)
        ("deleted_rows", pa.binary()),
    ]
)


@dataclass(frozen=True)
class ScanPlan:
    """The files one scan reads, an Arrow IPC stream of `SCAN_FILES_SCHEMA` (URI, size,
    modification time, partition values in the table's partition columns' order, null for null,
    the rows its deletion vector deletes as a portable roaring bitmap, null without one),
    and the snapshot's totals for EXPLAIN."""

    version: int
    files: bytes
    total_files: int
    total_bytes: int
    sample: SampleFilter | None = None


@dataclass(frozen=True)
class PlanScansReply:
    scans: tuple[ScanPlan, ...]


@dataclass(frozen=True)
class PlanScansRequest:
    """Every scan of a query, planned in one call (scans of one table read one snapshot)."""

    METHOD: ClassVar[str] = "planScans"
    REPLY: ClassVar[type] = PlanScansReply

    scans: tuple[ScanRequest, ...]


@dataclass(frozen=True)
class StreamPosition:
    """Where a stream reading a table is (its offset, as its checkpoint keeps it): with `snapshot`,
    it has taken the first `index` files of the table as of `version` (oldest first); without,
    every file of the versions before `version` and the first `index` files `version` added."""

    version: int
    index: int
    snapshot: bool


@dataclass(frozen=True)
class StreamSource:
    """A stream reading a table: its read options, the version whose schema it reads, and
    `startingTimestamp` in ms."""

    table: TableRef
    options: Mapping[str, str]
    schema_version: int
    starting_timestamp_ms: int | None = None


@dataclass(frozen=True)
class StreamVersionReply:
    version: int


@dataclass(frozen=True)
class StreamVersionRequest:
    """The table's latest version (where a `Trigger.AvailableNow` run stops)."""

    METHOD: ClassVar[str] = "streamVersion"
    REPLY: ClassVar[type] = StreamVersionReply

    source: StreamSource


@dataclass(frozen=True)
class StreamLatestReply:
    end: StreamPosition


@dataclass(frozen=True)
class StreamLatestRequest:
    """Where the next batch from `start` (None: the stream's first) ends, within the read limits
    and versions up to `last_version`."""

    METHOD: ClassVar[str] = "streamLatest"
    REPLY: ClassVar[type] = StreamLatestReply

    source: StreamSource
    start: StreamPosition | None = None
    last_version: int | None = None
    max_files: int | None = None
    max_bytes: int | None = None


@dataclass(frozen=True)
class StreamBatchRequest:
    """The files of the batch from `start` to `end`."""

    METHOD: ClassVar[str] = "streamBatch"
    REPLY: ClassVar[type] = ScanPlan

    source: StreamSource
    start: StreamPosition | None
    end: StreamPosition


# --- writes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionFilter:
    """A partition overwrite's condition (INSERT OVERWRITE ... PARTITION): `op` one of `=`, `<=>`,
    `isnull`, `isnotnull`, `in` (`values`), `and` (`left`, `right`); values are the JSON scalars
    Spark's filters hold, typed by the column's type on this side."""

    op: str
    column: str | None = None
    value: Scalar = None
    values: tuple[Scalar, ...] = ()
    left: PartitionFilter | None = None
    right: PartitionFilter | None = None


@dataclass(frozen=True)
class WriteRequest:
    """A write into a table through the catalog: `mode` append, overwrite, dynamic, partitions
    (`partition_filters`) or replaceWhere (`condition`, Spark SQL); `staged`: a CTAS/RTAS's table.
    The rows travel beside the request, as the DataFrame."""

    METHOD: ClassVar[str] = "write"
    REPLY: ClassVar[type] = TableReply

    table: TableRef
    mode: str
    partition_filters: tuple[PartitionFilter, ...] = ()
    condition: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    staged: CreateSpec | None = None


@dataclass(frozen=True)
class SaveReply:
    """`write`: the save is an append / overwrite / dynamic overwrite the shim makes through the
    catalog (None: done here); `root`: the table's location."""

    created: bool
    root: str
    write: str | None = None


@dataclass(frozen=True)
class SaveRequest:
    """`df.write.format(...).save(path)` or a stream sink's batch (`stream`): the path, the format
    given, Spark's save mode and the writer's options."""

    METHOD: ClassVar[str] = "savePath"
    REPLY: ClassVar[type] = SaveReply

    path: str
    format: str
    mode: str
    partition_columns: tuple[str, ...] | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    stream: bool = False


@dataclass(frozen=True)
class MergeMetrics:
    """A MERGE's row counts per outcome, as Delta's commit metrics name them."""

    num_target_rows_updated: int
    num_target_rows_deleted: int
    num_target_rows_inserted: int
    num_target_rows_copied: int
    num_target_files_removed: int


@dataclass(frozen=True)
class RewriteRowsReply:
    affected_rows: int


@dataclass(frozen=True)
class RewriteRowsRequest:
    """One attempt of a DELETE, UPDATE or MERGE on the snapshot `version`: the files it removes, the
    rows matched, its condition as text (the commit's `predicate`). The rows that replace the files
    (none when `whole_files` go) and the condition the target was read with travel beside it."""

    METHOD: ClassVar[str] = "rewriteRows"
    REPLY: ClassVar[type] = RewriteRowsReply

    operation: str
    table: TableRef
    version: int
    predicate: str
    remove: tuple[str, ...]
    matched_rows: int | None = None
    whole_files: bool = False
    merge_metrics: MergeMetrics | None = None


@dataclass(frozen=True)
class RowLevelBeginRequest:
    """A row-level statement on the table starts (its attempts follow)."""

    METHOD: ClassVar[str] = "rowLevelBegin"
    REPLY: ClassVar[type] = Done

    table: TableRef


@dataclass(frozen=True)
class RowLevelEndRequest:
    """The row-level statement ended, whatever its outcome."""

    METHOD: ClassVar[str] = "rowLevelEnd"
    REPLY: ClassVar[type] = Done

    table: TableRef


# --- use_catalog ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Providers:
    """The table providers USE serves (`tables`) and those a procedure's `<provider>.`/path``
    argument may name (`paths`)."""

    tables: tuple[str, ...]
    paths: tuple[str, ...]


@dataclass(frozen=True)
class ProvidersRequest:
    METHOD: ClassVar[str] = "providers"
    REPLY: ClassVar[type] = Providers


@dataclass(frozen=True)
class InsightNamesReply:
    """The insight tables of a table (`table`) and the lake-wide ones (`lake`)."""

    table: tuple[str, ...]
    lake: tuple[str, ...]


@dataclass(frozen=True)
class InsightNamesRequest:
    METHOD: ClassVar[str] = "insightNames"
    REPLY: ClassVar[type] = InsightNamesReply


@dataclass(frozen=True)
class MetastoreTable:
    """A table of the metastore as the shim lists it (`use.insights.TableIdentity`)."""

    catalog: str
    database: str
    table_name: str
    table_type: str | None
    provider: str | None
    location: str | None
    table_properties: Mapping[str, str]


@dataclass(frozen=True)
class InsightReadReply:
    """An insight table's schema (Spark JSON) and its reader's options."""

    schema: str
    options: Mapping[str, str]


@dataclass(frozen=True)
class InsightReadRequest:
    """One `use_catalog` table: `kind` "table" (the insight `insight` of `table`) or "lake" (a
    lake-wide table, `tables`: the metastore's tables, for those that read them)."""

    METHOD: ClassVar[str] = "insightRead"
    REPLY: ClassVar[type] = InsightReadReply

    kind: str
    insight: str
    table: TableRef | None = None
    tables: tuple[MetastoreTable, ...] = ()


@dataclass(frozen=True)
class ProcedureParameter:
    """One parameter as Spark declares it: `type` a Spark SQL type, `default` a SQL expression (None:
    required); `table`: a table name or path the shim resolves."""

    name: str
    type: str
    default: str | None
    doc: str
    table: bool = False


@dataclass(frozen=True)
class ProcedureSpec:
    name: str
    description: str
    parameters: tuple[ProcedureParameter, ...]


@dataclass(frozen=True)
class ProceduresReply:
    procedures: tuple[ProcedureSpec, ...]


@dataclass(frozen=True)
class ProceduresRequest:
    """Every procedure (the shim asks once and caches)."""

    METHOD: ClassVar[str] = "procedures"
    REPLY: ClassVar[type] = ProceduresReply


@dataclass(frozen=True)
class Registration:
    """A catalog table's new provider after a procedure converted its files."""

    database: str
    table: str
    provider: str


@dataclass(frozen=True)
class CallProcedureReply:
    """The result rows (an Arrow IPC stream in the procedure's output schema), and a registration
    the shim changes."""

    rows: bytes
    register: Registration | None = None


@dataclass(frozen=True)
class CallProcedureRequest:
    """One CALL: the arguments as Spark gives them (an Arrow IPC stream of one row, a column per
    parameter, in the types of the values given), the table arguments resolved by the shim."""

    METHOD: ClassVar[str] = "callProcedure"
    REPLY: ClassVar[type] = CallProcedureReply

    procedure: str
    arguments: bytes
    tables: Mapping[str, TableRef] = field(default_factory=dict)


@dataclass(frozen=True)
class ManualTriggerReply:
    """What the manual trigger did: ran here, queued in the service, or neither, and why."""

    ran: bool
    queued: bool
    reason: str
    versions: tuple[int, ...] = ()


@dataclass(frozen=True)
class ManualTriggerRequest:
    """ALTER TABLE use_catalog.<catalog>.<db>.<t> SET TBLPROPERTIES (...)."""

    METHOD: ClassVar[str] = "manualTrigger"
    REPLY: ClassVar[type] = ManualTriggerReply

    table: TableRef
    settings: Mapping[str, str]
