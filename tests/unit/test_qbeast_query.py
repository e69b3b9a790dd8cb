"""Pure query planning: query spaces (§1.7), cube selection (§5.2) and file selection (§2.4)."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from use.delta.predicates import And, Comparison, InList, IsNull, Not, Or, Unknown
from use.qbeast.cube import CubeId
from use.qbeast.query import (
    AllSpace,
    EmptySpace,
    QuerySpaceFromTo,
    query_spaces,
    select_blocks,
    select_cubes,
    select_files,
)
from use.qbeast.transform import DATE, INTEGER, EmptyTransformation, HashTransformation, LinearTransformation
from use.qbeast.weight import MAX_WEIGHT, MIN_WEIGHT, weight_from_fraction

LIN_X = LinearTransformation(0, 100, 50, INTEGER)
LIN_D = LinearTransformation(0, 1000 * 86_400_000, 0, DATE)
HASH = HashTransformation(7)


@dataclass(frozen=True)
class Rev:
    """The two attributes of a Revision the planner reads."""

    columns: tuple[str, ...]
    transformations: tuple[Any, ...]


def spaces(pred, cols=("x", "name"), trans=(LIN_X, HASH)):
    return query_spaces(pred, list(cols), list(trans))


def test_linear_ranges_become_boxes():
    [s] = spaces(And(Comparison("x", ">=", 25), Comparison("x", "<", 45)))
    assert isinstance(s, QuerySpaceFromTo)
    assert s.from_[0] == pytest.approx(0.25, abs=1e-6) and s.to[0] == pytest.approx(0.45, abs=1e-6)
    assert s.from_[1] is None and s.to[1] is None
    # the box intersects the cubes that hold x in [25, 45] only
    assert s.intersects(CubeId.from_string(2, "A")) and not s.intersects(CubeId.from_string(2, "g"))
    # strict bounds are taken inclusively (conservative): x < 50 still touches the cube starting at 50
    [s] = spaces(Comparison("x", "<", 50))
    assert s.intersects(CubeId.from_string(2, "g"))


def test_out_of_range_and_contradictions_are_empty():
    assert spaces(Comparison("x", ">", 150)) == [EmptySpace()]
    assert spaces(Comparison("x", "<", -1)) == [EmptySpace()]
    assert spaces(And(Comparison("x", ">", 60), Comparison("x", "<", 40))) == [EmptySpace()]
    assert spaces(InList("x", ())) == [EmptySpace()]
    assert spaces(Comparison("x", "=", None)) == [EmptySpace()]  # type: ignore[arg-type]


def test_unusable_predicates_cover_everything():
    assert spaces(None) == [AllSpace()]
    assert spaces(Comparison("other", "=", 3)) == [AllSpace()]
    assert spaces(Unknown("f(x) > 1")) == [AllSpace()]
    assert spaces(IsNull("x")) == [AllSpace()]
    assert spaces(Comparison("x", "!=", 3)) == [AllSpace()]
    assert spaces(Comparison("name", ">", "m")) == [AllSpace()]  # hash order means nothing
    assert spaces(Or(Comparison("x", "<", 10), Comparison("other", "=", 1))) == [AllSpace()]
    # a staging revision has no space at all
    assert query_spaces(None, ["x"], [EmptyTransformation()]) == [EmptySpace()]


def test_hash_equality_is_a_point_search():
    [s] = spaces(Comparison("name", "=", "alice"))
    p = HASH.transform_value("alice")
    assert s.from_[0] is None and s.from_[1] == pytest.approx(p, abs=1e-6) and s.to[1] == pytest.approx(p, abs=1e-6)
    # exactly one child of the root holds the point in the hashed dimension per half of x
    root_children = CubeId.root(2).children()
    assert sum(s.intersects(c) for c in root_children) == 2


def test_or_and_in_split_into_boxes_and_not_is_pushed_down():
    assert len(spaces(Or(Comparison("x", "<", 10), Comparison("x", ">", 90)))) == 2
    assert len(spaces(InList("x", (1, 50, 99)))) == 3
    assert len(spaces(InList("name", ("a", "b")))) == 2
    [s] = spaces(Not(Comparison("x", "<", 80)))  # NOT(x < 80) == x >= 80
    assert s.from_[0] == pytest.approx(0.8, abs=1e-6) and s.to[0] is None


def test_dates_use_the_revision_transformation():
    """A date literal's coordinate, widened by 18 hours (the largest JVM zone offset) each way: a
    table written by qbeast-spark on a JVM outside UTC holds its dates at local midnight."""
    slack = 18 / 24 / 1000  # 18 hours of a 1000-day range
    [s] = query_spaces(Comparison("d", ">=", dt.date(1970, 1, 1) + dt.timedelta(days=500)), ["d"], [LIN_D])
    assert s.from_[0] == pytest.approx(0.5 - slack, abs=1e-6)
    [s] = query_spaces(Comparison("d", "=", dt.date(1970, 1, 1) + dt.timedelta(days=500)), ["d"], [LIN_D])
    assert s.from_[0] == pytest.approx(0.5 - slack, abs=1e-6) and s.to[0] == pytest.approx(0.5 + slack, abs=1e-6)
    # before the Gregorian calendar, Spark's rebasing moves dates by days: no pruning
    assert query_spaces(Comparison("d", "=", dt.date(1500, 1, 1)), ["d"], [LIN_D]) == [AllSpace()]


# --- cube selection against the spec's traversal ------------------------------------------------


def reference_selection(cubes: dict[CubeId, int], space_ok, weight_to: int) -> set[CubeId]:
    """§5.2 literally: a stack walk over the pre-order sorted cubes."""
    ordered = sorted(cubes)
    out: set[CubeId] = set()
    stack = [CubeId.root(ordered[0].dimensions)]
    while stack:
        cur = stack.pop()
        nxt = next((c for c in ordered if c >= cur), None)
        if nxt is None:
            continue
        if nxt == cur:
            out.add(cur)
            if weight_to > cubes[cur]:
                stack.extend(ch for ch in cur.children() if space_ok(ch))
        elif cur.is_ancestor_of(nxt):
            stack.extend(ch for ch in cur.children() if space_ok(ch))
    return out


def random_tree(rng: random.Random, d: int) -> dict[CubeId, int]:
    cubes: dict[CubeId, int] = {}
    frontier = [(CubeId.root(d), MIN_WEIGHT)]
    while frontier:
        cube, parent_w = frontier.pop()
        if cube.depth >= 4 or (cube.depth > 0 and rng.random() < 0.15):
            continue
        leaf = cube.depth == 3 or rng.random() < 0.3
        w = MAX_WEIGHT if leaf else rng.randint(max(parent_w, -(2**30)), 2**30)
        if cube.depth == 0 or rng.random() < 0.85:  # some cubes are missing but have descendants
            cubes[cube] = w
        if not leaf:
            frontier.extend((c, w) for c in cube.children())
    return cubes


@pytest.mark.parametrize("seed", range(12))
def test_vectorized_selection_equals_the_traversal(seed):
    rng = random.Random(seed)
    d = 2 if seed % 2 else 3
    cubes = random_tree(rng, d)
    lo = [rng.random() * 0.7 for _ in range(d)]
    box = QuerySpaceFromTo(tuple(lo), tuple(x + rng.random() * 0.5 for x in lo))
    expected = reference_selection(cubes, box.intersects, MAX_WEIGHT + 1)  # no sample: the walk goes everywhere the space does
    got = select_cubes([c.to_string() for c in cubes], d, [box])
    assert {c for c, ok in zip(cubes, got, strict=False) if ok} == expected


def blocks_of_tree(rng: random.Random, cubes: dict[CubeId, int]) -> list[tuple]:
    """One or two blocks per present cube, as writers leave them: maxWeight the cube's weight, minWeight
    the exact lightest row, at or above the weight its rows passed their parent with (the parent's, or
    a missing parent's own ancestor's)."""
    rows = []
    for i, (cube, w) in enumerate(sorted(cubes.items())):
        parent_w = MIN_WEIGHT
        for anc in sorted(cubes):
            if anc.is_ancestor_of(cube) and anc != cube:
                parent_w = max(parent_w, cubes[anc])
        for _ in range(rng.randint(1, 2)):
            rows.append((i, 1, cube.to_string(), rng.randint(parent_w, min(w, MAX_WEIGHT - 1)), w, 10))
    return rows


@pytest.mark.parametrize("seed", range(12))
def test_sample_blocks_equal_the_spec_walk_on_a_consistent_tree(seed):
    """Blocks selected by their own weight range are the spec's walk (which stops below a cube whose
    status maxWeight covers the sample) and its block filter, wherever every routing weight is some
    block's maxWeight: the walk's stop is then implied by the deeper blocks' minWeights."""
    rng = random.Random(seed)
    cubes = random_tree(rng, 2)
    rows = blocks_of_tree(rng, cubes)
    blocks = block_table(rows)
    revisions = {1: Rev(("x", "y"), (LIN_X, LIN_X))}
    for weight_to in (MIN_WEIGHT + 1, rng.randint(-(2**30), 2**30), rng.randint(-(2**30), 2**30), MAX_WEIGHT):
        walked = {c.to_string() for c in reference_selection(cubes, AllSpace().intersects, weight_to)}
        expected = [r[2] in walked and weight_to > r[3] for r in rows]
        assert select_blocks(blocks, revisions, None, (MIN_WEIGHT, weight_to)).tolist() == expected


