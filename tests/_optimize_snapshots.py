"""Synthetic snapshots for the pure optimization tests, built with `QbeastSnapshot.from_tables`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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
                pa.struct(
                    [
                        ("storageType", pa.string()),
                        ("pathOrInlineDv", pa.string()),
                        ("sizeInBytes", pa.int32()),
                        ("cardinality", pa.int64()),
                    ]
                ),
            ),
            "revision_id": pa.array(list(revisions) if revisions is not None else [0] * n, pa.int64()),
        }
    )


def blocks_table(rows: Iterable[tuple[int, int, str, int, int, int, int]]) -> pa.Table:
    """rows: (file_index, revision_id, cube_id, depth, min_weight, max_weight, element_count)."""
    rows = list(rows)
    cols = list(zip(*rows, strict=False)) if rows else [[] for _ in BLOCK_SCHEMA]
    return pa.table({f.name: pa.array(list(c), f.type) for f, c in zip(BLOCK_SCHEMA, cols, strict=False)})


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


# --- a pure stand-in for the executor, to optimize synthetic snapshots until done -----------------------


def apply_task(snap: QbeastSnapshot, task: Any) -> QbeastSnapshot:
    """The snapshot after `task`'s rewrite, as the real executor would leave its metadata (one commit):
    the task's files are replaced by one output file of their bytes. A compaction keeps one block
    per cube (elements summed, weight range the union); indexing puts the rows in one root block of
    the latest revision; a binpack keeps the partition and merges the key stats (min of mins, max of
    maxes). Offsets moving into child cubes and sampling separation are not modelled."""
    files = snap.files.to_pylist()
    blocks = snap.blocks.to_pylist()
    by_path = {f["path"]: i for i, f in enumerate(files)}
    taken = {by_path[p] for p in task.paths}
    keep = [i for i in range(len(files)) if i not in taken]
    remap = {old: new for new, old in enumerate(keep)}
    out_files = [files[i] for i in keep]
    out_blocks = [{**b, "file_index": remap[b["file_index"]]} for b in blocks if b["file_index"] in remap]
    new_index = len(out_files)
    merged = [b for b in blocks if b["file_index"] in taken]
    size = sum(files[i]["size"] for i in taken)
    revision_id = max(task.revision_id, 0)
    stats = None
    if task.kind == "index":
        revision_id = max(r for r in snap.revisions)
        merged_blocks = [(new_index, revision_id, "", 0, MIN_W, MAX_W, sum(b["element_count"] for b in merged))]
    elif task.kind == "compact":
        cubes: dict[str, list[dict[str, Any]]] = {}
        for b in merged:
            cubes.setdefault(b["cube_id"], []).append(b)
        merged_blocks = [
            (new_index, revision_id, c, bs[0]["depth"], min(b["min_weight"] for b in bs), max(b["max_weight"] for b in bs),
             sum(b["element_count"] for b in bs))
            for c, bs in sorted(cubes.items())
        ]  # fmt: skip
    else:
        count = sum(b["element_count"] for b in merged)
        merged_blocks = [(new_index, revision_id, "", 0, MIN_W, MAX_W, count)] if snap.is_qbeast else []
        parsed = [json.loads(files[i]["stats"]) for i in taken if files[i]["stats"]]
        if parsed and len(parsed) == len(taken):
            col = next(iter(parsed[0]["minValues"]))
            stats = stats_json(col, min(s["minValues"][col] for s in parsed), max(s["maxValues"][col] for s in parsed),
                               sum(s["numRecords"] for s in parsed))  # fmt: skip
    out_files.append({
        **files[min(taken)], "path": f"v{snap.version + 1}-{task.paths[0]}", "size": size, "stats": stats,
        "modification_time": snap.version + 1, "data_change": False, "revision_id": revision_id,
        "partition_values": list(task.partition_values),
    })  # fmt: skip
    out_blocks += [dict(zip(BLOCK_SCHEMA.names, b, strict=False)) for b in merged_blocks]
    return dataclasses.replace(
        snap,
        version=snap.version + 1,
        files=pa.Table.from_pylist(out_files, schema=snap.files.schema),
        blocks=pa.Table.from_pylist(out_blocks, schema=snap.blocks.schema),
    )


def appended_qbeast(
    appends: int = 4,
    *,
    inner: Sequence[str] = ("A", "Q", "g", "w"),
    root_rows: int = 25,
    inner_rows: int = 25,
    leaf_rows: int = 6,
    bytes_per_row: int = 20,
    with_staging: int = 0,
) -> QbeastSnapshot:
    """The layout `appends` indexed appends leave (desiredCubeSize 100): per append, a small file with
    the root's block and, per inner cube of depth 1, a file with its block and four leaf blocks
    (depth 2). Every cube is thus split over `appends` files. `with_staging` adds staging files."""
    paths, sizes, mtimes, revs, rows = [], [], [], [], []
    w_root, w_inner = weight_at(0.25), weight_at(0.5)
    for a in range(appends):
        paths.append(f"a{a}-root")
        sizes.append(root_rows * bytes_per_row + a)
        rows.append((len(paths) - 1, 1, "", 0, MIN_W, w_root, root_rows))
        for c in inner:
            paths.append(f"a{a}-{c}")
            sizes.append((inner_rows + 4 * leaf_rows) * bytes_per_row + a)
            i = len(paths) - 1
            rows.append((i, 1, c, 1, w_root, w_inner, inner_rows))
            rows += [(i, 1, c + leaf, 2, w_inner, MAX_W, leaf_rows) for leaf in "AQgw"]
        mtimes += [a] * (1 + len(inner))
        revs += [1] * (1 + len(inner))
    for s in range(with_staging):
        paths.append(f"staging-{s}")
        sizes.append(100 * bytes_per_row)
        mtimes.append(appends + s)
        revs.append(0)
        rows.append((len(paths) - 1, 0, "", 0, MIN_W, MAX_W, 100))
    return qbeast_snapshot(files_table(paths, sizes, mtimes=mtimes, revisions=revs), rows)


def drifting_qbeast(revisions: int = 3, appends_per_revision: int = 2) -> QbeastSnapshot:
    """The layout drifting appends leave: `revisions` indexed revisions (each containing the ones
    before: the same space here), each with `appends_per_revision` appended files of a root block and
    one inner cube block, so the older revisions' files sit beside the latest's."""
    paths, sizes, mtimes, revs, rows = [], [], [], [], []
    for r in range(1, revisions + 1):
        for a in range(appends_per_revision):
            i = len(paths)
            paths.append(f"r{r}-a{a}")
            sizes.append(600 + 10 * r + a)
            mtimes.append(10 * r + a)
            revs.append(r)
            rows.append((i, r, "", 0, MIN_W, weight_at(0.25), 25))
            rows.append((i, r, "A", 1, weight_at(0.25), MAX_W, 5))
    return qbeast_snapshot(
        files_table(paths, sizes, mtimes=mtimes, revisions=revs), rows, revision_ids=tuple(range(1, revisions + 1))
    )


def weight_at(f: float) -> int:
    """Weight(f): the weight below which a `sample(f)` keeps a row."""
    from use.qbeast.weight import weight_from_fraction

    return int(weight_from_fraction(f))


def overlapping_delta(n: int = 12, *, width: int = 30, step: int = 10, size: int = 100, partitions: int = 1) -> QbeastSnapshot:
    """A plain Delta table of `n` files whose `id` ranges overlap (file i covers [i*step, i*step+width]),
    spread round-robin over `partitions` partitions."""
    parts = [{"p": str(i % partitions)} for i in range(n)] if partitions > 1 else None
    files = files_table(
        [f"f{i:03d}" for i in range(n)], [size + i for i in range(n)], mtimes=list(range(n)), partitions=parts,
        stats=[stats_json("id", i * step, i * step + width) for i in range(n)],
    )  # fmt: skip
    return delta_snapshot(files)
