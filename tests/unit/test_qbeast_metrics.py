"""Index metrics over synthetic snapshots (pure; no Spark)."""

from __future__ import annotations

import json

import pyarrow as pa

from use.qbeast.metrics import index_metrics
from use.qbeast.revision import Revision
from use.qbeast.snapshot import QbeastSnapshot
from use.qbeast.transform import INTEGER, LinearTransformation
from use.qbeast.transformers import LinearTransformer
from use.qbeast.weight import MAX_WEIGHT, weight_from_fraction

REV = Revision(1, 0, "/t", 100, (LinearTransformer("a", INTEGER),), (LinearTransformation(0, 10, 5, INTEGER),))


def _snapshot(files: list[list[tuple[str, int, int, int]]]) -> QbeastSnapshot:
    tags = [
        {
            "revision": "1",
            "blocks": json.dumps([{"cubeId": c, "minWeight": lo, "maxWeight": hi, "elementCount": n} for c, lo, hi, n in f]),
        }
        for f in files
    ]
    table = pa.table(
        {
            "path": [f"f{i}.parquet" for i in range(len(files))],
            "size": pa.array([1000] * len(files), pa.int64()),
            "modification_time": pa.array([0] * len(files), pa.int64()),
            "data_change": [True] * len(files),
            "stats": pa.array([None] * len(files), pa.string()),
            "tags": pa.array([list(t.items()) for t in tags], pa.map_(pa.string(), pa.string())),
            "partition_values": pa.array([[] for _ in files], pa.map_(pa.string(), pa.string())),
        }
    )
    return QbeastSnapshot.from_tables(files=table, blocks=None, revisions={1: REV})


def test_metrics_of_a_small_tree():
    w = weight_from_fraction(0.5)
    qsnap = _snapshot(
        [
            [("", -100, w, 100), ("A", w, MAX_WEIGHT, 30)],  # d=1: children of root are "A" and "g"
            [("g", w, MAX_WEIGHT, 8)],
            [("", 5, w + 10, 4), ("g", w, MAX_WEIGHT, 3)],  # an append: more blocks of the same cubes
        ]
    )
    m = index_metrics(qsnap)[1]
    assert (m.cube_count, m.depth, m.file_count, m.block_count, m.row_count) == (3, 2, 3, 5, 145)
    assert m.inner_cube_sizes.count == 1 and m.inner_cube_sizes.avg == 104
    assert m.leaf_cube_sizes.count == 2 and m.leaf_cube_sizes.max == 30
    assert m.inner_size_vs_desired == 1.04
    assert m.avg_fanout == 2.0
    assert (m.blocks_per_file.min, m.blocks_per_file.max) == (1, 2)
    assert (m.blocks_per_cube.max, m.blocks_per_cube.min) == (2, 1)
    assert m.file_levels == {0: 2, 2: 1}
    assert [lv.cube_count for lv in m.levels] == [1, 2]
    text = str(m)
    assert "revision 1" in text and "file levels" in text


def test_file_levels_follow_log10_of_the_largest_block():
    qsnap = _snapshot([[("", 0, MAX_WEIGHT, 9)], [("", 0, MAX_WEIGHT, 10)], [("", 0, MAX_WEIGHT, 12345)]])
    assert index_metrics(qsnap)[1].file_levels == {0: 1, 1: 1, 4: 1}


def test_empty_revision_and_plain_table():
    qsnap = _snapshot([])
    assert index_metrics(qsnap)[1].cube_count == 0
    plain = QbeastSnapshot.from_tables(files=_snapshot([]).files, blocks=None, revisions={})
    assert index_metrics(plain) == {}