def test_rows_an_append_sent_below_a_cube_whose_lower_weight_it_did_not_record_are_sampled():
    """An append lowers cube g's maxWeight and writes no row into g, so g's status (its only block,
    from the first write) still says g holds every row below -1604875184; the rows with weight
    -1821943649 the append sent down sit in gg. The spec's walk stopped at g for sample(0.1) and
    lost them; the block's own minWeight says they are there."""
    w_sample = int(weight_from_fraction(0.1))  # -1717986918
    rows = [
        (0, 1, "", MIN_WEIGHT, -1900000000, 10),
        (0, 1, "g", -1900000000, -1604875184, 10),  # the first write's block of g
        (1, 1, "gg", -1821943649, MAX_WEIGHT, 6),  # the append's, below g's lowered weight
        (1, 1, "gw", -1500000000, MAX_WEIGHT, 6),
    ]
    keep = select_blocks(block_table(rows), {1: Rev(("x", "y"), (LIN_X, LIN_X))}, None, (MIN_WEIGHT, w_sample))
    assert keep.tolist() == [True, True, True, False]


# --- file selection -------------------------------------------------------------------------------


def block_table(rows):
    return pa.table(
        {
            "file_index": pa.array([r[0] for r in rows], pa.int64()),
            "revision_id": pa.array([r[1] for r in rows], pa.int64()),
            "cube_id": pa.array([r[2] for r in rows], pa.string()),
            "depth": pa.array([len(r[2]) for r in rows], pa.int32()),
            "min_weight": pa.array([r[3] for r in rows], pa.int32()),
            "max_weight": pa.array([r[4] for r in rows], pa.int32()),
            "element_count": pa.array([r[5] for r in rows], pa.int64()),
        }
    )


