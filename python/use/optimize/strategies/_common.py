"""Vectorized helpers shared by the strategies (numpy/pyarrow over the snapshot tables).

Scores. Every task carries `score` = estimated read cost saved per byte rewritten, in a common unit
(bytes of read work saved per byte of rewrite IO), so tasks of different strategies can be ranked
together (Relyt's scheduling weight). The read-cost model is Amoro's/Spark's: reading a set of files
costs its bytes plus `open_file_cost` (default 4 MiB, Spark's `openCostInBytes`) per file.

* merging n_in files into n_out = ceil(bytes / max_file_size) files (compact, binpack, small files):
  `open_file_cost * (n_in - n_out) / bytes`: the open cost of the files that disappear, per byte;
* indexing staging files: `1 + open_file_cost * (n_in - n_out) / bytes`: staging files are read in
  full by every query (no cube or sample pruning), so each indexed byte is assumed to save about one
  byte of reading per query, plus the merge term; index tasks therefore outrank pure compaction;
* sampling overhead: `overhead_bytes / bytes`, the bytes a `sample(f)` reads needlessly (see
  sampling.py) per byte rewritten;
* cluster-key overlap: `(depth - 1) * (open_file_cost + bytes / n_in) / bytes`: a lookup inside the
  overlapped key range reads `depth` files before and one after the merge.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.delta.datafile import timestamp_partition_columns
from use.delta.skipping import utc_timestamp_texts
from use.optimize.plan import (
    KIND_BINPACK,
    KIND_COMPACT,
    KIND_INDEX,
    PLAIN_DELTA_REVISION,
    REVISION_REWRITE_TAG,
    MergeTask,
    PartitionValues,
    Plan,
)
from use.qbeast.cube import SYMBOLS, symbols_per_level
from use.qbeast.weight import MAX_WEIGHT

if TYPE_CHECKING:
    from use.optimize.config import OptimizationConfig

_POPCOUNT = np.array([bin(i).count("1") for i in range(64)], dtype=np.int64)

# 10^0 .. 10^18: file levels by exact integer comparison (no float log10 rounding at 10^15+).
_POW10 = np.array([10**i for i in range(19)], dtype=np.int64)


def levels_of(counts: np.ndarray) -> np.ndarray:
    """floor(log10(count)) for counts >= 1, computed exactly; -1 for counts <= 0."""
    return np.searchsorted(_POW10, np.asarray(counts, dtype=np.int64), side="right").astype(np.int64) - 1


def sizes_of(snapshot: Any) -> np.ndarray:
    return np.asarray(snapshot.files.column("size").to_numpy(zero_copy_only=False), dtype=np.int64)


def revision_ids_of(snapshot: Any) -> np.ndarray:
    files: pa.Table = snapshot.files
    if "revision_id" not in files.column_names:
        return np.zeros(files.num_rows, dtype=np.int64)
    return np.asarray(files.column("revision_id").fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)


def target_revision(snapshot: Any, config: OptimizationConfig) -> int:
    """The revision an indexed-revision strategy works on: the configured one, else the latest."""
    rid = config.target_revision_id
    return int(snapshot.latest_revision_id) if rid is None else int(rid)


@dataclass(frozen=True, eq=False)
class RevisionBlocks:
    """The blocks of one revision as numpy columns, with their cubes dictionary-encoded.

    Per block: `file` (row in `snapshot.files`), `code` (index into `cubes`), `count`, `min_weight`,
    `max_weight`, `depth`. Per cube (by code), derived on demand: totals, status maxWeight (the
    smallest block maxWeight, as the index status), depth, sort rank and the parent's code. Only
    the distinct cubes ever become Python strings.
    """

    file: np.ndarray
    code: np.ndarray
    count: np.ndarray
    min_weight: np.ndarray
    max_weight: np.ndarray
    depth: np.ndarray
    cubes: pa.Array
    symbols_per_level: int
    # per cube (by code): the smallest maxWeight of its empty blocks (`use.qbeast.weight_records`),
    # which hold no row but lower its status; MAX_WEIGHT when it has none
    recorded_weight: np.ndarray | None = None

    @classmethod
    def of(cls, snapshot: Any, revision_id: int) -> RevisionBlocks:
        blocks: pa.Table = snapshot.blocks
        rid = np.asarray(blocks.column("revision_id").to_numpy(zero_copy_only=False), dtype=np.int64)
        mask = rid == revision_id

        def col(name: str) -> np.ndarray:
            values: np.ndarray = np.asarray(blocks.column(name).to_numpy(zero_copy_only=False), dtype=np.int64)[mask]
            return values

        cube_col = blocks.column("cube_id")
        cube_col = cube_col.filter(pa.array(mask)) if not mask.all() else cube_col
        if isinstance(cube_col, pa.ChunkedArray):
            cube_col = cube_col.combine_chunks()
        enc = pc.dictionary_encode(cube_col)
        revision = snapshot.revisions.get(revision_id)
        spl = symbols_per_level(revision.dimension_count) if revision is not None and revision_id > 0 else 1
        recorded = None
        empty: pa.Table | None = getattr(snapshot, "empty_blocks", None)
        if empty is not None and empty.num_rows:
            empty = empty.filter(pc.equal(empty.column("revision_id"), revision_id))
            where = np.asarray(pc.index_in(empty.column("cube_id"), value_set=enc.dictionary).fill_null(-1), dtype=np.int64)
            if (where >= 0).any():
                recorded = np.full(len(enc.dictionary), MAX_WEIGHT, dtype=np.int64)
                weights = np.asarray(empty.column("max_weight").to_numpy(zero_copy_only=False), dtype=np.int64)
                np.minimum.at(recorded, where[where >= 0], weights[where >= 0])
        return cls(
            file=col("file_index"),
            code=np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64),
            count=col("element_count"),
            min_weight=col("min_weight"),
            max_weight=col("max_weight"),
            depth=col("depth"),
            cubes=enc.dictionary,
            symbols_per_level=spl,
            recorded_weight=recorded,
        )

    @property
    def size(self) -> int:
        return int(self.file.size)

    @property
    def num_cubes(self) -> int:
        return len(self.cubes)

    def cube_name(self, code: int) -> str:
        return str(self.cubes[int(code)].as_py())

    def file_max_counts(self, num_files: int) -> np.ndarray:
        """Per file row: the largest block elementCount (0 for files without blocks here)."""
        out = np.zeros(num_files, dtype=np.int64)
        if self.file.size:
            np.maximum.at(out, self.file, self.count)
        return out

    def cube_totals(self) -> np.ndarray:
        return np.bincount(self.code, weights=self.count, minlength=self.num_cubes).astype(np.int64)

    @cached_property
    def _cube_depth(self) -> np.ndarray:
        out = np.zeros(self.num_cubes, dtype=np.int64)
        out[self.code] = self.depth
        return out

    def cube_depth(self) -> np.ndarray:
        return self._cube_depth

    @cached_property
    def _cube_rank(self) -> np.ndarray:
        out = np.empty(self.num_cubes, dtype=np.int64)
        if self.num_cubes:
            out[pc.sort_indices(self.cubes).to_numpy()] = np.arange(self.num_cubes)
        return out

    def cube_rank(self) -> np.ndarray:
        """Rank of each cube id string (ascending), for deterministic tie-breaking; sorted once per
        RevisionBlocks (a plan's steps each break ties with it)."""
        return self._cube_rank

    def cube_max_weight(self) -> np.ndarray:
        """Status maxWeight per cube: the smallest maxWeight of its blocks, empty ones included (as
        the index status folds them)."""
        out = np.full(self.num_cubes, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(out, self.code, self.max_weight)
        return out if self.recorded_weight is None else np.minimum(out, self.recorded_weight)

    def keeps(self) -> np.ndarray:
        """Per block: does it hold a row its cube keeps (its lightest row at most the cube's status
        maxWeight)? A block that does not holds only offsets: rows written when the cube's weight
        was higher, every one of which a rewrite moves down to the children (`placed_rows` of
        `use.optimize.strategies.consolidation`). It is no fragment of its cube: merging it with
        the cube's other blocks merges nothing, and rewrites the file holding them as it was."""
        keeps: np.ndarray = self.min_weight <= self.cube_max_weight()[self.code]
        return keeps

    def inner_cubes(self, desired_cube_size: int) -> np.ndarray:
        """Per cube: is it an inner cube (status maxWeight below MaxValue, or blocks totalling at least
        `desired_cube_size`: the estimate leaves some inner cubes a little short of it)? Leaves are the
        others: they travel with their parents' files (rollup)."""
        return (self.cube_max_weight() < MAX_WEIGHT) | (self.cube_totals() >= desired_cube_size)

    def sibling_parity(self) -> np.ndarray:
        """Per cube: 1 when its position among its siblings (one bit per dimension: the half of its
        parent it takes along each) has an odd number of set bits, else 0; the root 0.

        A cut through a parent along any one dimension leaves as many children of each parity on
        either side, so a range query crossing siblings crosses both parities: the staggered tiers
        (`use.optimize.strategies.consolidation`) give the two parities different ratios."""
        out = np.zeros(self.num_cubes, dtype=np.int64)
        spl = self.symbols_per_level
        for k in range(spl if self.num_cubes else 0):
            start = k - spl
            symbol = pc.utf8_slice_codeunits(self.cubes, start, start + 1 if start + 1 < 0 else None)
            index = pc.index_in(symbol, value_set=pa.array(list(SYMBOLS))).fill_null(0)
            out ^= _POPCOUNT[np.asarray(index.to_numpy(zero_copy_only=False), dtype=np.int64)] & 1
        return out

    def parent_code(self) -> np.ndarray:
        """Code of each cube's parent among the revision's cubes; -1 for the root or an absent parent."""
        n = self.num_cubes
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        lengths = np.asarray(pc.utf8_length(self.cubes).to_numpy(zero_copy_only=False), dtype=np.int64)
        out = np.full(n, -1, dtype=np.int64)
        # One slice kernel per depth: a cube's parent is its id without the last level's symbols.
        for length in np.unique(lengths[lengths > 0]).tolist():
            rows = np.flatnonzero(lengths == length)
            sub = self.cubes.take(pa.array(rows, pa.int64()))
            parents = pc.utf8_slice_codeunits(sub, 0, max(0, int(length) - self.symbols_per_level))
            found = pc.index_in(parents, value_set=self.cubes).fill_null(-1).to_numpy(zero_copy_only=False)
            out[rows] = np.asarray(found, dtype=np.int64)
        return out


def keeping_blocks(snapshot: Any) -> np.ndarray:
    """`RevisionBlocks.keeps` over every block of `snapshot.blocks` (all revisions at once): the
    block's lightest row is at most its cube's status maxWeight (the smallest maxWeight of the cube's
    blocks, empty ones included). A staging file's root block always keeps."""
    blocks: pa.Table = snapshot.blocks
    if blocks.num_rows == 0:
        return np.zeros(0, dtype=bool)
    empty: pa.Table | None = getattr(snapshot, "empty_blocks", None)
    both = pa.concat_tables([blocks, empty]) if empty is not None and empty.num_rows else blocks
    status = both.group_by(["revision_id", "cube_id"]).aggregate([("max_weight", "min")])
    joined = (
        blocks.select(["revision_id", "cube_id", "min_weight"])
        .append_column("_row", pa.array(np.arange(blocks.num_rows, dtype=np.int64)))
        .join(status, ["revision_id", "cube_id"])
    )
    out = np.zeros(blocks.num_rows, dtype=bool)
    rows = np.asarray(joined.column("_row").to_numpy(zero_copy_only=False), dtype=np.int64)
    lo = np.asarray(joined.column("min_weight").to_numpy(zero_copy_only=False), dtype=np.int64)
    cut = np.asarray(joined.column("max_weight_min").to_numpy(zero_copy_only=False), dtype=np.int64)
    out[rows] = lo <= cut
    return out


def take_prefix(sizes: np.ndarray, budget: int) -> int:
    """How many leading files fit in `budget` bytes (cumulative), but at least one (if any): a
    budget over several tasks or a batch that starts with a file larger than it."""
    if sizes.size == 0:
        return 0
    k = int(np.searchsorted(np.cumsum(sizes), budget, side="right"))
    return min(sizes.size, max(k, 1))


def merge_prefix(sizes: np.ndarray, limit: int) -> int:
    """How many leading files one merge takes within `limit` bytes: at least two (one file alone
    merges nothing), or 0 when the first two already exceed the limit (the merge is not planned: a
    task of several files never exceeds its IO limit)."""
    k = int(np.searchsorted(np.cumsum(sizes), limit, side="right")) if sizes.size else 0
    return k if k >= 2 else 0


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values by one plain sort (numpy's `unique` is several times slower on the
    millions of int64 keys of a large table)."""
    s = np.sort(values)
    return s[np.r_[True, s[1:] != s[:-1]]] if s.size else s


def two_smallest_fit(group: np.ndarray, file: np.ndarray, sizes_all: np.ndarray, ngroups: int, limit: int) -> np.ndarray:
    """Per group (0..ngroups-1): do its two smallest distinct files fit in `limit` bytes together?

    `group`/`file` are parallel (group, file row) pairs, duplicates allowed. A group where they do not
    fit cannot be merged within the IO limit by any task, so strategies skip it. Vectorized over the
    millions of pairs of a large table: the distinct pairs, then one sort by (group, size) packed in a
    single int64 key, then the first two of each group.
    """
    out = np.zeros(ngroups, dtype=bool)
    if group.size == 0:
        return out
    nf = max(1, int(sizes_all.size))
    pair = distinct(group.astype(np.int64) * nf + file)
    g, size = pair // nf, sizes_all[pair % nf]
    scale = int(size.max()) + 1
    if ngroups * scale < 2**62:
        key = np.sort(g * scale + size)
        g, size = key // scale, key % scale
    else:  # pragma: no cover - exabyte files or billions of groups
        order = np.lexsort((size, g))
        g, size = g[order], size[order]
    first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    second = np.minimum(first + 1, g.size - 1)
    ok = (first + 1 < g.size) & (g[second] == g[first]) & (size[first] + size[second] <= limit)
    out[g[first[ok]]] = True
    return out


def io_limit(kind: str, config: OptimizationConfig) -> int:
    """The per-task IO limit of a task kind: `batchBytes` for indexing staging files (the unindexed
    strategy's batch), `task-max-bytes` for every rewrite. A task of several files never exceeds it; a
    single file larger than it forms a task only where rewriting that file alone gains something
    (indexing it, separating its sampled blocks) or was asked for (explicit files, revision rewrite)."""
    return int(config.unindexed_batch_bytes if kind == KIND_INDEX else config.task_limit)


def tag_values(snapshot: Any, idx: np.ndarray, key: str) -> pa.ChunkedArray | pa.Array:
    """`tags[key]` of the files at rows `idx` (null where absent)."""
    files: pa.Table = snapshot.files
    if "tags" not in files.column_names or idx.size == 0:
        return pa.nulls(int(idx.size), pa.string())
    return pc.map_lookup(files.column("tags").take(pa.array(idx, pa.int64())), key, "first")


def chunks(sizes: np.ndarray, cap: int) -> list[tuple[int, int]]:
    """Consecutive greedy chunks of at most `cap` bytes; a file larger than `cap` is a chunk alone.

    One Python step per chunk, not per file: the end of each chunk is a binary search in the
    cumulative sizes.
    """
    if sizes.size == 0:
        return []
    return chunk_ranges(np.cumsum(sizes).tolist(), 0, int(sizes.size), cap)


def chunk_ranges(cs: list[int], a: int, b: int, cap: int) -> list[tuple[int, int]]:
    """`chunks` over positions [a, b) of a prefix-sum list `cs` (global positions returned)."""
    out: list[tuple[int, int]] = []
    i = a
    while i < b:
        base = cs[i - 1] if i else 0
        j = bisect_right(cs, base + cap, i, b)
        j = min(b, max(j, i + 1))
        out.append((i, j))
        i = j
    return out


def output_files(nbytes: int, max_file_size: int) -> int:
    return max(1, -(-int(nbytes) // max(1, int(max_file_size))))


def merge_score(nbytes: int, n_in: int, config: OptimizationConfig) -> float:
    n_out = output_files(nbytes, config.max_file_size)
    return config.open_file_cost * max(0, n_in - n_out) / max(1, nbytes)


def index_score(nbytes: int, n_in: int, config: OptimizationConfig) -> float:
    return 1.0 + merge_score(nbytes, n_in, config)


def paths_of(snapshot: Any, idx: np.ndarray) -> tuple[str, ...]:
    return tuple(snapshot.files.column("path").take(pa.array(idx, pa.int64())).to_pylist())


def sort_files(snapshot: Any, idx: np.ndarray, keys: Sequence[tuple[str, str]]) -> np.ndarray:
    """`idx` (file row indices) reordered by the given (files column, "ascending"/"descending") keys,
    then by path, so every selection is deterministic."""
    if idx.size <= 1:
        return idx
    files: pa.Table = snapshot.files
    cols = {name: files.column(name).take(pa.array(idx, pa.int64())) for name, _ in keys}
    cols["path"] = files.column("path").take(pa.array(idx, pa.int64()))
    t = pa.table({**{f"k{i}": cols[name] for i, (name, _) in enumerate(keys)}, "p": cols["path"]})
    sort_keys = [(f"k{i}", order) for i, (_, order) in enumerate(keys)] + [("p", "ascending")]
    order = pc.sort_indices(t, sort_keys=sort_keys).to_numpy()
    ordered: np.ndarray = idx[order]
    return ordered


def _instant_keys(snapshot: Any) -> frozenset[str]:
    """The `partitionValues` keys of the table's timestamp (with time zone) partition columns
    (`snapshot`: a `use.qbeast.snapshot.QbeastSnapshot`, what the strategies plan on)."""
    columns = tuple(getattr(snapshot, "partition_columns", ()))
    if not columns:
        return frozenset()
    instants = timestamp_partition_columns(snapshot.schema, columns)
    return frozenset(
        k for k, c in zip(getattr(snapshot, "partition_value_keys", columns), columns, strict=False) if c in instants
    )


def partition_groups(snapshot: Any, idx: np.ndarray) -> tuple[np.ndarray, list[PartitionValues]]:
    """Group files `idx` by partition values: (group id per file, partition values per group).

    The map column is turned into one canonical string per file (entries sorted by key, nulls kept
    distinct from empty strings) in a few Arrow kernels, then dictionary-encoded. A timestamp value
    is taken in Delta's UTC ISO form however the log spells it (`use.delta.skipping.utc_timestamp_texts`),
    so files an older USE wrote (`2024-03-10 09:30:00`) and newer ones of the same partition are one
    group, rewritten with the ISO form.
    """
    files: pa.Table = snapshot.files
    n = idx.size
    if n == 0 or "partition_values" not in files.column_names:
        return np.zeros(n, dtype=np.int64), [()]
    pv = files.column("partition_values").take(pa.array(idx, pa.int64())).combine_chunks()
    if isinstance(pv, pa.ChunkedArray):  # pragma: no cover - combine_chunks of a ChunkedArray
        pv = pv.combine_chunks()
    pv = pv.fill_null(pa.scalar([], pv.type)) if pv.null_count else pv
    offsets = np.asarray(pv.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    offsets = offsets - offsets[0]
    if offsets[-1] == 0:
        return np.zeros(n, dtype=np.int64), [()]
    keys = pv.keys
    items = pv.items
    instant_keys = _instant_keys(snapshot)
    if instant_keys:
        items = pc.if_else(
            pc.is_in(keys, value_set=pa.array(sorted(instant_keys), pa.string())), utc_timestamp_texts(items), items
        )
    row = np.repeat(np.arange(n), np.diff(offsets))
    key_codes = pc.dictionary_encode(keys).combine_chunks() if isinstance(keys, pa.ChunkedArray) else pc.dictionary_encode(keys)
    key_rank = np.argsort(np.argsort(np.asarray(key_codes.dictionary.to_pylist(), dtype=object)))
    order = np.lexsort((key_rank[key_codes.indices.to_numpy(zero_copy_only=False)], row))
    entries = pc.binary_join_element_wise(keys, pc.fill_null(items, "\x00<null>"), "\x1f").take(pa.array(order))
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), entries), "\x1e")
    enc = pc.dictionary_encode(joined)
    gids = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    groups: list[PartitionValues] = []
    for text in enc.dictionary.to_pylist():
        d: dict[str, str | None] = {}
        for entry in text.split("\x1e") if text else []:
            k, _, v = entry.partition("\x1f")
            d[k] = None if v == "\x00<null>" else v
        groups.append(tuple(sorted(d.items())))
    return gids, groups


def budget(tasks: list[MergeTask], bytes_per_iter: int) -> list[MergeTask]:
    """The best tasks (by score, stable) whose total stays within one iteration's bytes (>= 1 task)."""
    ranked = sorted(tasks, key=lambda t: -t.score)
    out: list[MergeTask] = []
    total = 0
    for t in ranked:
        if out and total + t.bytes > bytes_per_iter:
            break
        out.append(t)
        total += t.bytes
    return out


def pack_bins(
    snapshot: Any,
    idx: np.ndarray,
    cap: int,
    *,
    strategy: str,
    revision_id: int,
    config: OptimizationConfig,
    reason: str,
    bytes_per_iter: int | None = None,
) -> list[MergeTask]:
    """Delta OPTIMIZE's groupFilesIntoBins over files `idx`: per partition, files sorted by size
    (then log order), packed greedily into bins of at most `cap` bytes; single-file bins are dropped.

    With `bytes_per_iter`, only the best bins (by score) that fit one iteration become tasks: bins are
    ranked as index ranges first, so a table with many bins never builds a task (and its path list)
    per bin.
    """
    if idx.size < 2:
        return []
    sizes_all = sizes_of(snapshot)
    gids, groups = partition_groups(snapshot, idx)
    # Partitions with one candidate cannot form a bin of two: drop them before any per-bin work.
    counts = np.bincount(gids, minlength=len(groups))
    keep = counts[gids] >= 2
    idx, gids = idx[keep], gids[keep]
    if idx.size == 0:
        return []
    # size order as Delta; equal sizes keep the snapshot's (log) order, which is deterministic
    order = np.lexsort((idx, sizes_all[idx], gids))
    idx, gids = idx[order], gids[order]
    sizes = sizes_all[idx]
    cs = np.cumsum(sizes)
    cs_list = cs.tolist()
    bounds = np.flatnonzero(np.r_[True, gids[1:] != gids[:-1], True])
    starts: list[int] = []
    ends: list[int] = []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=False):
        for i, j in chunk_ranges(cs_list, a, b, cap):
            if j - i >= 2:
                starts.append(i)
                ends.append(j)
    if not starts:
        return []
    st, en = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    nbytes = cs[en - 1] - np.where(st > 0, cs[st - 1], 0)
    nfiles = en - st
    n_out = np.maximum(1, -(-nbytes // max(1, int(config.max_file_size))))
    # A bin whose rewrite writes as many files as it reads (bins above max-file-size) gains nothing.
    useful = n_out < nfiles
    st, en, nbytes, nfiles, n_out = st[useful], en[useful], nbytes[useful], nfiles[useful], n_out[useful]
    if st.size == 0:
        return []
    scores = config.open_file_cost * (nfiles - n_out) / np.maximum(1, nbytes)
    rank = np.argsort(-scores, kind="stable")
    if bytes_per_iter is not None:
        total = np.cumsum(nbytes[rank])
        k = max(1, int(np.searchsorted(total, bytes_per_iter, side="right")))
        rank = rank[:k]
    tasks: list[MergeTask] = []
    for r in rank.tolist():
        sel = idx[st[r] : en[r]]
        tasks.append(
            MergeTask(
                strategy=strategy,
                revision_id=revision_id,
                paths=paths_of(snapshot, sel),
                bytes=int(nbytes[r]),
                num_files=int(sel.size),
                score=float(scores[r]),
                reason=reason.format(n=int(sel.size)),
                kind=KIND_BINPACK,
                partition_values=groups[int(gids[st[r]])],
            )
        )
    return tasks


def plain_revision(snapshot: Any) -> int:
    """The revision id binpack tasks carry: -1 on plain Delta tables, 0 (staging) on Qbeast tables."""
    return 0 if snapshot.is_qbeast else PLAIN_DELTA_REVISION


def revision_rewritten(snapshot: Any, idx: np.ndarray) -> bool:
    """Were all files at rows `idx` written by a revision rewrite (and nothing has replaced or joined
    them since)? Read from the files' `REVISION_REWRITE_TAG`, i.e. from the log itself."""
    return bool(idx.size) and tag_values(snapshot, idx, REVISION_REWRITE_TAG).null_count == 0


def revision_rewrite_plan(snapshot: Any, config: OptimizationConfig, strategy: str, revision_id: int) -> Plan:
    """use.optimization.revision-rewrite: every file of the revision, in task-sized chunks, once.

    One-shot twice over: the loop runs the plan without re-planning between its tasks, and once
    every live file of the revision carries `REVISION_REWRITE_TAG` (all were written by a revision
    rewrite, and no write or other rewrite has added a file since) the plan is empty, so a table
    property `revision-rewrite=true` rewrites the revision once after each change, not every
    interval. A rewrite interrupted half-way leaves untagged files: the next call starts over.
    """
    rids = revision_ids_of(snapshot)
    if not snapshot.is_qbeast:
        idx = np.arange(snapshot.files.num_rows, dtype=np.int64)
        if revision_rewritten(snapshot, idx):
            return Plan((), strategy, snapshot.version, one_shot=True)
        tasks = pack_bins_all(snapshot, idx, config, strategy=strategy, revision_rewrite=True)
        return Plan(tuple(tasks), strategy, snapshot.version, one_shot=True)
    idx = np.flatnonzero(rids == revision_id).astype(np.int64)
    kind = KIND_INDEX if revision_id == 0 else KIND_COMPACT
    if kind == KIND_COMPACT and revision_rewritten(snapshot, idx):
        return Plan((), strategy, snapshot.version, one_shot=True)
    idx = sort_files(snapshot, idx, [("modification_time", "ascending")])
    sizes = sizes_of(snapshot)[idx]
    tasks = []
    for i, j in chunks(sizes, io_limit(kind, config)):
        nbytes = int(sizes[i:j].sum())
        n = j - i
        score = index_score(nbytes, n, config) if kind == KIND_INDEX else merge_score(nbytes, n, config)
        tasks.append(
            MergeTask(strategy, revision_id, paths_of(snapshot, idx[i:j]), nbytes, n, score,
                      f"revision-rewrite: every file of revision {revision_id} ({n} files)", kind,
                      revision_rewrite=True)
        )  # fmt: skip
    return Plan(tuple(tasks), strategy, snapshot.version, one_shot=True)


def pack_bins_all(
    snapshot: Any, idx: np.ndarray, config: OptimizationConfig, *, strategy: str, revision_rewrite: bool = False
) -> list[MergeTask]:
    """Every file of `idx` in per-partition chunks of at most task_limit bytes (single files kept:
    explicit selections and revision rewrites rewrite every file they name)."""
    sizes_all = sizes_of(snapshot)
    gids, groups = partition_groups(snapshot, idx)
    order = np.lexsort((idx, gids))
    idx, gids = idx[order], gids[order]
    bounds = np.flatnonzero(np.r_[True, gids[1:] != gids[:-1], True]) if idx.size else np.array([0])
    rid = plain_revision(snapshot)
    tasks = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=False):
        sizes = sizes_all[idx[a:b]]
        for i, j in chunks(sizes, config.task_limit):
            nbytes = int(sizes[i:j].sum())
            tasks.append(
                MergeTask(strategy, rid, paths_of(snapshot, idx[a + i : a + j]), nbytes, j - i,
                          merge_score(nbytes, j - i, config), f"rewrite of {j - i} files", KIND_BINPACK,
                          groups[int(gids[a])], revision_rewrite=revision_rewrite)
            )  # fmt: skip
    return tasks
