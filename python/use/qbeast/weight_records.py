"""Every weight the format's sampling walk trusts is recorded by a block (qbeast-format §2.3, §3.0, §5.2).

qbeast-spark's reader selects a sample's cubes with the spec's walk (§5.2): from the root, a cube
whose status maxWeight (the smallest maxWeight of its blocks, §3.0) is at least the sample's weight
ends the descent, because every row below it is taken to be heavier than that weight. A table is
exact for that reader only while, for every cube with rows below it, the cube has a block and its
status is below the lightest of those rows. Writes broke it three ways:

* an append lowers a cube's maxWeight (`min(existing, estimate)`, `use.qbeast.estimate`, as
  upstream re-estimates) and routes rows by the lower weight; when none of its rows lands in the
  cube (a low-cardinality column: the cube's lightest new rows tie just above the new weight), no
  block records it, and rows lighter than the old weight sit below a cube whose status still says
  old (two appends of 200 and 500 rows, cube size 10: sample(0.1) missed 6 of its 73 rows);
* a rewrite (an optimization, a DELETE/UPDATE/MERGE moving rows to staging) removes the block that
  held a cube's smallest maxWeight while rows below the cube stay: its status rises above them;
* rows pass a cube that holds no block at all (every row of the write in its region was heavier than
  its weight). The walk goes through such a cube, but both optimizers (qbeast-spark's and ours,
  `use.qbeast.estimate.assign_cubes`) stop a row at the first cube without a status, so a rewrite of
  some of its descendants' files made it a leaf above the others, and the walk then stopped there.

The choice: such a cube gets a block that holds no row and records the weight,
`{"cubeId": c, "minWeight": MaxValue, "maxWeight": w, "elementCount": 0}`, in a file of the same
commit (the file holding the lightest rows below the cube), or, when the commit writes no file of
that revision (a DELETE into staging), in a file of the revision that stays, re-added with the extra
block (same path, size and stats, `dataChange=false`, as a relabel re-tags files; the commit reads
it, so a concurrent commit that removed it fails this one). An empty block is what qbeast-spark's
own writer starts every block from (`BlockStats`: elementCount 0, minWeight MaxValue, the minimum of
no rows), and 0.7.1 and 0.8 take it as is: their block parser accepts exactly these fields, their
index status folds its maxWeight into the cube's (the minimum) and its count into the sum (0), their
reader never lists a file for it (its filter `weightTo > minWeight` fails at MaxValue), and their
optimizer places rows by that status and writes blocks only for cubes that receive rows, so a
rewrite of its file drops it with the cube's rows placed below it. We rejected the other way (never
lower a weight no block records, routing the append by the existing weight where it writes no row
into the cube): restoring one weight moves rows into that cube and out of its children, so the
routing would have to be iterated to a fixed point on every write, cubes would stay above
desiredCubeSize, and the two rewrite cases would stay open.

The weight recorded is the smallest of what the cube must keep: the weight this commit routed its
rows past it by, its status before the commit (a rewrite must not raise it while rows stay below),
and one below the lightest row under it (which also repairs a cube left too high by an older write
on the paths a commit touches). Only cubes whose status or subtree the commit changes are examined:
the cubes of its blocks with their ancestors, and the cubes of the blocks it removes.

USE reads a table's empty blocks apart (`QbeastSnapshot.empty_blocks`): they count in a cube's
status maxWeight (the index status, the writer's existing weights, the strategies' and insights'
status weights), never as rows, blocks, fragments or cubes (metrics, insights, the optimizer's gains
and its per-task blocks), and the reader never lists a file for them. Pure: block tables and
`AddFile`s in, `AddFile`s out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.delta.actions import AddFile, add_actions, add_files_table
from use.qbeast.blocks import BLOCKS_TAG, Block, block_table, blocks_json, empty_block_table
from use.qbeast.cube import symbols_per_level
from use.qbeast.weight import MAX_WEIGHT, MIN_WEIGHT

if TYPE_CHECKING:
    from use.qbeast.revision import Revision
    from use.qbeast.snapshot import QbeastSnapshot

__all__ = ["EMPTY_BLOCK_MIN_WEIGHT", "WeightRecord", "empty_block_mask", "record_weights", "revision_records", "split_empty"]

EMPTY_BLOCK_MIN_WEIGHT = MAX_WEIGHT
"""An empty block's minWeight: the minimum over no rows, as qbeast-spark's `BlockStats` starts a block."""


def empty_block_mask(blocks: pa.Table) -> np.ndarray:
    """Blocks that hold no row by their own account: elementCount 0 and a minWeight above the
    maxWeight (every row of a block weighs between the two). A staging file's root block without
    stats (count 0, the full weight range) is not one."""
    if blocks.num_rows == 0:
        return np.zeros(0, dtype=bool)
    count = np.asarray(blocks.column("element_count").to_numpy(zero_copy_only=False), dtype=np.int64)
    lo = np.asarray(blocks.column("min_weight").to_numpy(zero_copy_only=False), dtype=np.int64)
    hi = np.asarray(blocks.column("max_weight").to_numpy(zero_copy_only=False), dtype=np.int64)
    empty: np.ndarray = (count == 0) & (lo > hi)
    return empty


def split_empty(blocks: pa.Table) -> tuple[pa.Table, pa.Table]:
    """`blocks` as (the blocks holding rows, the empty blocks recording a weight)."""
    empty = empty_block_mask(blocks)
    if not empty.any():
        return blocks, empty_block_table()
    return blocks.filter(pa.array(~empty)), blocks.filter(pa.array(empty))


@dataclass(frozen=True)
class WeightRecord:
    """An empty block to write: `cube` of revision `revision_id` records `weight`, in the commit's
    add at position `host` (`added`), or in the snapshot's file at row `host`, re-added."""

    revision_id: int
    cube: str
    weight: int
    host: int
    added: bool