def snapshot_with(blocks, n_files):
    files = pa.table(
        {
            "path": [f"f{i}.parquet" for i in range(n_files)],
            "size": pa.array([100] * n_files, pa.int64()),
            "stats": pa.array([None] * n_files, pa.string()),
            "revision_id": pa.array(
                sorted({(r[0], r[1]) for r in blocks}), pa.struct([("a", pa.int64()), ("b", pa.int64())])
            ).field(1),
        }
    )
    return SimpleNamespace(
        files=files,
        blocks=block_table(blocks),
        revisions={1: Rev(("x", "y"), (LIN_X, LIN_X))},
        schema=pa.schema([("x", pa.int32()), ("y", pa.int32())]),
    )


W_ROOT = weight_from_fraction(0.1)
BLOCKS = [
    # file, revision, cube, minWeight, maxWeight, count
    (0, 1, "", MIN_WEIGHT + 5, W_ROOT, 100),  # root, inner
    (1, 1, "A", W_ROOT + 1, MAX_WEIGHT, 50),  # x<50, y<50: leaf
    (1, 1, "Q", W_ROOT + 3, MAX_WEIGHT, 50),  # x<50, y>=50: rolled up in the same file
    (2, 1, "g", W_ROOT + 2, MAX_WEIGHT, 50),  # x>=50, y<50
    (3, 1, "w", W_ROOT + 9, MAX_WEIGHT, 50),  # x>=50, y>=50
    (4, 0, "", MIN_WEIGHT, MAX_WEIGHT, 10),  # a staging file
]


def selected(qsnap, predicate=None, weight_range=None):
    return [i for i, ok in enumerate(select_files(qsnap, predicate, weight_range).to_pylist()) if ok]


def test_small_samples_read_only_the_root_and_staging():
    qsnap = snapshot_with(BLOCKS, 5)
    assert selected(qsnap) == [0, 1, 2, 3, 4]
    assert selected(qsnap, None, (MIN_WEIGHT, weight_from_fraction(0.05))) == [0, 4]
    assert selected(qsnap, None, (MIN_WEIGHT, W_ROOT + 2)) == [0, 1, 4]  # weightTo > block.minWeight
    assert selected(qsnap, None, (MIN_WEIGHT, MAX_WEIGHT)) == [0, 1, 2, 3, 4]


def test_filters_select_cubes_by_space():
    qsnap = snapshot_with(BLOCKS, 5)
    high_x = Comparison("x", ">=", 60)
    assert selected(qsnap, high_x) == [0, 2, 3, 4]
    assert selected(qsnap, And(high_x, Comparison("y", "<", 20))) == [0, 2, 4]
    assert selected(qsnap, Comparison("x", ">", 500)) == [4]  # outside the revision: only staging
    assert selected(qsnap, And(high_x, Comparison("y", "<", 20)), (MIN_WEIGHT, weight_from_fraction(0.05))) == [0, 4]


def test_the_stats_mask_is_combined():
    qsnap = snapshot_with(BLOCKS, 5)
    mask = select_files(qsnap, None, None, stats_mask=np.array([True, True, False, True, False]))
    assert mask.to_pylist() == [True, True, False, True, False]
