"""The `blocks` tags of Qbeast data files <-> one Arrow table of blocks (spec §6.3, §7.2).

Every indexed `add` carries `tags.revision` (a decimal string) and `tags.blocks`, a JSON array
serialized as a string: `[{"cubeId":..,"minWeight":..,"maxWeight":..,"elementCount":..}, ...]`.
A snapshot can hold a million files, so the tags of all files are parsed in one go: the strings are
wrapped into one NDJSON buffer with Arrow string kernels and parsed by Arrow's JSON reader against
an explicit schema, then flattened with the list offsets. No Python object is made per file or per
block on that path; Python only runs again to name the culprit file when the batch parse fails.

Format tolerance follows qbeast-spark's parser: the 0.6/0.7 `replicated` field is accepted and
ignored, any other field is refused, a missing `minWeight`/`maxWeight`/`elementCount` defaults to
MinValue/MaxValue/0, and a file without a `blocks` tag is a single root block.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from use.errors import CorruptIndexMetadataError
from use.qbeast.cube import SYMBOLS, symbols_per_level
from use.qbeast.revision import Revision
from use.qbeast.weight import MAX_WEIGHT, MIN_WEIGHT

REVISION_TAG = "revision"
BLOCKS_TAG = "blocks"

BLOCK_TABLE_SCHEMA = pa.schema(
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

_BLOCK_STRUCT = pa.struct(
    [
        ("cubeId", pa.string()),
        ("minWeight", pa.int64()),  # read wide, range-checked below (a clear error beats an overflow)
        ("maxWeight", pa.int64()),
        ("elementCount", pa.int64()),
        ("replicated", pa.bool_()),
    ]
)
_NDJSON_SCHEMA = pa.schema([("b", pa.list_(_BLOCK_STRUCT))])
_KNOWN_FIELDS = ("cubeId", "minWeight", "maxWeight", "elementCount", "replicated")


@dataclass(frozen=True)
class Block:
    """One cube's rows inside one file: their weight range and count."""

    cube_id: str
    min_weight: int
    max_weight: int
    element_count: int

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "cubeId": self.cube_id,
            "minWeight": int(self.min_weight),
            "maxWeight": int(self.max_weight),
            "elementCount": int(self.element_count),
        }


def blocks_json(blocks: Iterable[Block]) -> str:
    """The `blocks` tag value: exactly the four 0.8 fields, in qbeast-spark's order."""
    return json.dumps([b.to_json_obj() for b in blocks], separators=(",", ":"), ensure_ascii=False)


def blocks_tags(revision_id: int, blocks: Iterable[Block]) -> dict[str, str]:
    """The `add.tags` of an indexed file."""
    return {REVISION_TAG: str(int(revision_id)), BLOCKS_TAG: blocks_json(blocks)}


# --- vectorized reading ---------------------------------------------------------------------------


def _tag(files: pa.Table, key: str) -> pa.Array:
    """`tags[key]` of every file (null when the map or the key is missing) as a string array.

    Works on the map's flat key/item arrays (one vectorized equality over all keys), which is
    several times faster than `map_lookup` on a million files.
    """
    n = files.num_rows
    if "tags" not in files.column_names or n == 0:
        return pa.nulls(n, pa.string())
    tags = files.column("tags")
    tags = tags.combine_chunks() if tags.num_chunks != 1 else tags.chunk(0)
    offsets = np.asarray(tags.offsets, dtype=np.int64)
    keys = tags.keys
    items = tags.items
    base = int(offsets[0])
    if base or len(keys) != int(offsets[-1]):
        keys = keys.slice(base, int(offsets[-1]) - base)
        items = items.slice(base, int(offsets[-1]) - base)
        offsets = offsets - base
    hits = np.flatnonzero(np.asarray(pc.fill_null(pc.equal(keys, key), False), dtype=bool))
    owner = np.searchsorted(offsets, hits, side="right") - 1
    if owner.size and np.any(owner[1:] == owner[:-1]):  # a repeated key: keep the first, like map_lookup
        keep = np.concatenate([[True], owner[1:] != owner[:-1]])
        hits, owner = hits[keep], owner[keep]
    if tags.null_count:
        valid = np.asarray(tags.is_valid(), dtype=bool)
        keep = valid[owner]
        hits, owner = hits[keep], owner[keep]
    positions = np.full(n, -1, dtype=np.int64)
    positions[owner] = hits
    values = items.cast(pa.string()).take(pa.array(positions, mask=positions < 0))
    return values


