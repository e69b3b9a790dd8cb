"""The OTree write on Spark (qbeast-format spec §3, §7): the entry points that turn rows into
Qbeast data files and commit them. The work is split along its three jobs:

* `use.qbeast.index_plan` plans the index: the revision statistics, the row weights, the cube
  domains, weights and rollup (Spark passes that collect only small metadata);
* `use.qbeast.write_tasks` runs the Spark write tasks that follow the plan (the JVM path of
  `use.qbeast.jvm_write` where it can, Arrow tasks otherwise);
* `use.qbeast.write_commit` commits the files and the revision in one Delta commit.

This module validates everything that can be checked without touching the data (columns, cube
size, mode, settings, schema and indexed columns against the existing table) so a bad call changes
nothing, and cleans up: file names are chosen on the driver before any task runs, so if anything
fails before the commit every file this write could have produced is known and deleted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from use.delta.actions import AddFile, Metadata
from use.delta.commit_options import NO_COMMIT_OPTIONS, CommitOptions
from use.delta.log import DeltaLog
from use.delta.schema import check_append_schema, schema_to_json
from use.delta.snapshot import first_switch
from use.delta.storage import resolve_table_root
from use.delta.transaction import check_app_transaction
from use.errors import ConfigError, IndexColumnError, InvalidArgumentError, NotAQbeastTableError
from use.qbeast.index_plan import (
    DATA_BYTES_ALIAS,
    WEIGHT_COLUMN,
    IndexPlan,
    collect_stats,
    one_task_per_core,
    plan_index,
    plan_rewrite,
    with_weight,
)
from use.qbeast.revision import DEFAULT_CUBE_SIZE, Revision, check_cube_size, configuration_with_revision, parse_column_specs
from use.qbeast.revision_change import (
    DEFAULT_REVISION_MARGIN,
    REVISION_MARGIN_PROPERTY,
    compute_revision_change,
    parse_column_stats,
    parse_revision_margin,
    widening_origin,
)
from use.qbeast.snapshot import QbeastSnapshot
from use.qbeast.weight import weight_from_fraction
from use.qbeast.write_commit import MODES, commit_write, metadata_with_configuration
from use.qbeast.write_scope import write_scope
from use.qbeast.write_shuffle import (
    DEFAULT_MAX_READ_SLOWDOWN,
    MAX_READ_SLOWDOWN_CONF,
    WriteShape,
    should_shuffle,
)
from use.qbeast.write_tasks import CUBE_COLUMN, FILE_COLUMN, write_files
from use.runtime.conform import conform_to_table
from use.runtime.files import OPTIMIZE_WRITE_PROPERTY as _OPTIMIZE_WRITE_PROPERTY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from use.qbeast.index_status import InputBlocks

__all__ = [
    "WriteResult",
    "IndexedWrite",
    "write",
    "index_into_revision",
    "rewrite_with_existing_weights",
    "WEIGHT_COLUMN",
    "CUBE_COLUMN",
    "FILE_COLUMN",
]

_OPTIMIZE_WRITE_CONF = "spark.qbeast.index.optimizeWrite"
_REVISION_MARGIN_CONF = "spark.qbeast.index.revisionMargin"


@dataclass(frozen=True)
class WriteResult:
    """What one `write` committed (`version` is the table version after it; `num_files == 0` for an
    empty input or a skipped idempotent repeat)."""

    version: int
    revision_id: int
    num_files: int
    num_rows: int


@dataclass(frozen=True)
class IndexedWrite:
    """Files written for rows indexed into a revision, not committed yet.

    `metadata` is the new `metaData` action when the rows needed a new revision (else `None`); the
    caller commits it together with `adds` (and its own removes).
    """

    adds: tuple[AddFile, ...]
    metadata: Metadata | None
    revision_id: int
    num_rows: int


# --- validation ------------------------------------------------------------------------------------


def _check_mode(mode: Any) -> str:
    if not isinstance(mode, str) or mode.lower() not in MODES:
        raise InvalidArgumentError(f"mode must be 'append' or 'overwrite', got {mode!r}")
    return mode.lower()


def _arrow_schema(df: DataFrame) -> pa.Schema:
    return to_arrow_schema(df.schema, prefers_large_types=False)


def _optimize_write(spark: SparkSession, requested: bool | None, configuration: Mapping[str, str] | None) -> bool | None:
    """Whether a write shuffles its rows so each file of the plan is written once (see `write`).

    The argument wins, then the Spark conf `spark.qbeast.index.optimizeWrite`, then the table
    property `delta.autoOptimize.optimizeWrite`; `None` when none is set (the size of the write
    decides, `_decide_shuffle`)."""
    if requested is not None:
        if not isinstance(requested, bool):
            raise InvalidArgumentError(f"optimize_write must be True, False or None (the settings decide), got {requested!r}")
        return requested

    return first_switch([(_OPTIMIZE_WRITE_CONF, spark.conf.get(_OPTIMIZE_WRITE_CONF, None)),
                         (_OPTIMIZE_WRITE_PROPERTY, (configuration or {}).get(_OPTIMIZE_WRITE_PROPERTY))])  # fmt: skip


def _max_read_slowdown(spark: SparkSession) -> float:
    """`spark.qbeast.index.maxReadSlowdown`, checked before anything is read or written."""
    raw = spark.conf.get(MAX_READ_SLOWDOWN_CONF, None)
    if raw is None:
        return DEFAULT_MAX_READ_SLOWDOWN
    try:
        value = float(str(raw))
    except ValueError:
        value = float("nan")
    if not value >= 1.0:  # also NaN
        raise ConfigError(
            f"{MAX_READ_SLOWDOWN_CONF} must be a number >= 1 (how much slower the written files may read when a "
            f"write does not shuffle; 1 shuffles every write of more than one task), got {raw!r}"
        )
    return value


def _decide_shuffle(
    spark: SparkSession, weighted: DataFrame, index: IndexPlan, data_bytes: int, max_read_slowdown: float
) -> bool:
    """The default of `optimize_write` for a planned write (`use.qbeast.write_shuffle`): shuffle
    when the unshuffled write's tasks would split the planned files enough to slow reads down."""
    _, tasks = one_task_per_core(weighted)
    open_cost = int(spark._jsparkSession.sessionState().conf().filesOpenCostInBytes())
    return should_shuffle(WriteShape(tasks, index.rollup.num_files, data_bytes, open_cost), max_read_slowdown)


