"""Turning a parquet directory or a Delta table into a Qbeast table in place (qbeast-format spec §6.4).

No data file is read or rewritten. A parquet directory becomes a Delta table in one commit: one
`add` per parquet file, its stats taken from the file's footer (what `CONVERT TO DELTA` does), and
table properties that already hold the *staging* revision 0 for the requested columns
(EmptyTransformers, the desired cube size) and `qbeast.lastRevisionID = "0"` (qbeast-spark needs a
second, metadata-only commit for them). A Delta table gets that metadata-only commit. Every
existing file is then an unindexed staging file: reads see all rows, and the next indexed write (or
an optimization of revision 0) creates revision 1 with real transformations.

Everything that can be wrong with the input (missing path, partitioned layout, unknown columns,
bad cube size, schemas that do not unify) is checked before the first byte is written, so a failed
conversion leaves the directory exactly as it was.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from use.delta import DeltaLog
from use.delta.convert import list_parquet_files, parquet_adds
from use.errors import (
    IndexColumnError,
    InvalidArgumentError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from use.qbeast.revision import (
    check_cube_size,
    configuration_with_revision,
    parse_column_specs,
    split_column_specs,
    staging_revision,
)
from use.qbeast.snapshot import QbeastSnapshot

DEFAULT_CUBE_SIZE: int = 5_000_000


@dataclass(frozen=True)
class ConvertResult:
    """What a conversion did. `version` is the table version after it (unchanged for a no-op)."""

    path: str
    version: int
    source_format: str  # "parquet", "delta" or "qbeast" (already converted: nothing done)
    num_files: int
    columns_to_index: tuple[str, ...]
    converted: bool


def _check_spec_syntax(columns_to_index: Any) -> None:
    if not (
        isinstance(columns_to_index, str)
        or (isinstance(columns_to_index, (list, tuple)) and all(isinstance(c, str) for c in columns_to_index))
    ):
        raise IndexColumnError(
            f"columns_to_index must be a list of column names (or 'a,b:hashing' specs), got {columns_to_index!r}"
        )
    split_column_specs(columns_to_index)


def index_column_names(columns_to_index: Any, schema: pa.Schema, where: str) -> list[str]:
    """Validate the column specs against the schema (names exist, types indexable) -> plain names.

    A converted table's staging revision keeps only names (EmptyTransformers); an explicit type such
    as `name:hashing` is still checked here so a bad spec fails now, not at the first write.
    """
    _check_spec_syntax(columns_to_index)
    try:
        transformers = parse_column_specs(columns_to_index, schema)
    except IndexColumnError as exc:
        raise IndexColumnError(f"cannot index {where}: {exc}") from None
    return [t.column_name for t in transformers]


def _list_parquet_dir(path: str) -> list[Any]:
    """The data files of an unpartitioned parquet directory (`use.delta.convert`'s listing): a
    partitioned or nested one cannot hold a Qbeast table (its index clusters the rows instead)."""
    try:
        return list_parquet_files(path, ())
    except InvalidArgumentError as exc:
        raise UnsupportedFeatureError(
            f"partitioned (or nested) parquet directories cannot be converted to Qbeast ({exc}); rewrite the data "
            "unpartitioned (e.g. QbeastTable.write) instead"
        ) from None


def convert_to_qbeast(path: str, columns_to_index: Sequence[str] | str, cube_size: int | None = None) -> ConvertResult:
    """Convert the parquet directory or Delta table at `path` into a Qbeast table (staging revision 0);
    `cube_size` None is `DEFAULT_CUBE_SIZE`.

    A table that is already a Qbeast table is left as it is (`converted=False`) when the arguments
    describe its index (its latest revision's columns, in order, and its cube size when one is
    given); arguments that differ are refused rather than ignored: the caller asked for an index the
    table does not have, and converting cannot give it one (an overwrite re-indexes)."""
    if not isinstance(path, str) or not path:
        raise InvalidArgumentError(f"path must be a non-empty string, got {path!r}")
    given_cube_size = None if cube_size is None else check_cube_size(cube_size)
    cube_size = DEFAULT_CUBE_SIZE if given_cube_size is None else given_cube_size
    if not os.path.isdir(path):
        raise TableNotFoundError(f"cannot convert {path!r}: no such directory (expected a parquet directory or a Delta table)")
    path = os.path.abspath(path)
    _check_spec_syntax(columns_to_index)
    log = DeltaLog.for_path(path)

    if log.exists():
        snap = log.snapshot()
        qsnap = QbeastSnapshot.from_delta(snap)
        if qsnap.is_qbeast:
            latest = qsnap.revisions[qsnap.latest_revision_id]
            _check_same_index(path, latest, columns_to_index, given_cube_size)
            return ConvertResult(path, snap.version, "qbeast", snap.num_files, tuple(latest.columns), False)
        if snap.partition_columns:
            raise UnsupportedFeatureError(
                f"the Delta table at {path!r} is partitioned by {list(snap.partition_columns)}; partitioned tables cannot "
                f"be converted to Qbeast (rewrite it unpartitioned with QbeastTable.write)"
            )
        names = index_column_names(columns_to_index, snap.schema, f"the Delta table at {path!r}")
        revision = staging_revision(path, names, cube_size, _now_ms())
        txn = log.start_transaction()
        meta = snap.metadata
        conf = configuration_with_revision(meta.configuration, revision, columns_to_index=columns_to_index)
        txn.add(_with_configuration(meta, conf))
        version = txn.commit("SET TBLPROPERTIES", {"properties": _props(revision)})
        return ConvertResult(path, version, "delta", snap.num_files, tuple(names), True)

    files = _list_parquet_dir(path)
    if not files:
        raise TableNotFoundError(
            f"cannot convert {path!r}: it has neither a Delta log nor parquet files; write the table with QbeastTable.write"
        )

    schema, adds = parquet_adds(path, files)
    names = index_column_names(columns_to_index, schema, f"the parquet directory {path!r}")
    revision = staging_revision(path, names, cube_size, _now_ms())
    # One commit: the log over the existing files, exactly as they are (CONVERT TO DELTA), with the
    # staging revision already in its table properties, so no reader sees a half-converted table.
    snap = log.create(
        schema,
        configuration=configuration_with_revision({}, revision, columns_to_index=columns_to_index),
        actions=adds,
        operation="CONVERT",
        operation_parameters={"numFiles": len(adds), "partitionedBy": [], "collectStats": True, "sourceFormat": "parquet"},
    )
    return ConvertResult(path, snap.version, "parquet", len(adds), tuple(names), True)


def _check_same_index(path: str, revision: Any, columns_to_index: Sequence[str] | str, cube_size: int | None) -> None:
    """An already-Qbeast table's conversion is a no-op only for the index it has."""
    names = [c for c, _ in split_column_specs(columns_to_index)]
    if names != list(revision.columns):
        raise IndexColumnError(
            f"{path!r} is already a Qbeast table indexed on {', '.join(revision.columns)}, not on {', '.join(names)}; "
            "converting cannot change its index: pass its own columns (or convert another table), or overwrite the "
            "table with the new columnsToIndex to re-index it"
        )
    if cube_size is not None and cube_size != revision.desired_cube_size:
        raise IndexColumnError(
            f"{path!r} is already a Qbeast table with cube size {revision.desired_cube_size}, not {cube_size}; omit "
            "cube_size (or pass its own), or overwrite the table with the new cubeSize"
        )


def _props(revision: Any) -> dict[str, str]:
    return {"qbeast.lastRevisionID": "0", "qbeast.revision.0": revision.to_json()}


def _with_configuration(meta: Any, configuration: dict[str, str]) -> Any:
    return dataclasses.replace(meta, configuration=dict(configuration))


def _now_ms() -> int:
    return int(time.time() * 1000)
