"""ZOrder/Hilbert without Spark: the curve keys, the `zorder-by` configuration and which files the
strategies select (synthetic snapshots carrying ZCube tags)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import itertools

import numpy as np
import pyarrow as pa
import pytest

from _optimize_snapshots import files_table
from use.errors import ConfigError, InvalidArgumentError, UnknownStrategyError
from use.optimize import curves
from use.optimize.config import OptimizationConfig, zorder_strategy
from use.optimize.plan import KIND_CLUSTER, MergeTask
from use.optimize.planner import Planner, default_chain
from use.optimize.strategies import registry
from use.optimize.strategies.zorder import ZCUBE_CURVE_TAG, ZCUBE_ID_TAG, ZCUBE_ZORDER_BY_TAG, zcube_tags
from use.qbeast.revision import REVISION_PREFIX
from use.qbeast.snapshot import QbeastSnapshot

# --- curve keys --------------------------------------------------------------------------------------


def _grid(d: int, bits: int) -> np.ndarray:
    return np.array(list(itertools.product(range(1 << bits), repeat=d)), dtype=np.uint64)


@pytest.mark.parametrize("d, bits", [(2, 1), (2, 3), (2, 4), (3, 2), (3, 3), (4, 2)])
def test_hilbert_index_is_a_bijection_whose_neighbours_are_adjacent_cells(d: int, bits: int) -> None:
    pts = _grid(d, bits)
    key = np.array(curves.curve_key([pts[:, i] for i in range(d)], curves.HILBERT, 1 << bits).to_pylist())
    assert sorted(key.tolist()) == list(range(len(pts)))
    walk = pts[np.argsort(key)].astype(np.int64)
    assert (np.abs(np.diff(walk, axis=0)).sum(axis=1) == 1).all()  # every step moves to a neighbouring cell


def test_zorder_key_interleaves_bits_most_significant_first_first_column_first() -> None:
    pts = _grid(3, 3)
    key = curves.curve_key([pts[:, i] for i in range(3)], curves.ZORDER, 8).to_pylist()

    def reference(p: np.ndarray) -> int:
        out = 0
        for b in range(2, -1, -1):
            for v in p:
                out = (out << 1) | ((int(v) >> b) & 1)
        return out

    assert key == [reference(p) for p in pts]
    # One column has no curve: the key is the bucket id, whatever the curve.
    one = [np.arange(8, dtype=np.uint64)]
    assert (
        curves.curve_key(one, curves.HILBERT, 8).to_pylist()
        == curves.curve_key(one, curves.ZORDER, 8).to_pylist()
        == list(range(8))
    )


def test_wide_keys_are_big_endian_binary_ordered_like_the_bits() -> None:
    rng = np.random.default_rng(3)
    ids = [rng.integers(0, 1000, 200).astype(np.uint64) for _ in range(7)]  # 70 bits: no int64
    assert not curves.key_is_long(7) and curves.key_is_long(6)
    for curve in curves.CURVES:
        key = curves.curve_key(ids, curve)
        assert key.type == pa.binary() and {len(k) for k in key.to_pylist()} == {9}
        as_ints = [int.from_bytes(k, "big") for k in key.to_pylist()]
        assert len(set(as_ints)) == len(set(zip(*(i.tolist() for i in ids), strict=False)))  # distinct points, distinct keys
    # The first six columns alone fit an int64; its order is the binary key's order of those bits.
    six = curves.curve_key(ids[:6], curves.ZORDER).to_pylist()
    assert all(v >= 0 for v in six)


def test_range_buckets_follow_sample_quantiles_and_put_nulls_first() -> None:
    sample = pa.array([5, 1, None, 3, 3, 3, 9, 7])
    bounds = curves.range_bounds(sample, 4)
    assert bounds.tolist() == [3, 7]  # values at ranks 7*i//4 of [1,3,3,3,5,7,9], deduplicated
    assert curves.range_ids(pa.array([0, 3, 4, 7, 8, None]), bounds).tolist() == [0, 0, 1, 1, 2, 0]
    assert curves.range_bounds(pa.array([None, None], pa.int64())).size == 0
    assert curves.range_ids(pa.array([1, None]), curves.range_bounds(pa.array([], pa.int64()))).tolist() == [0, 0]
    # 100 distinct values and 1000 buckets: one bucket per value, in order.
    many = pa.array(np.arange(100, dtype=np.int64)[::-1])
    assert curves.range_ids(many, curves.range_bounds(many)).tolist() == list(range(99, -1, -1))


@pytest.mark.parametrize(
    "values",
    [
        pa.array(["b", "a", "ä", "zz", None, "b" * 40 + "x"]),
        pa.array([dt.date(2020, 1, 3), dt.date(1999, 5, 1), None, dt.date(2020, 1, 2)]),
        pa.array([dt.datetime(2020, 1, 1, 0, 0, 1), None, dt.datetime(2019, 1, 1)], pa.timestamp("us", tz="UTC")),
        pa.array([decimal.Decimal("1.50"), decimal.Decimal("-2.25"), None, decimal.Decimal("1.49")], pa.decimal128(5, 2)),
        pa.array([1.5, float("nan"), -0.5, None, 7.0]),
        pa.array([3, 1, 2], pa.int8()),
    ],
)
def test_every_orderable_type_buckets_in_spark_order(values: pa.Array) -> None:
    ids = curves.range_ids(values, curves.range_bounds(values))
    valid = [(v, i) for v, i in zip(values.to_pylist(), ids.tolist(), strict=False) if v is not None]
    nan_last = [(float("inf") if isinstance(v, float) and v != v else v, i) for v, i in valid]
    ordered = sorted(nan_last, key=lambda p: p[0].encode() if isinstance(p[0], str) else p[0])
    assert [i for _, i in ordered] == sorted(i for _, i in ordered)  # buckets never invert the order
    assert [i for v, i in zip(values.to_pylist(), ids.tolist(), strict=False) if v is None] == [0] * values.null_count


def test_curve_keys_refuse_bad_input() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown clustering curve"):
        curves.curve_key([np.zeros(1, np.uint64)], "peano")
    with pytest.raises(InvalidArgumentError, match="at least one column"):
        curves.curve_key([], curves.ZORDER)
    with pytest.raises(InvalidArgumentError, match="bool"):
        curves.sortable(pa.array([True]))


# --- configuration ------------------------------------------------------------------------------------


def test_zorder_by_is_parsed_from_text_lists_and_backticks() -> None:
    assert OptimizationConfig.from_properties({"use.optimization.zorder-by": " a, b.c "}).zorder_by == ("a", "b.c")
    assert OptimizationConfig.from_properties({}, {"zorder_by": ["x", "y"]}).zorder_by == ("x", "y")
    assert OptimizationConfig.from_properties({}, {"zorder-by": "`odd.name`,z"}).zorder_by == ("odd.name", "z")
    config = OptimizationConfig.from_properties({}, {"max-file-size": "1000"})
    assert config.zorder_by is None and config.min_cube_size_limit == 100_000  # 100 x max-file-size
    assert OptimizationConfig.from_properties({}, {"zorder.min-cube-size": "5"}).min_cube_size_limit == 5
    assert OptimizationConfig.from_properties({}, {"zorder_by": "a,b"}).to_properties() == {"use.optimization.zorder-by": "a,b"}


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"zorder-by": ""}, "zorder-by"),
        ({"zorder-by": "a,A"}, "distinct"),
        ({"zorder-by": "a,,b"}, "zorder-by.*comma-separated column names"),
        ({"zorder-by": "a,"}, "zorder-by.*comma-separated column names"),
        ({"zorder-by": []}, "zorder-by"),
        ({"zorder-by": [1, 2]}, "zorder-by"),
        ({"zorder-by": "`a"}, "backtick"),
        ({"zorder.min-cube-size": "0"}, "min-cube-size"),
        ({"strategies": "ZOrder"}, "needs use.optimization.zorder-by"),
        ({"type": "Hilbert"}, "selects Hilbert, which needs use.optimization.zorder-by"),
    ],
)
def test_bad_zorder_configuration_is_a_config_error(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        OptimizationConfig.from_properties({}, overrides)


def test_zorder_by_implies_the_zorder_strategy_unless_one_is_named() -> None:
    assert zorder_strategy(None, None) is None
    assert zorder_strategy(None, "a,b") == "ZOrder"
    assert zorder_strategy("Hilbert", ["a"]) == "Hilbert"
    assert registry.canonical_name("z-order") == "ZOrder" and registry.canonical_name("hilbertcurve") == "Hilbert"
    with pytest.raises(UnknownStrategyError):
        registry.canonical_name("Peano")


def test_cluster_tasks_carry_their_key_and_only_they_do() -> None:
    task = MergeTask("ZOrder", -1, ("f",), 1, 1, 0.0, "r", KIND_CLUSTER, cluster_by=("a", "b"), curve="zorder")
    assert task.to_dict()["cluster_by"] == ["a", "b"] and task.to_dict()["curve"] == "zorder"
    with pytest.raises(InvalidArgumentError, match="needs cluster_by"):
        MergeTask("ZOrder", -1, ("f",), 1, 1, 0.0, "r", KIND_CLUSTER, curve="zorder")
    with pytest.raises(InvalidArgumentError, match="needs cluster_by"):
        MergeTask("ZOrder", -1, ("f",), 1, 1, 0.0, "r", KIND_CLUSTER, cluster_by=("a",), curve="peano")
    with pytest.raises(InvalidArgumentError, match="belong to cluster tasks"):
        MergeTask("BinPacking", -1, ("f",), 1, 1, 0.0, "r", "binpack", cluster_by=("a",))


# --- selection ----------------------------------------------------------------------------------------

SCHEMA = pa.schema(
    [("x", pa.float64()), ("y", pa.int64()), ("st", pa.struct([("u", pa.int32())])), ("flag", pa.bool_()), ("s", pa.string())]
)


def _snapshot(files: list[tuple[str, int, str, dict | None]], configuration: dict | None = None) -> QbeastSnapshot:
    """Files as (path, size, partition s, tags)."""
    table = files_table([f[0] for f in files], [f[1] for f in files], partitions=[{"s": f[2]} for f in files])
    tags = pa.array([None if f[3] is None else list(f[3].items()) for f in files], pa.map_(pa.string(), pa.string()))
    table = table.set_column(table.column_names.index("tags"), "tags", tags)
    snap = QbeastSnapshot.from_tables(files=table, blocks=None, revisions={}, version=7, table_root="/t",
                                      configuration=configuration or {}, schema=SCHEMA)  # fmt: skip
    return dataclasses.replace(snap, partition_columns=("s",))


def _plan(snap: QbeastSnapshot, strategy: str = "ZOrder", **overrides: object):
    settings = {"zorder-by": "x,y", "max-file-size": 100, "open-file-cost": 0, **overrides}
    config = OptimizationConfig.from_properties({}, settings)
    return Planner([strategy], config).plan(snap)


def _zorder(cube: str, columns: str = '["x","y"]', curve: str | None = "zorder") -> dict:
    tags = {ZCUBE_ID_TAG: cube, ZCUBE_ZORDER_BY_TAG: columns}
    if curve is not None:
        tags[ZCUBE_CURVE_TAG] = curve
    return tags


def test_a_fresh_table_is_one_task_per_partition_holding_all_its_files() -> None:
    snap = _snapshot([("a1", 10, "a", None), ("b1", 30, "b", None), ("a2", 20, "a", None)])
    plan = _plan(snap)
    assert [(t.partition_dict, t.paths, t.bytes, t.kind, t.cluster_by, t.curve) for t in plan.tasks] == [
        ({"s": "a"}, ("a1", "a2"), 30, KIND_CLUSTER, ("x", "y"), "zorder"),
        ({"s": "b"}, ("b1",), 30, KIND_CLUSTER, ("x", "y"), "zorder"),
    ]
    assert [t.score for t in plan.tasks] == [1.0, 1.0] and "2 file(s) not clustered" in plan.tasks[0].reason
    # The merge term: files that disappear, at open-file-cost each, per byte.
    assert _plan(snap, **{"open-file-cost": 30}).tasks[0].score == pytest.approx(1.0 + 30 / 30)
    # bytes-per-iter bounds the partitions of one plan (at least one), never splits one.
    assert len(_plan(snap, **{"bytes-per-iter": 40}).tasks) == 1 and len(_plan(snap, **{"bytes-per-iter": 5}).tasks) == 1


def test_a_partition_that_is_one_zcube_of_the_key_is_a_fixed_point() -> None:
    snap = _snapshot([("a1", 10, "a", _zorder("c1")), ("a2", 10, "a", _zorder("c1")), ("b1", 10, "b", _zorder("c2", curve=None))])
    assert _plan(snap).is_empty  # a Delta ZCube without a curve tag is a Z-order one
    # Another curve, other columns or another column order is another key: everything is selected.
    assert _plan(snap, strategy="Hilbert").num_files == 3
    assert _plan(snap, **{"zorder-by": "y,x"}).num_files == 3
    assert _plan(snap, **{"zorder-by": "x"}).num_files == 3
    assert _plan(_snapshot([("a1", 10, "a", _zorder("c1", columns="not json"))])).num_files == 1


def test_new_files_merge_into_small_zcubes_but_leave_settled_ones_alone() -> None:
    files = [
        ("a1", 50, "a", _zorder("c1")),
        ("a2", 50, "a", _zorder("c1")),
        ("a3", 10, "a", None),
        ("b1", 10, "b", _zorder("c2")),
    ]
    snap = _snapshot(files)
    # Default min-cube-size (100 x max-file-size): the ZCube is small, the partition is re-sorted whole.
    (task,) = _plan(snap).tasks
    assert task.paths == ("a1", "a2", "a3") and task.bytes == 110 and task.score == pytest.approx((10 + 0) / 110)
    # A ZCube of at least min-cube-size is settled: only the new file is clustered (a new ZCube).
    (task,) = _plan(snap, **{"zorder.min-cube-size": 100}).tasks
    assert task.paths == ("a3",)
    # Two small ZCubes of the key and no new file: merged into one; settled ones stay out of it.
    two = _snapshot([("a1", 10, "a", _zorder("c1")), ("a2", 10, "a", _zorder("c2")), ("a3", 500, "a", _zorder("c3"))])
    (task,) = _plan(two, **{"zorder.min-cube-size": 100}).tasks
    assert task.paths == ("a1", "a2") and "0 file(s) not clustered" in task.reason and "2 file(s) of 2 ZCube(s)" in task.reason
    assert _plan(
        _snapshot([("a1", 10, "a", _zorder("c1")), ("a3", 500, "a", _zorder("c3"))]), **{"zorder.min-cube-size": 100}
    ).is_empty


@pytest.mark.parametrize(
    "columns, message",
    [
        ("x,nope", "'nope', which is not a column of the table"),
        ("s", "partition column"),
        ("st", "a struct: name one of its fields"),
        ("flag", "of type bool, which cannot be ordered"),
        ("x,X", "distinct"),
    ],
)
def test_bad_key_columns_are_refused_before_any_plan(columns: str, message: str) -> None:
    snap = _snapshot([("a1", 10, "a", None)])
    with pytest.raises(ConfigError, match=message):
        _plan(snap, **{"zorder-by": columns})
    assert _plan(snap, **{"zorder-by": "st.u,x"}).tasks[0].cluster_by == ("st.u", "x")


def test_a_column_without_stats_is_refused_as_delta_does() -> None:
    snap = _snapshot([("a1", 10, "a", None)], configuration={"delta.dataSkippingNumIndexedCols": "1"})
    with pytest.raises(ConfigError, match="'y', which has no min/max statistics"):
        _plan(snap)
    snap = _snapshot([("a1", 10, "a", None)], configuration={"delta.dataSkippingStatsColumns": "y"})
    with pytest.raises(ConfigError, match="'x', which has no min/max statistics"):
        _plan(snap)


def test_strategies_need_their_columns_and_a_plain_table() -> None:
    snap = _snapshot([("a1", 10, "a", None)])
    with pytest.raises(ConfigError, match="ZOrder needs use.optimization.zorder-by"):
        registry.get("ZOrder").select(snap, OptimizationConfig())
    qbeast = _snapshot([("a1", 10, "a", None)], configuration={REVISION_PREFIX + "0": "{}"})
    assert qbeast.is_qbeast
    with pytest.raises(ConfigError, match="is a Qbeast table"):
        _plan(qbeast)
    assert _plan(_snapshot([])).is_empty


def test_the_table_properties_make_zorder_the_default_chain_of_a_plain_table() -> None:
    config = OptimizationConfig.from_properties({"use.optimization.type": "ZOrder", "use.optimization.zorder-by": "x"})
    assert default_chain(_snapshot([]), config) == ("ZOrder",)
    assert zcube_tags(("x", "`a.b`"), "hilbert", "id") == {
        ZCUBE_ID_TAG: "id", ZCUBE_ZORDER_BY_TAG: '["x","`a.b`"]', ZCUBE_CURVE_TAG: "hilbert"
    }  # fmt: skip
