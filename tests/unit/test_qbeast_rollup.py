"""Rollup of blocks into files (§3.5)."""

from __future__ import annotations

import pytest

from use.errors import InvalidArgumentError
from use.qbeast.rollup import rollup


def test_small_leaves_roll_into_parent() -> None:
    plan = rollup({"": 100, "A": 10, "Q": 10, "AA": 5, "g": 200}, limit=100, dimensions=2)
    assert plan.group_of["AA"] == ""  # AA -> A (15 < 100) -> root
    assert plan.group_of["A"] == ""
    assert plan.group_of["Q"] == ""
    assert plan.group_of["g"] == "g"  # big enough on its own
    assert plan.num_files == 2
    assert plan.file_of_group == {"": 0, "g": 1}


def test_group_key_without_own_block_owns_its_rows() -> None:
    plan = rollup({"": 1000, "AA": 60, "AQ": 60}, limit=100, dimensions=2)
    # AA and AQ merge into "A" (a cube with no block), which is then big enough.
    assert plan.group_of["AA"] == "A" and plan.group_of["AQ"] == "A"
    assert plan.file_of("A", 2) == plan.file_of("AA", 2)
    assert plan.file_of("AAw", 2) == plan.file_of("AA", 2)  # nearest ancestor in the plan
    assert plan.file_of("gg", 2) == plan.file_of("", 2)


def test_deterministic_and_dense_file_ids() -> None:
    sizes = {c: 50 for c in ["", "A", "Q", "g", "w", "AA", "wQ", "gg"]}
    a = rollup(sizes, limit=60, dimensions=2)
    b = rollup(dict(reversed(list(sizes.items()))), limit=60, dimensions=2)
    assert a == b
    assert sorted(a.file_of_group.values()) == list(range(a.num_files))
    import numpy as np

    values, found = a.file_lookup().lookup(np.array([b"", b"wQ", b"zz"]), -1)
    assert found.tolist() == [True, True, False]
    assert values[0] == a.file_of("", 2) and values[1] == a.file_of("wQ", 2)


def test_a_whole_cube_keeps_its_group_however_small() -> None:
    sizes = {"": 100, "A": 94, "AA": 3, "Q": 10}
    assert rollup(sizes, limit=100, dimensions=2).group_of["A"] == ""  # 97 < 100: into the root's file
    plan = rollup(sizes, limit=100, dimensions=2, whole={"A"})
    assert plan.group_of["A"] == "A" and plan.group_of["AA"] == "A"  # smaller groups below still join it
    assert plan.group_of["Q"] == "" and plan.num_files == 2


def test_whole_inner_cubes_are_the_full_cubes_all_of_whose_blocks_a_rewrite_reads() -> None:
    import pyarrow as pa

    from use.qbeast.blocks import BLOCK_TABLE_SCHEMA
    from use.qbeast.index_plan import whole_inner_cubes
    from use.qbeast.index_status import InputBlocks

    def blocks(rows: list[tuple[str, int]]) -> InputBlocks:
        table = pa.Table.from_pylist(
            [{"file_index": 0, "revision_id": 1, "cube_id": c, "depth": len(c), "min_weight": 0, "max_weight": 5,
              "element_count": n} for c, n in rows], schema=BLOCK_TABLE_SCHEMA)  # fmt: skip
        return InputBlocks(table, 1, sum(n for _, n in rows))

    weights = {"": 10, "A": 20, "Q": 20, "AA": 2**31 - 1}
    table = {"": 100, "A": 94, "Q": 120, "AA": 3}
    got = whole_inner_cubes(blocks([("", 100), ("A", 90), ("A", 4), ("Q", 100), ("AA", 3)]), 1, weights, table)
    # A: every block read (90 + 4 = its 94); Q: 20 of its rows elsewhere (a fragment); AA: a leaf; the root
    # is a group anyway
    assert got == {"A"}
    assert whole_inner_cubes(None, 1, weights, table) == frozenset()


def test_root_alone_is_kept_even_when_small() -> None:
    plan = rollup({"": 1}, limit=100, dimensions=3)
    assert plan.group_of == {"": ""}


def test_bad_limit() -> None:
    with pytest.raises(InvalidArgumentError):
        rollup({"": 1}, limit=0, dimensions=2)