def _revision_margin(spark: SparkSession, configuration: Mapping[str, str] | None) -> float:
    """The `revisionMargin` a write widens a linear range by (see `revision_change.widened`): the Spark conf
    `spark.qbeast.index.revisionMargin`, else the table property `use.qbeast.revisionMargin`, else
    `DEFAULT_REVISION_MARGIN`. A fraction of the range's span, 0 (the exact union, as qbeast-spark)
    to 10."""
    for source, raw in (
        (_REVISION_MARGIN_CONF, spark.conf.get(_REVISION_MARGIN_CONF, None)),
        (REVISION_MARGIN_PROPERTY, (configuration or {}).get(REVISION_MARGIN_PROPERTY)),
    ):
        if raw is not None:
            return parse_revision_margin(raw, source)
    return DEFAULT_REVISION_MARGIN


def _index(
    spark: SparkSession,
    df: DataFrame,
    revision: Revision,
    num_rows: int,
    existing: QbeastSnapshot | None,
    table_root: str,
    data_schema: pa.Schema,
    data_change: bool,
    written: list[str],
    *,
    optimize_write: bool | None,
    input_bytes: int | None = None,
    data_bytes: int = 0,
    max_read_slowdown: float = DEFAULT_MAX_READ_SLOWDOWN,
) -> tuple[list[AddFile], int]:
    """The full write algorithm (§3.2-3.6) for rows of one revision; file names go to `written`
    before any file exists, so the caller can clean up. `existing` is the snapshot whose index of
    this revision the rows extend (its cube weights respected), `None` to start the index afresh.
    `optimize_write=None` lets the plan's shape decide (`_decide_shuffle`, on `data_bytes`, the
    rows' estimated bytes)."""
    weighted = with_weight(df, revision)
    index = plan_index(spark, weighted, revision, num_rows, existing)
    if index is None:
        return [], 0
    if optimize_write is None:
        optimize_write = _decide_shuffle(spark, weighted, index, data_bytes, max_read_slowdown)
    return write_files(
        spark,
        weighted,
        revision,
        index,
        table_root,
        data_schema,
        data_change,
        optimize_write=optimize_write,
        written=written,
        input_bytes=input_bytes,
    )


