"""Synthetic snapshots for the pure optimization tests, built with `QbeastSnapshot.from_tables`."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa

from use.qbeast.revision import Revision, configuration_with_revision, staging_revision
from use.qbeast.snapshot import QbeastSnapshot
from use.qbeast.transform import LinearTransformation
from use.qbeast.transformers import LinearTransformer

MIN_W = -(2**31)
MAX_W = 2**31 - 1

BLOCK_SCHEMA = pa.schema(
    [
        ("file_index", pa.int64()),
        ("revision_id", pa.int64()),
        ("cube_id", pa.string()),
        ("depth", pa.int32()),
        ("min_weight", pa.int32()),
        ("max_weight", pa.int32()),
        ("element_count", pa.int64()),
    ]
)


def files_table(
    paths: Sequence[str],
    sizes: Sequence[int],
    *,
    mtimes: Sequence[int] | None = None,
    revisions: Sequence[int] | None = None,
    partitions: Sequence[Mapping[str, str | None]] | None = None,
    stats: Sequence[str | None] | None = None,
) -> pa.Table:
    n = len(paths)
    return pa.table(
        {
            "path": pa.array(list(paths), pa.string()),
            "size": pa.array(list(sizes), pa.int64()),
            "modification_time": pa.array(list(mtimes) if mtimes is not None else [0] * n, pa.int64()),
            "data_change": pa.array([True] * n, pa.bool_()),
            "stats": pa.array(list(stats) if stats is not None else [None] * n, pa.string()),
            "tags": pa.array([None] * n, pa.map_(pa.string(), pa.string())),
            "partition_values": pa.array(
                [list((partitions[i] if partitions else {}).items()) for i in range(n)], pa.map_(pa.string(), pa.string())
            ),
            "deletion_vector": pa.array(
                [None] * n,
                pa.struct([("storageType", pa.string()), ("pathOrInlineDv", pa.string()), ("sizeInBytes", pa.int32()), ("cardinality", pa.int64())]),
            ),
            "revision_id": pa.array(list(revisions) if revisions is not None else [0] * n, pa.int64()),
        }
    )


def blocks_table(rows: Iterable[tuple[int, int, str, int, int, int, int]]) -> pa.Table:
    """rows: (file_index, revision_id, cube_id, depth, min_weight, max_weight, element_count)."""
    rows = list(rows)
    cols = list(zip(*rows)) if rows else [[] for _ in BLOCK_SCHEMA]
    return pa.table({f.name: pa.array(list(c), f.type) for f, c in zip(BLOCK_SCHEMA, cols)})


def revision(rid: int, column: str = "x") -> Revision:
    return Revision(
        rid, 1000 + rid, "test_table", 100,
        (LinearTransformer(column, "IntegerDataType"),),
        (LinearTransformation(0, 1000, 0, "IntegerDataType"),),
    )  # fmt: skip


def qbeast_snapshot(
    files: pa.Table,
    blocks: pa.Table | Iterable[tuple[Any, ...]],
    *,
    revision_ids: Sequence[int] = (1,),
    version: int = 7,
    schema: pa.Schema | None = None,
) -> QbeastSnapshot:
    """A Qbeast table with revisions 0 (staging) and `revision_ids`; staging files get their root block."""
    if not isinstance(blocks, pa.Table):
        blocks = blocks_table(blocks)
    config: dict[str, str] = {}
    revisions: dict[int, Revision] = {0: staging_revision("test_table", ["x"], 100, 999)}
    for rid in revision_ids:
        rev = revision(rid)
        config = configuration_with_revision(config, rev)
        revisions[rid] = rev
    return QbeastSnapshot.from_tables(
        files=files,
        blocks=blocks,
        revisions=revisions,
        version=version,
        table_root="/tmp/synthetic",
        configuration=config,
        schema=schema or pa.schema([("x", pa.int32())]),
    )


def delta_snapshot(files: pa.Table, *, version: int = 3, schema: pa.Schema | None = None) -> QbeastSnapshot:
    return QbeastSnapshot.from_tables(
        files=files,
        blocks=blocks_table([]),
        revisions={},
        version=version,
        table_root="/tmp/synthetic",
        configuration={},
        schema=schema or pa.schema([("id", pa.int64())]),
    )


def stats_json(column: str, lo: Any, hi: Any, n: int = 10) -> str:
    return json.dumps({"numRecords": n, "minValues": {column: lo}, "maxValues": {column: hi}, "nullCount": {column: 0}})
