"""A Delta snapshot seen as a Qbeast table: revisions, files (with their revision) and blocks.

This is the one read-only model that the reader, the metrics and every optimization strategy
consume. It is pure (no Spark, no I/O beyond what the Delta snapshot already holds) and columnar:
`files` and `blocks` stay Arrow tables, so a million-file table costs a few Arrow columns, not a
million objects. Synthetic snapshots for planning tests are built with `from_tables`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.errors import InvalidArgumentError, NotAQbeastTableError
from use.qbeast.blocks import block_table, empty_block_table, revision_ids
from use.qbeast.index_status import IndexStatus
from use.qbeast.revision import (
    LAST_REVISION_KEY,
    REVISION_PREFIX,
    Revision,
    revisions_from_configuration,
)
from use.qbeast.revision import (
    is_qbeast as _is_qbeast,
)
from use.qbeast.revision import (
    latest_revision_id as _configured_latest,
)
from use.qbeast.weight_records import split_empty

if TYPE_CHECKING:
    from use.delta.columnmapping import ColumnMapping


@dataclass(frozen=True, eq=False)
class QbeastSnapshot:
    version: int
    table_root: str
    revisions: Mapping[int, Revision]
    files: pa.Table  # Snapshot.files + revision_id int64
    blocks: pa.Table  # use.qbeast.blocks.BLOCK_TABLE_SCHEMA: the blocks holding rows
    configuration: Mapping[str, str] = field(default_factory=dict)
    schema: pa.Schema = field(default_factory=lambda: pa.schema([]))
    # Delta partition columns (plain Delta tables only; Qbeast never partitions): their values live
    # in the log, not in the data files, so readers must add them back from `files.partition_values`.
    partition_columns: tuple[str, ...] = ()
    # Logical vs physical column names (Delta column mapping); None means names are as in `schema`.
    column_mapping: ColumnMapping | None = None
    # Blocks that hold no row and only record a cube's weight (`use.qbeast.weight_records`): they
    # count in the cubes' status maxWeight (`status_blocks_of_revision`), never as rows or blocks.
    empty_blocks: pa.Table = field(default_factory=empty_block_table)

    # --- construction --------------------------------------------------------------------------

    @classmethod
    def from_delta(cls, snapshot: Any) -> QbeastSnapshot:
        """Build from a `use.delta` Snapshot (`.version`, `.table_root`, `.files`,
        `.metadata.configuration`, `.schema`). Raises CorruptIndexMetadataError on bad Qbeast
        metadata; a plain Delta table gives no revisions and one root block per file."""
        configuration = dict(snapshot.metadata.configuration or {})
        revisions = revisions_from_configuration(configuration)
        files = _with_revision_id(snapshot.files)
        blocks, empty = split_empty(block_table(files, revisions))
        return cls(
            version=int(snapshot.version),
            table_root=str(snapshot.table_root),
            revisions=revisions,
            files=files,
            blocks=blocks,
            configuration=configuration,
            schema=snapshot.schema,
            partition_columns=tuple(snapshot.metadata.partition_columns or ()),
            column_mapping=getattr(snapshot, "column_mapping", None),
            empty_blocks=empty,
        )

    @classmethod
    def from_tables(
        cls,
        *,
        files: pa.Table,
        blocks: pa.Table | None,
        revisions: Mapping[int, Revision],
        version: int = 0,
        table_root: str = "",
        configuration: Mapping[str, str] | None = None,
        schema: pa.Schema | None = None,
    ) -> QbeastSnapshot:
        """A synthetic snapshot (tests, planners). `blocks=None` parses them from `files.tags`;
        `configuration` defaults to the revisions' table properties."""
        files = _with_revision_id(files)
        if configuration is None:
            configuration = {f"{REVISION_PREFIX}{rid}": rev.to_json() for rid, rev in revisions.items()}
            if revisions:
                configuration[LAST_REVISION_KEY] = str(max(revisions))
        if blocks is None:
            blocks = block_table(files, revisions)
        blocks, empty = split_empty(blocks)
        return cls(
            version=version,
            table_root=table_root,
            revisions=dict(revisions),
            files=files,
            blocks=blocks,
            configuration=dict(configuration),
            schema=schema if schema is not None else pa.schema([]),
            empty_blocks=empty,
        )

    # --- facts ---------------------------------------------------------------------------------

    @property
    def is_qbeast(self) -> bool:
        return _is_qbeast(self.configuration)

    @property
    def partition_value_keys(self) -> tuple[str, ...]:
        """The keys of the files' `partition_values`, partition column by partition column: their
        physical names under Delta column mapping, else the columns themselves."""
        mapping = self.column_mapping
        return tuple(mapping.physical_name(c) if mapping is not None else c for c in self.partition_columns)

    @property
    def latest_revision_id(self) -> int:
        """`qbeast.lastRevisionID`, else the largest revision id; 0 when only staging."""
        if LAST_REVISION_KEY in self.configuration:
            return _configured_latest(self.configuration)
        return max(self.revisions, default=0)

    @property
    def latest_revision(self) -> Revision:
        rid = self.latest_revision_id
        if rid not in self.revisions:
            raise NotAQbeastTableError(
                f"table {self.table_root or '(synthetic)'} has no Qbeast revision; write it with format qbeast "
                f"or convert it first"
            )
        return self.revisions[rid]

    def revision(self, revision_id: int) -> Revision:
        if revision_id not in self.revisions:
            raise InvalidArgumentError(
                f"revision {revision_id} does not exist in {self.table_root or 'the table'}; "
                f"known revisions: {sorted(self.revisions)}"
            )
        return self.revisions[revision_id]

    @cached_property
    def _file_revisions(self) -> np.ndarray:
        ids: np.ndarray = self.files.column("revision_id").to_numpy(zero_copy_only=False).astype(np.int64)
        return ids

    @cached_property
    def _block_revisions(self) -> np.ndarray:
        if self.blocks.num_rows == 0:
            return np.zeros(0, dtype=np.int64)
        ids: np.ndarray = self.blocks.column("revision_id").to_numpy(zero_copy_only=False).astype(np.int64)
        return ids

    def file_indices_of_revision(self, revision_id: int) -> np.ndarray:
        """Row indices into `files` of the files of one revision (0 = staging)."""
        return np.flatnonzero(self._file_revisions == revision_id)

    def files_of_revision(self, revision_id: int) -> pa.Table:
        """The rows of `files` of one revision (0 = staging files), in `files` order."""
        return self.files.take(pa.array(self.file_indices_of_revision(revision_id), pa.int64()))

    def blocks_of_revision(self, revision_id: int) -> pa.Table:
        """The rows of `blocks` of one revision; `file_index` still points into `files`."""
        rows = np.flatnonzero(self._block_revisions == revision_id)
        return self.blocks.take(pa.array(rows, pa.int64()))

    def status_blocks_of_revision(self, revision_id: int) -> pa.Table:
        """The blocks a revision's cube statuses fold (§3.0): those holding rows and the empty ones
        recording a weight (`use.qbeast.weight_records`)."""
        blocks = self.blocks_of_revision(revision_id)
        if self.empty_blocks.num_rows == 0:
            return blocks
        empty = self.empty_blocks.filter(pc.equal(self.empty_blocks.column("revision_id"), revision_id))
        return pa.concat_tables([blocks, empty]) if empty.num_rows else blocks

    def staging_files(self) -> pa.Table:
        return self.files_of_revision(0)

    def index_status(self, revision_id: int | None = None) -> IndexStatus:
        """Cube statuses of a revision (the latest by default)."""
        rid = self.latest_revision_id if revision_id is None else revision_id
        return IndexStatus.from_blocks(self.revision(rid), self.status_blocks_of_revision(rid))

    def __repr__(self) -> str:
        return (
            f"QbeastSnapshot(table_root={self.table_root!r}, version={self.version}, revisions={sorted(self.revisions)}, "
            f"files={self.files.num_rows}, blocks={self.blocks.num_rows})"
        )


def _with_revision_id(files: pa.Table) -> pa.Table:
    if "revision_id" in files.column_names:
        col = files.column("revision_id")
        if col.type != pa.int64():
            files = files.set_column(files.column_names.index("revision_id"), "revision_id", pc.cast(col, pa.int64()))
        return files
    return files.append_column("revision_id", revision_ids(files))
