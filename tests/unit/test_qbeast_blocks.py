"""Blocks tags (§7.2): writer JSON, vectorized parsing of all files, 0.6/0.7 compatibility, errors."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from qbeast_fixtures import BLOCKS_JSON, REVISION_JSON
from use.errors import CorruptIndexMetadataError
from use.qbeast.blocks import BLOCK_TABLE_SCHEMA, Block, block_table, blocks_json, blocks_tags, revision_ids
from use.qbeast.revision import Revision
from use.qbeast.weight import MAX_WEIGHT, MIN_WEIGHT

TAGS = pa.map_(pa.string(), pa.string())
REVS = {1: Revision.from_json(REVISION_JSON)}


def files_table(tags, stats=None):
    n = len(tags)
    return pa.table(
        {
            "path": [f"part-{i}.parquet" for i in range(n)],
            "tags": pa.array(tags, TAGS),
            "stats": pa.array(stats or [None] * n, pa.string()),
        }
    )


def test_blocks_json_matches_the_real_tag():
    blocks = [Block("gw", -800322436, 2147483647, 169364), Block("g", -1879047437, -800348665, 250669)]
    assert blocks_json(blocks) == BLOCKS_JSON
    assert blocks_tags(1, blocks) == {"revision": "1", "blocks": BLOCKS_JSON}
    assert blocks_json([]) == "[]"


def test_block_table_of_real_add_and_staging_files():
    t = files_table(
        [
            [("revision", "1"), ("blocks", BLOCKS_JSON)],
            None,
            [],
            [("revision", "0")],
            [("revision", "1")],
        ],
        [None, '{"numRecords":12,"minValues":{}}', None, '{"numRecords": 7}', '{"numRecords":3}'],
    )
    bt = block_table(t, REVS)
    assert bt.schema == BLOCK_TABLE_SCHEMA
    assert bt.to_pylist() == [
        {
            "file_index": 0,
            "revision_id": 1,
            "cube_id": "gw",
            "depth": 2,
            "min_weight": -800322436,
            "max_weight": MAX_WEIGHT,
            "element_count": 169364,
        },
        {
            "file_index": 0,
            "revision_id": 1,
            "cube_id": "g",
            "depth": 1,
            "min_weight": -1879047437,
            "max_weight": -800348665,
            "element_count": 250669,
        },
        {
            "file_index": 1,
            "revision_id": 0,
            "cube_id": "",
            "depth": 0,
            "min_weight": MIN_WEIGHT,
            "max_weight": MAX_WEIGHT,
            "element_count": 12,
        },
        {
            "file_index": 2,
            "revision_id": 0,
            "cube_id": "",
            "depth": 0,
            "min_weight": MIN_WEIGHT,
            "max_weight": MAX_WEIGHT,
            "element_count": 0,
        },
        {
            "file_index": 3,
            "revision_id": 0,
            "cube_id": "",
            "depth": 0,
            "min_weight": MIN_WEIGHT,
            "max_weight": MAX_WEIGHT,
            "element_count": 7,
        },
        {
            "file_index": 4,
            "revision_id": 1,
            "cube_id": "",
            "depth": 0,
            "min_weight": MIN_WEIGHT,
            "max_weight": MAX_WEIGHT,
            "element_count": 3,
        },
    ]
    assert revision_ids(t).to_pylist() == [1, 0, 0, 0, 1]


def test_v06_v07_blocks_with_replicated_and_defaults():
    old = '[{"cubeId":"","minWeight":-5,"maxWeight":7,"elementCount":3,"replicated":false},{"cubeId":"A","replicated":true}]'
    pretty = '[\n  {"cubeId": "Q",\n   "minWeight": 1, "maxWeight": 2, "elementCount": 4}\n]'
    bt = block_table(files_table([[("revision", "1"), ("blocks", old)], [("revision", "1"), ("blocks", pretty)]]), REVS)
    rows = bt.to_pylist()
    assert [(r["cube_id"], r["min_weight"], r["max_weight"], r["element_count"]) for r in rows] == [
        ("", -5, 7, 3),
        ("A", MIN_WEIGHT, MAX_WEIGHT, 0),
        ("Q", 1, 2, 4),
    ]


def test_multi_symbol_levels_depth():
    eight = Revision.from_json(
        json.dumps(
            {
                "revisionID": 2,
                "timestamp": 1,
                "tableID": "/t",
                "desiredCubeSize": 10,
                "columnTransformers": [
                    {
                        "className": "io.qbeast.core.transform.LinearTransformer",
                        "columnName": f"c{i}",
                        "dataType": "DoubleDataType",
                    }
                    for i in range(8)
                ],
                "transformations": [
                    {
                        "className": "io.qbeast.core.transform.LinearTransformation",
                        "minNumber": 0.0,
                        "maxNumber": 1.0,
                        "nullValue": 0.5,
                        "orderedDataType": "DoubleDataType",
                    }
                ]
                * 8,
            }
        )
    )
    t = files_table([[("revision", "2"), ("blocks", '[{"cubeId":"0QTQ","minWeight":1,"maxWeight":2,"elementCount":1}]')]])
    assert block_table(t, {**REVS, 2: eight}).column("depth").to_pylist() == [2]


@pytest.mark.parametrize(
    "blocks,fragment",
    [
        ('[{"cubeId":"g","foo":1}]', "unknown fields \\['foo'\\]"),
        ('[{"cubeId":"g","minWeight":99999999999}]', "outside the int32"),
        ('[{"cubeId":"gB"}]', "not a cube of revision 1"),
        ('[{"cubeId":"g-"}]', "not a cube of revision 1"),
        ("nope", "not valid JSON"),
        ("{}", "not a JSON array"),
        ("null", "not a JSON array"),
        ('[{"minWeight":1}]', "without a cubeId"),
        ('[{"cubeId":"g","elementCount":-4}]', "negative elementCount"),
        ('[{"cubeId":"g","elementCount":"4"}]', "bad elementCount"),
        ('[{"cubeId":"g","replicated":"no"}]', "replicated"),
    ],
)
def test_bad_blocks_name_the_file(blocks, fragment):
    t = files_table([[("revision", "1"), ("blocks", "[]")], [("revision", "1"), ("blocks", blocks)]])
    with pytest.raises(CorruptIndexMetadataError, match=fragment) as e:
        block_table(t, REVS)
    assert "part-1.parquet" in str(e.value)


def test_bad_revision_tags():
    with pytest.raises(CorruptIndexMetadataError, match="part-0.parquet.*not a revision number"):
        block_table(files_table([[("revision", "one")]]), REVS)
    with pytest.raises(CorruptIndexMetadataError, match="qbeast.revision.5"):
        block_table(files_table([[("revision", "5"), ("blocks", "[]")]]), REVS)


def test_empty_and_sliced_inputs():
    empty = files_table([])
    assert block_table(empty, REVS).num_rows == 0
    t = files_table([[("revision", "1"), ("blocks", BLOCKS_JSON)]] * 4)
    sliced = t.slice(2, 2)
    bt = block_table(sliced, REVS)
    assert bt.column("file_index").to_pylist() == [0, 0, 1, 1]


def test_million_files():
    import pyarrow.compute as pc

    n = 1_000_000
    rng = np.random.default_rng(3)
    cubes = np.array(["", "A", "Q", "g", "w", "gw", "wQ"])
    pick = rng.integers(0, len(cubes), size=n)
    counts = rng.integers(1, 1000, size=n)
    cube_arr = pa.array(cubes).take(pa.array(pick))
    one = pc.binary_join_element_wise(
        '{"cubeId":"', cube_arr, '","minWeight":-5,"maxWeight":9,"elementCount":', pc.cast(pa.array(counts), pa.string()), "}", ""
    )
    triple = np.arange(n) % 10 == 0  # every 10th file holds three blocks
    text = pc.if_else(
        pa.array(triple),
        pc.binary_join_element_wise("[", one, ",", one, ",", one, "]", ""),
        pc.binary_join_element_wise("[", one, "]", ""),
    )
    staging = np.arange(n) % 97 == 0  # and every 97th is a staging file (its blocks are ignored)
    revs = pa.array(np.where(staging, "0", "1"))
    items = pa.concat_arrays([revs, text]).take(pa.array(np.column_stack([np.arange(n), n + np.arange(n)]).ravel()))
    keys = pa.array(["revision", "blocks"]).take(pa.array(np.tile([0, 1], n)))
    tags = pa.MapArray.from_arrays(pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32)), keys, items)
    files = pa.table(
        {
            "path": pc.binary_join_element_wise("f", pc.cast(pa.array(np.arange(n)), pa.string()), ""),
            "tags": tags,
            "stats": pa.nulls(n, pa.string()),
        }
    )

    bt = block_table(files, REVS)

    per_file = np.where(staging, 1, np.where(triple, 3, 1))
    assert bt.num_rows == int(per_file.sum())
    fi = bt.column("file_index").to_numpy()
    assert np.array_equal(fi, np.repeat(np.arange(n), per_file))
    code = np.where(staging, 0, pick)[fi]  # cube "" is code 0
    got = pc.index_in(bt.column("cube_id"), value_set=pa.array(cubes)).to_numpy()
    assert np.array_equal(got, code)
    assert np.array_equal(bt.column("element_count").to_numpy(), np.where(staging, 0, counts)[fi])
    assert np.array_equal(bt.column("depth").to_numpy(), np.array([len(c) for c in cubes])[code])
    assert np.array_equal(bt.column("revision_id").to_numpy(), np.where(staging, 0, 1)[fi])
    assert np.array_equal(bt.column("min_weight").to_numpy(), np.where(staging, MIN_WEIGHT, -5)[fi])