def _qbeast_snapshot(snapshot: Any) -> QbeastSnapshot:
    return QbeastSnapshot.from_delta(snapshot)


def _table_root(path: Any) -> str:
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise InvalidArgumentError(f"path must be a non-empty string naming the table directory, got {path!r}")

    return resolve_table_root(path)


# --- public API -------------------------------------------------------------------------------------


def write(
    spark: SparkSession,
    df: DataFrame,
    path: str,
    columns_to_index: Sequence[str] | str,
    cube_size: int | None = None,
    mode: str = "append",
    column_stats: Mapping[str, Any] | str | None = None,
    *,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
    optimize_write: bool | None = None,
    configuration: Mapping[str, str] | None = None,
    commit_options: CommitOptions = NO_COMMIT_OPTIONS,
) -> WriteResult:
    """Index `df` into the Qbeast table at `path` (created when missing) and commit it.

    `mode='append'` extends the latest revision's index (or starts a new revision when the data
    leaves its space); `mode='overwrite'` replaces the table's data and revisions. `cube_size`
    `None` means the table's current desired cube size on append (as qbeast-spark 0.8 takes it from
    the table properties) and 5,000,000 otherwise; a different size starts a new revision. With
    `txn_app_id`/`txn_version` the write is idempotent: a version already committed for that
    application id is skipped.

    `optimize_write` (Delta's "optimized writes"): `True` shuffles the rows so each file of the
    rollup plan is written once, `False` lets every task write its own part of each file its rows
    fall into (no shuffle: the write costs little more than a plain parquet write, and the
    optimizer's compaction merges the parts later). `None` takes `spark.qbeast.index.optimizeWrite`,
    else the table property `delta.autoOptimize.optimizeWrite`, else the shape of the write
    decides (`use.qbeast.write_shuffle`): it shuffles when its tasks would split the planned files
    into so many parts that reading them would be more than `spark.qbeast.index.maxReadSlowdown`
    (1.5) times slower, each file priced at Spark's `spark.sql.files.openCostInBytes`.

    `configuration` (checked table properties, SQL's CTAS/RTAS) is the properties of a table this
    write creates, and replaces an existing table's on overwrite; None keeps them. `commit_options`:
    the writing statement's (its user metadata, default table properties, recorder of commits).
    """
    mode = _check_mode(mode)
    size = None if cube_size is None else check_cube_size(cube_size)
    check_app_transaction(txn_app_id, txn_version)
    root = _table_root(path)
    data_schema = _arrow_schema(df)
    log = DeltaLog.for_path(root)
    snapshot = log.snapshot() if log.exists() else None
    qsnap = _qbeast_snapshot(snapshot) if snapshot is not None else None
    shuffle = _optimize_write(spark, optimize_write, snapshot.metadata.configuration if snapshot is not None else None)
    max_read_slowdown = _max_read_slowdown(spark) if shuffle is None else DEFAULT_MAX_READ_SLOWDOWN

    if snapshot is not None and snapshot.has_app_transaction(txn_app_id, txn_version):
        return WriteResult(snapshot.version, qsnap.latest_revision_id if qsnap else 0, 0, 0)

    existing_rev: Revision | None = None
    origin_rev: Revision | None = None
    if snapshot is not None and mode == "append":
        check_append_schema(data_schema, snapshot.schema, root)
        df = conform_to_table(df, snapshot.metadata.schema_string)
        data_schema = _arrow_schema(df)
        if qsnap is not None and qsnap.revisions:
            existing_rev = qsnap.revisions[qsnap.latest_revision_id]
            origin_rev = widening_origin(qsnap.revisions.values(), existing_rev)
    transformers = parse_column_specs(columns_to_index, data_schema, existing=existing_rev)
    if existing_rev is not None and existing_rev.columns != tuple(t.column_name for t in transformers):
        raise IndexColumnError(
            f"columns_to_index {', '.join(t.column_name for t in transformers)} differ from the indexed columns "
            f"{', '.join(existing_rev.columns)} of {root}; append with the same columns, or overwrite the table to "
            f"index other columns"
        )

    parse_column_stats(column_stats, transformers)
    if size is None:
        size = existing_rev.desired_cube_size if existing_rev is not None else DEFAULT_CUBE_SIZE

    stats = collect_stats(df, transformers, data_bytes=shuffle is None)
    data_bytes = int(stats.pop(DATA_BYTES_ALIAS, None) or 0)
    now_ms = int(time.time() * 1000)
    margin = _revision_margin(spark, snapshot.metadata.configuration if snapshot is not None and mode == "append" else None)
    revision, is_new = compute_revision_change(
        existing_rev, transformers, stats, size, column_stats, root, now_ms, margin, origin_rev
    )
    num_rows = int(stats.get("count") or 0)

    written: list[str] = []
    created_root = not os.path.isdir(root)
    try:
        with write_scope(spark, root, written, f"USE write: {mode} of {num_rows} rows to {root}"):
            adds: list[AddFile] = []
            rows_written = 0
            if num_rows:
                os.makedirs(root, exist_ok=True)
                adds, rows_written = _index(
                    spark,
                    df,
                    revision,
                    num_rows,
                    qsnap if not is_new and mode == "append" else None,
                    root,
                    data_schema,
                    True,
                    written,
                    optimize_write=shuffle,
                    data_bytes=data_bytes,
                    max_read_slowdown=max_read_slowdown,
                )
            committed = commit_write(
                log,
                snapshot,
                revision,
                is_new,
                mode,
                adds,
                rows_written,
                data_schema,
                column_stats=column_stats,
                columns_to_index=columns_to_index,
                txn_app_id=txn_app_id,
                txn_version=txn_version,
                configuration=configuration,
                commit_options=commit_options,
            )
    except BaseException:
        if created_root:
            _remove_if_empty(root)
        raise
    if num_rows:
        rev_id = committed.revision_id
    else:
        rev_id = qsnap.latest_revision_id if qsnap is not None and mode == "append" else 0
    return WriteResult(committed.version, rev_id, len(adds), rows_written)