def _column(blocks: pa.Table, name: str) -> np.ndarray:
    return np.asarray(blocks.column(name).to_numpy(zero_copy_only=False), dtype=np.int64)


def _cubes(blocks: pa.Table) -> pa.Array:
    col = blocks.column("cube_id")
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _lightest_below(blocks: pa.Table, candidates: set[str], spl: int) -> dict[str, tuple[int, int]]:
    """Per candidate cube: the smallest minWeight of the `blocks` strictly below it, and the
    `file_index` of a block holding it; one vectorized pass per tree level."""
    out: dict[str, tuple[int, int]] = {}
    if blocks.num_rows == 0 or not candidates:
        return out
    cubes = _cubes(blocks)
    lengths = np.asarray(pc.utf8_length(cubes).to_numpy(zero_copy_only=False), dtype=np.int64)
    weights, files = _column(blocks, "min_weight"), _column(blocks, "file_index")
    by_length: dict[int, list[str]] = {}
    for c in candidates:
        by_length.setdefault(len(c), []).append(c)
    for width, wanted in sorted(by_length.items()):
        deeper = np.flatnonzero(lengths > width)
        if deeper.size == 0:
            continue
        prefix = pc.utf8_slice_codeunits(cubes.take(pa.array(deeper, pa.int64())), 0, width)
        code = np.asarray(pc.index_in(prefix, value_set=pa.array(wanted, pa.string())).fill_null(-1), dtype=np.int64)
        hit = code >= 0
        if not hit.any():
            continue
        rows, code = deeper[hit], code[hit]
        lightest = np.full(len(wanted), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(lightest, code, weights[rows])
        at_min = weights[rows] == lightest[code]
        found, first = np.unique(code[at_min], return_index=True)
        for k, r in zip(found.tolist(), rows[at_min][first].tolist(), strict=True):
            out[wanted[k]] = (int(weights[r]), int(files[r]))
    return out


def _status(blocks: pa.Table, candidates: set[str]) -> dict[str, int]:
    """The status maxWeight (smallest block maxWeight) of each candidate cube that has blocks."""
    if blocks.num_rows == 0:
        return {}
    mine = blocks.filter(pc.is_in(blocks.column("cube_id"), value_set=pa.array(sorted(candidates), pa.string())))
    if mine.num_rows == 0:
        return {}
    grouped = mine.group_by("cube_id").aggregate([("max_weight", "min")])
    return dict(zip(grouped.column("cube_id").to_pylist(), grouped.column("max_weight_min").to_pylist(), strict=True))


def revision_records(
    revision_id: int,
    dimensions: int,
    kept: pa.Table,
    removed: pa.Table,
    added: pa.Table,
    *,
    previous: bool = True,
    routing: Mapping[str, int] | None = None,
    rehostable: np.ndarray | None = None,
) -> list[WeightRecord]:
    """The empty blocks one commit must write for one revision (module docstring).

    `kept`: the revision's blocks (empty ones included) of the snapshot's files the commit leaves in
    place, `file_index` their row in the snapshot's files; `removed`: those of the files it removes
    or re-adds; `added`: the blocks of its adds, `file_index` the add's position. `previous`: the
    statuses of `kept` and `removed` still describe this revision (False for an overwrite, whose
    revision starts afresh). `routing`: the cube maxWeights the commit placed its rows by (None for
    a rewrite by the statuses). `rehostable[i]`: the snapshot's file at row i may be re-added to
    carry a record (no deletion vector); None: none may.
    """
    spl = symbols_per_level(dimensions)
    kept_rows, kept_empty = split_empty(kept)
    added_rows, added_empty = split_empty(added)
    candidates: set[str] = set()
    for cube in pc.unique(_cubes(added_rows)).to_pylist() if added_rows.num_rows else ():
        candidates.update(cube[:end] for end in range(0, len(cube) + 1, spl))
    if removed.num_rows:
        candidates.update(pc.unique(_cubes(removed)).to_pylist())
    if not candidates:
        return []
    below_added = _lightest_below(added_rows, candidates, spl)
    below_kept = _lightest_below(kept_rows, candidates, spl)
    after = _status(pa.concat_tables([kept_rows, kept_empty, added_rows, added_empty]), candidates)
    before = _status(pa.concat_tables([kept, removed]), candidates) if previous else {}
    own_add: dict[str, int] = {}
    if added_rows.num_rows:
        for cube, fi in zip(_cubes(added_rows).to_pylist(), _column(added_rows, "file_index").tolist(), strict=True):
            own_add.setdefault(cube, fi)
    any_add = int(_column(added, "file_index").min()) if added.num_rows else None
    kept_files = np.unique(_column(kept_rows, "file_index")) if kept_rows.num_rows else np.zeros(0, dtype=np.int64)
    any_kept = next((int(f) for f in kept_files.tolist() if rehostable is not None and rehostable[f]), None)
    out: list[WeightRecord] = []
    for cube in sorted(candidates):
        lightest = [x for x in (below_added.get(cube), below_kept.get(cube)) if x is not None]
        if not lightest:
            continue  # no row below: the walk loses nothing by stopping here
        bounds = [max(MIN_WEIGHT, min(w for w, _ in lightest) - 1)]
        if cube in before:
            bounds.append(int(before[cube]))
        if routing is not None and cube in routing and cube in below_added:
            bounds.append(int(routing[cube]))
        target = min(bounds)
        status = after.get(cube)
        if status is not None and int(status) <= target:
            continue
        kept_host = below_kept.get(cube)
        if cube in below_added:
            out.append(WeightRecord(revision_id, cube, target, below_added[cube][1], True))
        elif cube in own_add:
            out.append(WeightRecord(revision_id, cube, target, own_add[cube], True))
        elif kept_host is not None and rehostable is not None and rehostable[kept_host[1]]:
            out.append(WeightRecord(revision_id, cube, target, kept_host[1], False))
        elif any_add is not None:
            out.append(WeightRecord(revision_id, cube, target, any_add, True))
        elif any_kept is not None:
            out.append(WeightRecord(revision_id, cube, target, any_kept, False))
        # else: no file of this revision can carry it (every one that stays has a deletion vector)
    return out


def _with_records(tags: Mapping[str, str] | None, records: Sequence[WeightRecord]) -> dict[str, str]:
    out = dict(tags or {})
    blocks = json.loads(out.get(BLOCKS_TAG) or "[]")
    blocks.extend(Block(r.cube, EMPTY_BLOCK_MIN_WEIGHT, r.weight, 0).to_json_obj() for r in records)
    out[BLOCKS_TAG] = json.dumps(blocks, separators=(",", ":"), ensure_ascii=False) if blocks else blocks_json(())
    return out


def record_weights(
    qsnap: QbeastSnapshot | None,
    adds: Sequence[AddFile],
    removed_paths: Iterable[str] | pa.Array | pa.ChunkedArray = (),
    *,
    revisions: Mapping[int, Revision] | None = None,
    routing: Mapping[str, int] | None = None,
    fresh: bool = False,
) -> tuple[list[AddFile], list[AddFile]]:
    """A commit's adds with the empty blocks it must write, and the snapshot's files it must re-add
    to carry them (module docstring); a commit that changes no indexed revision gets its adds back.

    `qsnap`: the snapshot the commit was planned on (None: a new table); `removed_paths`: the files
    it removes (an add of a path already in the snapshot replaces that file too); `revisions`: the
    revisions after the commit (default: the snapshot's); `routing`: the cube maxWeights its new
    rows were placed by, in the revision of its adds; `fresh`: an overwrite (the snapshot's index
    no longer holds). The caller commits the re-added files reading them (`Transaction.read_files`).
    """
    revs = dict(revisions if revisions is not None else (qsnap.revisions if qsnap is not None else {}))
    if not any(r > 0 for r in revs):
        return list(adds), []  # a plain Delta table, or only the staging revision: no tree
    added = block_table(add_files_table(list(adds)), revs) if adds else empty_block_table()
    if qsnap is not None and qsnap.files.num_rows:
        paths = qsnap.files.column("path")
        gone = pc.is_in(paths, value_set=pa.array([*_strings(removed_paths), *(a.path for a in adds)], pa.string()))
        gone_rows = np.asarray(gone.to_numpy(zero_copy_only=False), dtype=bool)
        old = pa.concat_tables([qsnap.blocks, qsnap.empty_blocks])
        old_gone = gone_rows[_column(old, "file_index")] if old.num_rows else np.zeros(0, dtype=bool)
        dv = qsnap.files.column("deletion_vector") if "deletion_vector" in qsnap.files.column_names else None
        no_dv = np.ones(gone_rows.size, dtype=bool) if dv is None else np.asarray(dv.is_null(), dtype=bool)
        rehostable = ~gone_rows & no_dv
    else:
        old, old_gone, rehostable = empty_block_table(), np.zeros(0, dtype=bool), None
    touched = set(_column(added, "revision_id").tolist()) | set(_column(old, "revision_id")[old_gone].tolist())
    records: list[WeightRecord] = []
    for rid in sorted(r for r in touched if r > 0 and r in revs):
        mine_old = _column(old, "revision_id") == rid if old.num_rows else np.zeros(0, dtype=bool)
        mine_new = _column(added, "revision_id") == rid if added.num_rows else np.zeros(0, dtype=bool)
        records.extend(
            revision_records(
                rid,
                revs[rid].dimension_count,
                old.filter(pa.array(mine_old & ~old_gone)) if not fresh else empty_block_table(),
                old.filter(pa.array(mine_old & old_gone)),
                added.filter(pa.array(mine_new)),
                previous=not fresh,
                routing=routing,
                rehostable=None if fresh else rehostable,
            )
        )
    if not records:
        return list(adds), []
    out = list(adds)
    for i in sorted({r.host for r in records if r.added}):
        out[i] = replace(out[i], tags=_with_records(out[i].tags, [r for r in records if r.added and r.host == i]))
    hosts = sorted({r.host for r in records if not r.added})
    readds: list[AddFile] = []
    if hosts and qsnap is not None:
        files = qsnap.files.take(pa.array(hosts, pa.int64()))
        old_tags = files.column("tags").to_pylist()
        tags = [
            _with_records(dict(t or []), [r for r in records if not r.added and r.host == h])
            for h, t in zip(hosts, old_tags, strict=True)
        ]
        readds = add_actions(files, data_change=False, tags=tags)
    return out, readds


def _strings(values: Iterable[str] | pa.Array | pa.ChunkedArray) -> list[str]:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return [str(v) for v in values.to_pylist()]
    return [str(v) for v in values]
