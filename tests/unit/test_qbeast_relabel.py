"""Moving a superseded revision's files into the latest one by their tags (`use.qbeast.relabel`):
pure checks of the alignment rule, the cube mapping and the re-added files. The table-level checks
(reads unchanged, delta-rs, conflicts) are in test_optimize_relabel_tables.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from use.delta.predicates import Comparison, InList
from use.qbeast.blocks import Block, blocks_json
from use.qbeast.cube import CubeId
from use.qbeast.relabel import aligned_growth, alignment, growth_shift, relabelled_adds
from use.qbeast.revision import Revision, parse_column_specs
from use.qbeast.revision_change import compute_revision_change, widened
from use.qbeast.transform import LinearTransformation

XY = pa.schema([("x", pa.float64()), ("y", pa.float64())])
D = "DoubleDataType"


def _rev(rid: int, x: tuple[float, float], y: tuple[float, float] = (0.0, 100.0), null_x: float = 1.0) -> Revision:
    first, _ = compute_revision_change(
        None,
        parse_column_specs("x,y", XY),
        {"x_min": 0.0, "x_max": 1.0, "y_min": 0.0, "y_max": 1.0, "count": 1},
        10,
        None,
        "/t",
        1,
    )
    return replace(
        first, revision_id=rid, transformations=(LinearTransformation(*x, null_x, D), LinearTransformation(*y, 5.0, D))
    )


def test_growth_shift_accepts_only_exact_upward_powers_of_two_from_the_same_minimum() -> None:
    old = LinearTransformation(-10.0, 110.5, 3.0, D)
    assert growth_shift(old, old) == 0
    assert growth_shift(old, replace(old, max_number=231.0)) == 1  # span 120.5 -> 241
    assert growth_shift(old, replace(old, max_number=472.0)) == 2
    assert growth_shift(old, replace(old, max_number=300.0)) is None  # not a power of two
    assert growth_shift(old, replace(old, min_number=-20.0, max_number=221.0)) is None  # the minimum moved
    assert growth_shift(old, replace(old, max_number=231.0, null_value=4.0)) is None  # nulls would move
    assert growth_shift(old, LinearTransformation(-10.0, 110.5 / 2 - 5.0, 3.0, D)) is None  # shrank
    f = LinearTransformation(0.0, 1.0, 0.5, "FloatDataType")  # float32 bounds: not exact in float64 terms
    assert growth_shift(f, replace(f, max_number=2.0)) is None
    i = LinearTransformation(0, 100, 7, "IntegerDataType")
    assert growth_shift(i, replace(i, max_number=400)) == 2
    assert growth_shift(i, replace(i, max_number=2**32)) is None  # ratio not 2^k
    big = LinearTransformation(0, 2**54, 7, "LongDataType")
    assert growth_shift(big, replace(big, max_number=2**55)) is None  # past float64's exact integers


def test_aligned_growth_takes_the_smallest_power_reaching_the_target_and_keeps_the_null_value() -> None:
    old = LinearTransformation(-10.0, 110.5, 3.0, D)
    assert aligned_growth(old, 120.0) == replace(old, max_number=231.0)
    assert aligned_growth(old, 231.0) == replace(old, max_number=231.0)
    assert aligned_growth(old, 231.5) == replace(old, max_number=472.0)
    assert aligned_growth(old, 472.5) is None  # 8x: a jump, not a drift (MAX_SHIFT)
    i = LinearTransformation(0, 2**29, 7, "IntegerDataType")
    assert aligned_growth(i, 2**31) is None  # an Integer column cannot hold the grown bound
    assert aligned_growth(LinearTransformation(0.0, 1.0, 0.5, "FloatDataType"), 1.5) is None


def test_a_cube_maps_to_the_cube_holding_its_points_in_the_grown_space() -> None:
    """Every point of an old cube (coordinates below 1.0) lies in the relabelled cube of the new
    revision, at every depth and for every shift: the rows are already where the new revision
    puts them."""
    rng = np.random.default_rng(3)
    assert alignment(_rev(1, (0.0, 50.0)), _rev(2, (0.0, 400.0))) is None  # 8 old cubes in one: re-indexed
    for k in (1, 2):
        al = alignment(_rev(1, (0.0, 50.0)), _rev(2, (0.0, 50.0 * 2**k)))
        assert al is not None and al.shifts == (k, 0)
        for v in rng.uniform(0, 1, (300, 2)):
            for depth in (0, 1, 2, 5):
                old = CubeId.container(list(v), depth).to_string()
                new = CubeId.container([v[0] / 2**k, v[1]], depth).to_string()
                assert al.relabel(old) == new, (k, v, depth)
    # siblings along the grown column share the new cube; along the other column they do not
    al = alignment(_rev(1, (0.0, 50.0)), _rev(2, (0.0, 100.0)))
    kids = [c.to_string() for c in CubeId.root(2).children()]
    assert len({al.relabel(c) for c in kids}) == 2


def test_only_revisions_grown_by_powers_of_two_in_linear_ranges_align() -> None:
    r1 = _rev(1, (0.0, 50.0))
    assert alignment(r1, _rev(2, (0.0, 50.0))) is None  # nothing grew: nothing to move
    assert alignment(r1, _rev(2, (0.0, 100.0), y=(-10.0, 110.0))) is None  # y widened by a margin
    assert alignment(r1, replace(_rev(2, (0.0, 100.0)), desired_cube_size=20)) is None
    assert alignment(r1, _rev(2, (0.0, 100.0), null_x=2.0)) is None
    al = alignment(r1, _rev(2, (0.0, 200.0)))
    assert al is not None and al.edge_predicate() == Comparison("x", ">=", 50.0)


def test_widening_upward_again_grows_the_range_by_a_power_of_two() -> None:
    old, origin = LinearTransformation(0.0, 150.0, 3.0, D), LinearTransformation(0.0, 100.0, 3.0, D)
    # data at 160 (10 past), moved 60 past the origin: the doubling's 220 rounds up to 0 + 2 x 150
    assert widened(old, LinearTransformation(0.0, 160.0, 0, D), 0.1, origin=origin) == replace(old, max_number=300.0)
    # the first widening (the revision is its own origin) and a downward one keep the margin rules
    w = widened(origin, LinearTransformation(0.0, 101.0, 0, D), 0.1, origin=origin)
    assert w.max_number == pytest.approx(111.1)
    w = widened(old, LinearTransformation(-5.0, 160.0, 0, D), 0.1, origin=origin)
    assert growth_shift(old, w) is None and w.min_number < -5.0


def test_relabelled_adds_keep_the_file_and_rewrite_only_its_tags() -> None:
    r1, r2 = _rev(1, (0.0, 50.0)), _rev(2, (0.0, 100.0))
    al = alignment(r1, r2)
    kids = [c.to_string() for c in CubeId.root(2).children()]
    blocks = [Block("", 0, 100, 10), Block(kids[0], 100, 900, 5), Block(kids[2], 100, 950, 6)]  # kids 0, 2: x siblings
    files = pa.table({
        "path": ["a.parquet"], "size": [123], "modification_time": [42], "stats": ['{"numRecords":21}'],
        "partition_values": pa.array([[]], pa.map_(pa.string(), pa.string())),
        "tags": pa.array([[("revision", "1"), ("blocks", blocks_json(blocks)), ("other", "kept")]], pa.map_(pa.string(), pa.string())),
    })  # fmt: skip
    block_rows = pa.table({
        "file_index": [0, 0, 0], "cube_id": [b.cube_id for b in blocks], "min_weight": pa.array([0, 100, 100], pa.int32()),
        "max_weight": pa.array([100, 900, 950], pa.int32()), "element_count": [10, 5, 6],
    })  # fmt: skip
    (add,) = relabelled_adds(files, block_rows, {1: al})
    assert (add.path, add.size, add.modification_time, add.stats, add.data_change) == (
        "a.parquet",
        123,
        42,
        '{"numRecords":21}',
        False,
    )
    assert add.tags["revision"] == "2" and add.tags["other"] == "kept"
    merged = al.relabel(kids[0])
    # both siblings' blocks are kept, each with its own weights: exact sampling needs both
    assert add.tags["blocks"] == blocks_json([Block("", 0, 100, 10), Block(merged, 100, 900, 5), Block(merged, 100, 950, 6)])
    with pytest.raises(Exception, match="re-index"):
        relabelled_adds(files, block_rows, {})


def test_timestamp_and_date_ranges_grow_exactly_and_their_edge_is_a_stats_value() -> None:
    import datetime as dt

    ms = 1_700_000_000_000
    ts = LinearTransformation(ms, ms + 86_400_000, ms + 5, "TimestampDataType")
    grown = aligned_growth(ts, ms + 3 * 86_400_000)
    assert grown is not None and grown.max_number == ms + 4 * 86_400_000 and growth_shift(ts, grown) == 2
    r1, r2 = _rev(1, (0.0, 1.0)), _rev(2, (0.0, 1.0))
    r1 = replace(r1, transformations=(ts, r1.transformations[1]))
    r2 = replace(r2, transformations=(grown, r2.transformations[1]))
    edge = alignment(r1, r2).edge_predicate()
    assert edge == Comparison("x", ">=", dt.datetime(2023, 11, 15, 22, 13, 20, tzinfo=dt.UTC))
    d = LinearTransformation(0, 10 * 86_400_000 + 1, 0, "DateDataType")  # a widened bound, not a midnight
    r1 = replace(r1, transformations=(d, r1.transformations[1]))
    r2 = replace(r2, transformations=(aligned_growth(d, 15 * 86_400_000), r2.transformations[1]))
    assert alignment(r1, r2).edge_predicate() == Comparison("x", ">=", dt.date(1970, 1, 11))  # the day holding it


def test_an_edge_past_the_last_timestamp_holds_no_row() -> None:
    """A timestamp range widened past year 9999 (its margins) has an edge no row can reach."""
    top = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z in epoch millis
    ts = LinearTransformation(top - 86_400_000, top + 86_400_000, top, "TimestampDataType")
    r1, r2 = _rev(1, (0.0, 1.0)), _rev(2, (0.0, 1.0))
    r1 = replace(r1, transformations=(ts, r1.transformations[1]))
    r2 = replace(r2, transformations=(aligned_growth(ts, top + 3 * 86_400_000), r2.transformations[1]))
    assert alignment(r1, r2).edge_predicate() == InList("x", ())