def _remove_if_empty(root: str) -> None:
    try:
        os.rmdir(root)
    except OSError:
        pass


def index_into_revision(
    spark: SparkSession,
    df: DataFrame,
    qsnap: QbeastSnapshot,
    *,
    data_change: bool = False,
    input_bytes: int | None = None,
) -> IndexedWrite:
    """Index rows (e.g. of staging files) into the table's latest revision with the full write
    algorithm, writing files but not committing.

    When the rows leave the latest revision's space (or the table has only the staging revision),
    a new revision is made and its `metaData` action returned; otherwise the existing cube weights
    are respected. On failure the files written so far are deleted.
    """
    if not qsnap.revisions:
        raise NotAQbeastTableError(
            f"{qsnap.table_root} has no Qbeast revisions; convert it or write it with the Qbeast writer first"
        )
    root = qsnap.table_root
    latest = qsnap.revisions[qsnap.latest_revision_id]
    data_schema = _arrow_schema(df)
    check_append_schema(data_schema, qsnap.schema, root)
    df = conform_to_table(df, schema_to_json(qsnap.schema))
    data_schema = _arrow_schema(df)
    transformers = parse_column_specs(list(latest.columns), data_schema, existing=latest)
    stats = collect_stats(df, transformers)
    revision, is_new = compute_revision_change(
        latest,
        transformers,
        stats,
        latest.desired_cube_size,
        None,
        latest.table_id,
        int(time.time() * 1000),
        _revision_margin(spark, qsnap.configuration),
        widening_origin(qsnap.revisions.values(), latest),
    )
    num_rows = int(stats.get("count") or 0)
    if not num_rows:
        return IndexedWrite((), None, latest.revision_id, 0)
    written: list[str] = []
    with write_scope(spark, root, written, f"USE write: index {num_rows} rows of {root}"):
        adds, rows = _index(
            spark,
            df,
            revision,
            num_rows,
            None if is_new else qsnap,
            root,
            data_schema,
            data_change,
            written,
            optimize_write=True,
            input_bytes=input_bytes,
        )
        metadata = None
        if is_new:
            conf = configuration_with_revision(qsnap.configuration, revision, add_staging=True, overwrite=False)
            metadata = metadata_with_configuration(qsnap, conf)
    return IndexedWrite(tuple(adds), metadata, revision.revision_id, rows)