def _path_of(files: pa.Table, i: int) -> str:
    if "path" in files.column_names:
        return str(files.column("path")[i].as_py())
    return f"#{i}"


def revision_ids(files: pa.Table) -> pa.Array:
    """Each file's revision id (int64); untagged files (and `revision == "0"`) are staging, 0."""
    raw = _tag(files, REVISION_TAG)
    filled = pc.fill_null(raw, "0")
    ok = pc.match_substring_regex(filled, r"^\s*[0-9]+\s*$")
    if not pc.all(ok).as_py() and len(filled):
        bad = int(np.flatnonzero(~np.asarray(ok, dtype=bool))[0])
        raise CorruptIndexMetadataError(
            f"file {_path_of(files, bad)!r} has tags.revision={raw[bad].as_py()!r}, which is not a revision number"
        )
    return pc.cast(pc.utf8_trim_whitespace(filled), pa.int64())


def _num_records(files: pa.Table) -> np.ndarray:
    """`numRecords` from each file's Delta stats JSON (0 when stats or the key are missing)."""
    n = files.num_rows
    if "stats" not in files.column_names or n == 0:
        return np.zeros(n, dtype=np.int64)
    stats = files.column("stats").combine_chunks()
    extracted = pc.extract_regex(pc.fill_null(stats, ""), r'"numRecords"\s*:\s*(?P<n>[0-9]+)')
    field = pc.struct_field(extracted, [0])
    counts: np.ndarray = pc.fill_null(pc.cast(field, pa.int64()), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    return counts


def _find_bad_blocks(files: pa.Table, rows: np.ndarray, blocks: pa.Array) -> CorruptIndexMetadataError:
    """The batch parse failed: find the first offending file (Python, error path only)."""
    for j, text in enumerate(blocks.to_pylist()):
        i = int(rows[j])
        where = f"file {_path_of(files, i)!r}"
        try:
            value = json.loads(text)
        except ValueError as e:
            return CorruptIndexMetadataError(f"{where} has a blocks tag that is not valid JSON ({e}): {text[:200]!r}")
        if not isinstance(value, list):
            return CorruptIndexMetadataError(f"{where} has a blocks tag that is not a JSON array: {text[:200]!r}")
        for b in value:
            if not isinstance(b, dict):
                return CorruptIndexMetadataError(f"{where} has a block that is not a JSON object: {b!r}")
            unknown = sorted(set(b) - set(_KNOWN_FIELDS))
            if unknown:
                return CorruptIndexMetadataError(
                    f"{where} has a block with unknown fields {unknown}; blocks hold only cubeId, minWeight, "
                    f"maxWeight, elementCount (and the ignored 0.6/0.7 replicated)"
                )
            for key, kind in (("cubeId", str), ("minWeight", int), ("maxWeight", int), ("elementCount", int)):
                if key in b and (isinstance(b[key], bool) or not isinstance(b[key], kind)):
                    return CorruptIndexMetadataError(f"{where} has a block with a bad {key}: {b!r}")
            if "replicated" in b and not isinstance(b["replicated"], bool):
                return CorruptIndexMetadataError(f"{where} has a block with a non-boolean replicated: {b!r}")
    return CorruptIndexMetadataError("the blocks tags cannot be parsed, but no single file could be blamed")


def _ndjson(blocks: pa.Array) -> pa.Buffer:
    """One `{"b":<tag>}` line per file, as one contiguous buffer (no per-row Python)."""
    lines = pc.binary_join_element_wise('{"b":', blocks, "}\n", "")
    lines = lines.cast(pa.large_string())
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    data = lines.buffers()[2]
    return data.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def _parse_blocks(files: pa.Table, rows: np.ndarray, blocks: pa.Array) -> pa.Table:
    """Parse the `blocks` strings of `rows` into `(row, cubeId, minWeight, maxWeight, elementCount)`."""
    if len(blocks) == 0:
        return pa.table({"row": pa.array([], pa.int64()), "b": pa.array([], pa.list_(_BLOCK_STRUCT))})
    buf = _ndjson(blocks)
    if np.count_nonzero(np.frombuffer(buf, dtype=np.uint8) == 10) != len(blocks):
        # a pretty-printed tag: its line breaks are JSON whitespace, but NDJSON needs one line per file
        buf = _ndjson(pc.replace_substring_regex(blocks, r"[\r\n]", " "))
    try:
        parsed = pajson.read_json(
            pa.BufferReader(buf),
            read_options=pajson.ReadOptions(block_size=max(1 << 20, min(1 << 28, buf.size + 1)), use_threads=True),
            parse_options=pajson.ParseOptions(
                explicit_schema=_NDJSON_SCHEMA, unexpected_field_behavior="error", newlines_in_values=False
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        raise _find_bad_blocks(files, rows, blocks) from None
    if parsed.num_rows != len(blocks):
        raise _find_bad_blocks(files, rows, blocks)
    col = parsed.column("b")
    col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if col.null_count:
        bad = int(np.flatnonzero(np.asarray(col.is_null(), dtype=bool))[0])
        raise CorruptIndexMetadataError(
            f"file {_path_of(files, int(rows[bad]))!r} has a blocks tag that is not a JSON array: {blocks[bad].as_py()!r}"
        )
    return pa.table({"row": pa.array(rows, pa.int64()), "b": col})


def block_table(files: pa.Table, revisions: Mapping[int, Revision]) -> pa.Table:
    """All blocks of all files (`BLOCK_TABLE_SCHEMA`, in file order then tag order).

    Staging files (no tags, empty tags, `revision == "0"`) and files without a `blocks` tag get one
    root block with the full weight range and `numRecords` from their Delta stats.
    """
    n = files.num_rows
    rids = revision_ids(files).to_numpy(zero_copy_only=False).astype(np.int64)
    raw_blocks = _tag(files, BLOCKS_TAG)
    has_blocks = ~np.asarray(raw_blocks.is_null(), dtype=bool) if n else np.zeros(0, dtype=bool)
    indexed = has_blocks & (rids != 0)
    idx_rows = np.flatnonzero(indexed)
    root_rows = np.flatnonzero(~indexed)

    # dimension count per indexed file, from its revision
    if idx_rows.size:
        used = np.unique(rids[idx_rows])
        missing = [int(r) for r in used if int(r) not in revisions]
        if missing:
            bad = int(idx_rows[np.isin(rids[idx_rows], missing)][0])
            raise CorruptIndexMetadataError(
                f"file {_path_of(files, bad)!r} is tagged with revision {int(rids[bad])}, but the table has no "
                f"qbeast.revision.{int(rids[bad])} metadata (known revisions: {sorted(revisions)})"
            )
    parsed = _parse_blocks(files, idx_rows, raw_blocks.take(pa.array(idx_rows, pa.int64())))
    lists = parsed.column("b").combine_chunks() if parsed.num_rows else pa.array([], pa.list_(_BLOCK_STRUCT))
    parent = (
        pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64) if len(lists) else np.zeros(0, np.int64)
    )
    structs = pc.list_flatten(lists)
    b_file = idx_rows[parent] if parent.size else np.zeros(0, dtype=np.int64)
    b_rev = rids[b_file]
    cube = pc.struct_field(structs, [0]) if len(structs) else pa.array([], pa.string())
    min_w = pc.struct_field(structs, [1]) if len(structs) else pa.array([], pa.int64())
    max_w = pc.struct_field(structs, [2]) if len(structs) else pa.array([], pa.int64())
    count = pc.struct_field(structs, [3]) if len(structs) else pa.array([], pa.int64())

    if cube.null_count:
        bad = int(b_file[np.flatnonzero(np.asarray(cube.is_null(), dtype=bool))[0]])
        raise CorruptIndexMetadataError(f"file {_path_of(files, bad)!r} has a block without a cubeId")
    min_np = pc.fill_null(min_w, MIN_WEIGHT).to_numpy(zero_copy_only=False).astype(np.int64)
    max_np = pc.fill_null(max_w, MAX_WEIGHT).to_numpy(zero_copy_only=False).astype(np.int64)
    cnt_np = pc.fill_null(count, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    for name, arr in (("minWeight", min_np), ("maxWeight", max_np)):
        out_of_range = (arr < MIN_WEIGHT) | (arr > MAX_WEIGHT)
        if out_of_range.any():
            j = int(np.flatnonzero(out_of_range)[0])
            raise CorruptIndexMetadataError(
                f"file {_path_of(files, int(b_file[j]))!r} has a block with {name}={int(arr[j])}, outside the int32 weight range"
            )
    if (cnt_np < 0).any():
        j = int(np.flatnonzero(cnt_np < 0)[0])
        raise CorruptIndexMetadataError(
            f"file {_path_of(files, int(b_file[j]))!r} has a block with a negative elementCount {int(cnt_np[j])}"
        )

    # depth = len(cubeId) / symbols per level of the block's revision; check alphabet and length
    lengths = pc.utf8_length(cube).to_numpy(zero_copy_only=False).astype(np.int64) if len(cube) else np.zeros(0, np.int64)
    spl_by_rev = {rid: symbols_per_level(revisions[rid].dimension_count) for rid in np.unique(b_rev).tolist()}
    if b_rev.size:
        keys = np.array(sorted(spl_by_rev), dtype=np.int64)
        spl = np.array([spl_by_rev[k] for k in keys.tolist()], dtype=np.int64)[np.searchsorted(keys, b_rev)]
    else:
        spl = np.ones(0, dtype=np.int64)
    valid = np.ones(len(cube), dtype=bool)
    for rid in spl_by_rev:
        sel = np.flatnonzero(b_rev == rid)
        if sel.size == 0:
            continue
        pattern = _cube_regex(revisions[rid].dimension_count)
        sub = cube if sel.size == len(cube) else cube.take(pa.array(sel, pa.int64()))
        valid[sel] = np.asarray(pc.match_substring_regex(sub, pattern), dtype=bool)
    if not valid.all():
        j = int(np.flatnonzero(~valid)[0])
        rid = int(b_rev[j])
        raise CorruptIndexMetadataError(
            f"file {_path_of(files, int(b_file[j]))!r} has a block with cubeId {cube[j].as_py()!r}, which is not a "
            f"cube of revision {rid} ({revisions[rid].dimension_count} dimensions: {spl_by_rev[rid]} symbol(s) "
            f"per level from A-Z a-z 0-9 + /, unused low bits zero)"
        )
    depth = (lengths // np.maximum(spl, 1)).astype(np.int32)

    # root blocks for staging files and untagged-blocks files
    root_counts = _num_records(files)[root_rows] if root_rows.size else np.zeros(0, dtype=np.int64)
    m = root_rows.size
    file_index = np.concatenate([b_file, root_rows]).astype(np.int64)
    order = np.argsort(file_index, kind="stable")
    cube_all = pa.concat_arrays([cube.cast(pa.string()), _empty_strings(m)])
    table = pa.table(
        {
            "file_index": file_index,
            "revision_id": np.concatenate([b_rev, rids[root_rows]]).astype(np.int64),
            "cube_id": cube_all,
            "depth": np.concatenate([depth, np.zeros(m, dtype=np.int32)]).astype(np.int32),
            "min_weight": np.concatenate([min_np, np.full(m, MIN_WEIGHT, dtype=np.int64)]).astype(np.int32),
            "max_weight": np.concatenate([max_np, np.full(m, MAX_WEIGHT, dtype=np.int64)]).astype(np.int32),
            "element_count": np.concatenate([cnt_np, root_counts]).astype(np.int64),
        },
        schema=BLOCK_TABLE_SCHEMA,
    )
    if not np.all(order == np.arange(order.size)):
        table = table.take(pa.array(order, pa.int64()))
    return table


def _cube_regex(dimensions: int) -> str:
    """A regex accepting exactly the cube strings of a `dimensions`-dimensional revision: whole
    levels, and in each level's last symbol only the values whose unused low bits are zero."""
    spl = symbols_per_level(dimensions)
    used = dimensions - 6 * (spl - 1)
    last = "".join(c for i, c in enumerate(SYMBOLS) if i & ((1 << (6 - used)) - 1) == 0)
    level = "[A-Za-z0-9+/]" * (spl - 1) + "[" + re.escape(last).replace("\\-", "-") + "]"
    return f"^(?:{level})*$"


def _empty_strings(m: int) -> pa.Array:
    """`m` empty (root) cube strings without a Python list."""
    return pa.Array.from_buffers(
        pa.string(), m, [None, pa.py_buffer(np.zeros(m + 1, dtype=np.int32).tobytes()), pa.py_buffer(b"")]
    )


def empty_block_table() -> pa.Table:
    return BLOCK_TABLE_SCHEMA.empty_table()
