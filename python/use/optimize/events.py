"""OptimizationEvent and FileStats: the record of every optimization, with the seed's field names.

continuous-optimization.txt defines the event (written by a pre-commit hook in qbeast-spark); here the
executor puts `OptimizationEvent.to_json()` into the rewrite commit's `commitInfo.tags[EVENT_TAG]`, so
an event exists if and only if its rewrite was committed, and the history of a table's optimizations
is read back from its Delta log (`events_from_history`) for `<table>.optimizations`.

FileStats definitions (the seed gives names only):
* `file_levels[i]` = floor(log10(largest block elementCount of files[i])), the level of leveled
  compaction; 0 for a file without blocks or with only empty blocks;
* `element_count` = sum of the blocks' elementCounts; `bytes` = sum of file sizes;
* `num_cubes` = distinct (revision, cube) pairs among the blocks; `num_blocks` = number of blocks;
* `avg_num_blocks_per_file` = num_blocks / num_files;
* `avg_block_element_count_per_file` = mean over files (with blocks) of the file's mean block
  elementCount; 0.0 when there are none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.delta import DeltaLog
from use.errors import CorruptLogError, InvalidArgumentError
from use.optimize.planner import resolve_paths
from use.optimize.strategies._common import levels_of

#: The commitInfo.tags key under which the executor stores the event JSON.
EVENT_TAG = "use.optimization.event"

FILE_STATS_TYPE = pa.struct(
    [
        ("files", pa.list_(pa.string())),
        ("file_levels", pa.list_(pa.int64())),
        ("element_count", pa.int64()),
        ("bytes", pa.int64()),
        ("num_files", pa.int64()),
        ("num_cubes", pa.int64()),
        ("num_blocks", pa.int64()),
        ("avg_num_blocks_per_file", pa.float64()),
        ("avg_block_element_count_per_file", pa.float64()),
    ]
)

EVENT_SCHEMA = pa.schema(
    [
        ("optimization_name", pa.string()),
        ("write_id", pa.string()),
        ("table_id", pa.string()),
        ("revision_id", pa.int64()),
        ("started_at", pa.int64()),
        ("finished_at", pa.int64()),
        ("process_time_ms", pa.int64()),
        ("input_files_stats", FILE_STATS_TYPE),
        ("output_files_stats", FILE_STATS_TYPE),
    ]
)

#: One row of `<table>.optimizations`: the seed's event fields, then the version of the commit that
#: holds the event (the rewrite's own commit).
OPTIMIZATIONS_SCHEMA = pa.schema([*EVENT_SCHEMA, ("version", pa.int64())])


def _np(col: Any, dtype: Any) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=dtype)


@dataclass(frozen=True)
class FileStats:
    files: tuple[str, ...]
    file_levels: tuple[int, ...]
    element_count: int
    bytes: int
    num_files: int
    num_cubes: int
    num_blocks: int
    avg_num_blocks_per_file: float
    avg_block_element_count_per_file: float

    @classmethod
    def from_blocks(cls, files: pa.Table, blocks: pa.Table) -> FileStats:
        """Stats of `files` (path, size) whose blocks are `blocks` (file_index = row in `files`).

        Vectorized: one bincount per aggregate, so the stats of a large rewrite stay cheap.
        """
        n = files.num_rows
        for col in ("path", "size"):
            if col not in files.column_names:
                raise InvalidArgumentError(f"FileStats.from_blocks: files table has no {col!r} column")
        sizes = _np(files.column("size"), np.int64)
        if blocks.num_rows:
            fi = _np(blocks.column("file_index"), np.int64)
            if fi.min() < 0 or fi.max() >= n:
                raise InvalidArgumentError(
                    f"FileStats.from_blocks: block file_index out of range [0, {n}); remap blocks to the given files"
                )
            ec = _np(blocks.column("element_count"), np.int64)
            cubes = blocks.column("cube_id")
            if "revision_id" in blocks.column_names:
                cubes = pc.binary_join_element_wise(pc.cast(blocks.column("revision_id"), pa.string()), cubes, "/")
            num_cubes = int(pc.count_distinct(cubes).as_py())
        else:
            fi = np.zeros(0, dtype=np.int64)
            ec = np.zeros(0, dtype=np.int64)
            num_cubes = 0
        max_ec = np.zeros(n, dtype=np.int64)
        np.maximum.at(max_ec, fi, ec)
        levels = np.maximum(levels_of(max_ec), 0)
        per_file_blocks = np.bincount(fi, minlength=n)
        per_file_ec = np.bincount(fi, weights=ec.astype(np.float64), minlength=n)
        has = per_file_blocks > 0
        avg_block_ec = float(np.mean(per_file_ec[has] / per_file_blocks[has])) if has.any() else 0.0
        return cls(
            files=tuple(files.column("path").to_pylist()),
            file_levels=tuple(int(x) for x in levels),
            element_count=int(ec.sum()),
            bytes=int(sizes.sum()),
            num_files=n,
            num_cubes=num_cubes,
            num_blocks=int(fi.size),
            avg_num_blocks_per_file=float(fi.size / n) if n else 0.0,
            avg_block_element_count_per_file=avg_block_ec,
        )

    @classmethod
    def from_snapshot(cls, snapshot: Any, paths: Sequence[str]) -> FileStats:
        """Stats of some live files of a QbeastSnapshot (the input side of a merge task)."""
        rows = resolve_paths(snapshot, paths)
        files = snapshot.files.take(pa.array(rows, pa.int64())).select(["path", "size"])
        blocks: pa.Table = snapshot.blocks
        fi = _np(blocks.column("file_index"), np.int64)
        remap = np.full(snapshot.files.num_rows, -1, dtype=np.int64)
        remap[rows] = np.arange(rows.size)
        keep = remap[fi] >= 0
        sub = blocks.filter(pa.array(keep))
        sub = sub.set_column(sub.schema.get_field_index("file_index"), "file_index", pa.array(remap[fi[keep]], pa.int64()))
        return cls.from_blocks(files, sub)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": list(self.files),
            "file_levels": list(self.file_levels),
            "element_count": self.element_count,
            "bytes": self.bytes,
            "num_files": self.num_files,
            "num_cubes": self.num_cubes,
            "num_blocks": self.num_blocks,
            "avg_num_blocks_per_file": self.avg_num_blocks_per_file,
            "avg_block_element_count_per_file": self.avg_block_element_count_per_file,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FileStats:
        return cls(
            files=tuple(str(x) for x in d["files"]),
            file_levels=tuple(int(x) for x in d["file_levels"]),
            element_count=int(d["element_count"]),
            bytes=int(d["bytes"]),
            num_files=int(d["num_files"]),
            num_cubes=int(d["num_cubes"]),
            num_blocks=int(d["num_blocks"]),
            avg_num_blocks_per_file=float(d["avg_num_blocks_per_file"]),
            avg_block_element_count_per_file=float(d["avg_block_element_count_per_file"]),
        )


@dataclass(frozen=True, kw_only=True)
class OptimizationEvent:
    """One committed optimization (fields and defaults exactly as the seed's case class)."""

    optimization_name: str
    write_id: str
    table_id: str
    revision_id: int = -1
    started_at: int
    finished_at: int
    process_time_ms: int = -1
    input_files_stats: FileStats | None = None
    output_files_stats: FileStats | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "optimization_name": self.optimization_name,
            "write_id": self.write_id,
            "table_id": self.table_id,
            "revision_id": self.revision_id,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "process_time_ms": self.process_time_ms,
            "input_files_stats": None if self.input_files_stats is None else self.input_files_stats.to_dict(),
            "output_files_stats": None if self.output_files_stats is None else self.output_files_stats.to_dict(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OptimizationEvent:
        ins, outs = d.get("input_files_stats"), d.get("output_files_stats")
        return cls(
            optimization_name=str(d["optimization_name"]),
            write_id=str(d["write_id"]),
            table_id=str(d["table_id"]),
            revision_id=int(d.get("revision_id", -1)),
            started_at=int(d["started_at"]),
            finished_at=int(d["finished_at"]),
            process_time_ms=int(d.get("process_time_ms", -1)),
            input_files_stats=None if ins is None else FileStats.from_dict(ins),
            output_files_stats=None if outs is None else FileStats.from_dict(outs),
        )

    @classmethod
    def from_json(cls, text: str) -> OptimizationEvent:
        try:
            return cls.from_dict(json.loads(text))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptLogError(f"not an OptimizationEvent JSON ({type(e).__name__}: {e}): {text[:200]!r}") from None


def _event_text(entry: Any) -> tuple[str | None, Any]:
    """(event JSON or None, version for messages) of one history entry, whatever its shape."""
    version = getattr(entry, "version", None)
    info: Any = entry
    if hasattr(entry, "commit_info"):  # use.delta.log.HistoryEntry
        info = entry.commit_info
    elif isinstance(entry, Mapping) and "commitInfo" in entry:  # a raw log action
        version = entry.get("version", version)
        info = entry["commitInfo"]
    elif isinstance(entry, str):
        return entry, version
    tags = info.get("tags") if isinstance(info, Mapping) else getattr(info, "tags", None)
    if isinstance(entry, Mapping) and version is None:
        version = entry.get("version")
    if not tags:
        return None, version
    return tags.get(EVENT_TAG), version


def events_from_history(history_entries: Iterable[Any]) -> pa.Table:
    """One row per optimization event found in the given history entries, in their order.

    Entries may be `use.delta.log.HistoryEntry` objects, commitInfo dicts (or `{"commitInfo": ...}`
    actions), `CommitInfo` actions, or event JSON strings; commits without the tag are skipped, a
    malformed tag is a CorruptLogError naming its commit. The result has `OPTIMIZATIONS_SCHEMA`: the
    seed's event fields (nested FileStats as structs) and `version`, the commit that holds the event
    (null when an entry does not say, e.g. a bare event JSON string). It is the
    `<table>.optimizations` insight table (`use.insights`), ready for `spark.createDataFrame`.
    """
    rows: list[dict[str, Any]] = []
    for entry in history_entries:
        text, version = _event_text(entry)
        if text is None:
            continue
        try:
            event = OptimizationEvent.from_json(text).to_dict()
        except CorruptLogError as e:
            where = f"commit {version}" if version is not None else "a history entry"
            raise CorruptLogError(f"{where} has a malformed {EVENT_TAG} tag: {e}") from None
        rows.append({**event, "version": None if version is None else int(version)})
    return pa.Table.from_pylist(rows, schema=OPTIMIZATIONS_SCHEMA)


def optimizations_table(location: str) -> Any:
    """Every optimization event of the table at `location`, oldest first, as an Arrow table
    (`OPTIMIZATIONS_SCHEMA`: the seed's fields and the commit version)."""
    history = DeltaLog.for_path(location).history()
    return events_from_history(reversed(history))