def rewrite_with_existing_weights(
    spark: SparkSession,
    df: DataFrame,
    qsnap: QbeastSnapshot,
    revision_id: int,
    *,
    data_change: bool = False,
    sampling_fraction: float | None = None,
    input_bytes: int | None = None,
    input_blocks: InputBlocks | None = None,
    sample_files: Sequence[str] = (),
) -> list[AddFile]:
    """Optimize path (§6.2): rewrite rows of one revision with the revision's existing cube
    maxWeights, regrouping each cube's scattered blocks into few files. No weight estimation (the
    tree keeps its shape); the rollup uses the actual row count per cube. Not committed; on failure
    the files written so far are deleted. With `sampling_fraction` f, cubes no sample(f) reads are
    kept out of the files it does read (sampling-aware rollup, `use.qbeast.rollup`). With
    `input_blocks` (the blocks of the files `df` reads) the rows per cube may come from the blocks
    instead of a pass over `df` (`use.qbeast.index_plan.plan_rewrite`); `sample_files`, local
    parquet files of `df`'s rows under the table's column names, give the first rows the JVM write
    judges its dictionary columns by (`use.qbeast.jvm_write`).
    """
    if revision_id not in qsnap.revisions or revision_id == 0:
        raise InvalidArgumentError(
            f"revision {revision_id} is not an indexed revision of {qsnap.table_root} "
            f"(indexed revisions: {sorted(r for r in qsnap.revisions if r > 0)})"
        )
    revision = qsnap.revisions[revision_id]
    root = qsnap.table_root
    data_schema = _arrow_schema(df)
    check_append_schema(data_schema, qsnap.schema, root)
    df = conform_to_table(df, schema_to_json(qsnap.schema))
    data_schema = _arrow_schema(df)
    sample_weight = None
    if sampling_fraction is not None:
        sample_weight = int(weight_from_fraction(float(sampling_fraction)))
    weighted = with_weight(df, revision)
    index = plan_rewrite(weighted, revision, qsnap, sample_weight=sample_weight, input_blocks=input_blocks)
    if index is None:
        return []
    written: list[str] = []
    with write_scope(spark, root, written, f"USE write: rewrite of {root}"):
        adds, _ = write_files(
            spark,
            weighted,
            revision,
            index,
            root,
            data_schema,
            data_change,
            optimize_write=True,
            written=written,
            input_bytes=input_bytes,
            sample_files=sample_files,
        )
    return adds
