"""The qbeast-format spec's sampling walk (§5.2), literally, as qbeast-spark's reader runs it, and a
check that a table's samples read through it are exact.

qbeast-spark's `QueryExecutor` builds each revision's cube statuses (a cube's maxWeight is the
minimum over its blocks', §3.0), walks them from the root in pre-order with a stack, and stops the
descent at a cube whose status maxWeight is at least the sample's weight; then it keeps the files
holding a block of a reached cube whose weight range meets the sample's. Staging files are always
read. Spark then keeps the rows with `hash(indexed columns) < Weight(f)`. So a sample is exact iff no
file the walk leaves out holds such a row. This is written here independently of USE's reader (which
selects blocks by their own weight range), in plain Python over the block table of the log's tags.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Sequence
from typing import Any

from use.qbeast.blocks import block_table
from use.qbeast.cube import CubeId
from use.qbeast.snapshot import QbeastSnapshot
from use.qbeast.weight import MAX_WEIGHT, MIN_WEIGHT, weight_from_fraction

FRACTIONS = (0.01, 0.05, 0.1, 0.2, 0.37, 0.6)


def walk_cubes(status: dict[CubeId, int], dimensions: int, weight_to: int) -> set[CubeId]:
    """§5.2's stack walk over the pre-order sorted cube statuses (no query space: every child)."""
    ordered = sorted(status)
    out: set[CubeId] = set()
    stack = [CubeId.root(dimensions)]
    while stack:
        cur = stack.pop()
        i = bisect.bisect_left(ordered, cur)  # the first cube >= cur, as the sorted map's iteratorFrom
        if i == len(ordered):
            continue
        nxt = ordered[i]
        if nxt == cur:
            out.add(cur)
            if weight_to > status[cur]:  # qbeast-spark stops when weightRange.to <= maxWeight
                stack.extend(cur.children())
        elif cur.is_ancestor_of(nxt):
            stack.extend(cur.children())
    return out


def walk_files(qsnap: QbeastSnapshot, weight_to: int, weight_from: int = MIN_WEIGHT) -> set[str]:
    """The paths qbeast-spark's reader lists for a sample `[weight_from, weight_to)`."""
    paths = qsnap.files.column("path").to_pylist()
    rids = qsnap.files.column("revision_id").to_pylist()
    out = {p for p, r in zip(paths, rids, strict=True) if r == 0}
    # every block of the log's tags, as qbeast-spark parses them (those holding no row included)
    blocks = block_table(qsnap.files, qsnap.revisions).to_pylist()
    for rid, revision in qsnap.revisions.items():
        if rid == 0:
            continue
        d = revision.dimension_count
        mine = [b for b in blocks if b["revision_id"] == rid]
        status: dict[CubeId, int] = {}
        for b in mine:
            cube = CubeId.from_string(d, b["cube_id"])
            status[cube] = min(status.get(cube, b["max_weight"]), b["max_weight"])
        if not status:
            continue
        reached = {c.to_string() for c in walk_cubes(status, d, weight_to)}
        for b in mine:
            if b["cube_id"] in reached and weight_from <= b["max_weight"] and weight_to > b["min_weight"]:
                out.add(paths[b["file_index"]])
    return out


def file_weights(spark: Any, path: str) -> dict[str, list[int]]:
    """Every live file's row weights (Spark's `hash` of the latest revision's indexed columns, as
    qbeast-spark's sample filter computes them), keyed by the file's path relative to the table."""
    from pyspark.sql import functions as F

    from use.qbeast.reader import load_snapshot

    qsnap = load_snapshot(path)
    columns = list(qsnap.latest_revision.columns)
    rel = qsnap.files.column("path").to_pylist()
    if not rel:
        return {}
    full = {os.path.join(path, p): p for p in rel}
    df = spark.read.parquet(*full).select(F.input_file_name().alias("f"), F.hash(*columns).alias("w"))
    out: dict[str, list[int]] = {p: [] for p in rel}
    for f, w in df.collect():
        local = f.removeprefix("file://").removeprefix("file:")
        out[full[local]].append(int(w))
    return out


LIGHTEST = "every block's lightest row"


def missed_by_the_walk(
    qsnap: QbeastSnapshot, weights: dict[str, list[int]], fractions: Iterable[float] = FRACTIONS
) -> dict[float | str, int]:
    """Per fraction, the rows with `hash < Weight(f)` in files the spec's walk does not list (0: exact);
    under `LIGHTEST`, the same summed over the samples just above each block's lightest row (where a
    sample's listing can first miss a block's rows: a table exact there is exact for every f)."""
    ordered = {p: sorted(ws) for p, ws in weights.items()}

    def missed(w: int) -> int:
        listed = walk_files(qsnap, w)
        return sum(bisect.bisect_left(ws, w) for p, ws in ordered.items() if p not in listed)

    out: dict[float | str, int] = {f: missed(int(weight_from_fraction(f))) for f in fractions}
    lightest = {int(b["min_weight"]) + 1 for b in block_table(qsnap.files, qsnap.revisions).to_pylist() if b["element_count"]}
    out[LIGHTEST] = sum(missed(w) for w in sorted(lightest) if w <= MAX_WEIGHT)
    return out


def spec_walk_misses(spark: Any, path: str, fractions: Sequence[float] = FRACTIONS) -> dict[float | str, int]:
    """`missed_by_the_walk` of the table at `path` now (its live files and their rows)."""
    from use.qbeast.reader import load_snapshot

    return missed_by_the_walk(load_snapshot(path), file_weights(spark, path), fractions)


def ids_of_a_file_holding_a_lowest_weight(spark: Any, root: str) -> str | None:
    """`id IN (...)` of the rows of a file whose block holds some cube's lowest maxWeight while other
    files hold rows below that cube lighter than its next lowest: moving these rows out of the index
    (DELETE, UPDATE) raises the cube's status above those rows. None when no file does."""
    from use.qbeast.reader import load_snapshot

    qsnap = load_snapshot(root)
    blocks = [b for b in block_table(qsnap.files, qsnap.revisions).to_pylist() if b["revision_id"] > 0]
    paths = qsnap.files.column("path").to_pylist()
    for cube in sorted({b["cube_id"] for b in blocks}):
        own = sorted((b["max_weight"], b["file_index"]) for b in blocks if b["cube_id"] == cube)
        lowest, host = own[0]
        after = min([w for w, f in own if f != host], default=None)
        below = [b for b in blocks if b["cube_id"].startswith(cube) and len(b["cube_id"]) > len(cube) and b["element_count"]]
        if after is not None and any(lowest < b["min_weight"] < after and b["file_index"] != host for b in below):
            ids = [r[0] for r in spark.read.parquet(os.path.join(root, paths[host])).select("id").collect()]
            return f"id IN ({', '.join(map(str, ids))})"
    return None
