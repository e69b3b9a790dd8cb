"""IndexStatus (§3.0): cube max weight = min over blocks, counts summed, normalized weights, domains."""

from __future__ import annotations

import pyarrow as pa
import pytest

from qbeast_fixtures import REVISION_JSON
from use.errors import InvalidArgumentError
from use.qbeast.blocks import BLOCK_TABLE_SCHEMA
from use.qbeast.index_status import IndexStatus
from use.qbeast.revision import Revision, staging_revision
from use.qbeast.weight import MAX_WEIGHT, MIN_WEIGHT, fraction

REV = Revision.from_json(REVISION_JSON)  # d = 2, desiredCubeSize 500000


def _blocks(rows):
    cols = list(zip(*rows, strict=False)) if rows else [[]] * 5
    fi, rid, cube, mw, ec = cols
    return pa.table(
        {
            "file_index": pa.array(fi, pa.int64()),
            "revision_id": pa.array(rid, pa.int64()),
            "cube_id": pa.array(cube, pa.string()),
            "depth": pa.array([len(c) for c in cube], pa.int32()),
            "min_weight": pa.array([MIN_WEIGHT] * len(fi), pa.int32()),
            "max_weight": pa.array(mw, pa.int32()),
            "element_count": pa.array(ec, pa.int64()),
        },
        schema=BLOCK_TABLE_SCHEMA,
    )


def test_fold_blocks_into_cubes():
    blocks = _blocks(
        [
            (0, 1, "", -1000, 500000),
            (1, 1, "", -2000, 10),  # a later block of the same cube carries a smaller estimate
            (0, 1, "A", MAX_WEIGHT, 100000),
            (2, 1, "w", MAX_WEIGHT, 250000),
            (3, 1, "0", MAX_WEIGHT, 1),  # irrelevant symbol order check is in test_cube; still sorted
            (4, 2, "g", 5, 7),  # other revision: ignored
        ]
    )
    st = IndexStatus.from_blocks(REV, blocks)
    assert st.cubes == ["", "A", "w", "0"]
    assert st.cube_weights() == {"": -2000, "A": MAX_WEIGHT, "w": MAX_WEIGHT, "0": MAX_WEIGHT}
    assert st.cube_element_counts() == {"": 500010, "A": 100000, "w": 250000, "0": 1}
    assert st.block_counts.tolist() == [2, 1, 1, 1]
    assert st.normalized_weight("") == fraction(-2000)
    assert st.normalized_weight("A") == 5.0 and st.normalized_weight("w") == 2.0
    assert not st.is_leaf("") and st.is_leaf("A")
    assert st.tree_leaf_mask().tolist() == [False, True, True, True]
    assert "" in st and "Q" not in st and len(st) == 4
    with pytest.raises(InvalidArgumentError, match="'Q'"):
        st.normalized_weight("Q")


def test_domains_split_by_sibling_tree_sizes():
    blocks = _blocks([(0, 1, "", -1000, 100), (0, 1, "A", -10, 60), (0, 1, "Q", MAX_WEIGHT, 20), (0, 1, "AA", MAX_WEIGHT, 20)])
    d = IndexStatus.from_blocks(REV, blocks).cube_domains()
    # tree sizes: AA 20, A 80, Q 20, root 200
    assert d[""] == 200.0
    assert d["A"] == pytest.approx(200 * 80 / 100) and d["Q"] == pytest.approx(200 * 20 / 100)
    assert d["AA"] == pytest.approx(160.0)


def test_staging_and_empty():
    st = IndexStatus.from_blocks(staging_revision("/t", ["id"], 10, 0), _blocks([(0, 0, "", MAX_WEIGHT, 99)]))
    assert st.cube_weights() == {"": MAX_WEIGHT} and st.cube_element_counts() == {"": 0}
    empty = IndexStatus.from_blocks(REV, _blocks([]))
    assert len(empty) == 0 and empty.cube_weights() == {} and empty.cube_domains() == {}
