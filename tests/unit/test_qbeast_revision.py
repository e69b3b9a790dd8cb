"""Revision JSON (§7.1), column specs (§4), revision changes (§3.1) and table properties."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from qbeast_fixtures import REVISION_JSON
from use.errors import CorruptIndexMetadataError, IndexColumnError, InvalidArgumentError, UnsupportedTypeError
from use.qbeast.revision import (
    Revision,
    configuration_with_revision,
    parse_column_specs,
    revisions_from_configuration,
    staging_revision,
    stats_aggregations,
)
from use.qbeast.revision_change import compute_revision_change, widening_origin
from use.qbeast.transform import HashTransformation, IdentityTransformation, LinearTransformation
from use.qbeast.transform_quantiles import CDFNumericQuantilesTransformation
from use.qbeast.transformers import EmptyTransformer, HashTransformer, LinearTransformer

SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string()), ("x", pa.float64()), ("b", pa.bool_())])


def test_real_revision_round_trips_byte_for_byte():
    rev = Revision.from_json(REVISION_JSON)
    assert rev.to_json() == REVISION_JSON
    assert rev.revision_id == 1 and rev.columns == ("id", "name") and rev.dimension_count == 2
    assert not rev.is_staging and rev.desired_cube_size == 500000
    assert rev.transformations[0] == LinearTransformation(1, 4000000, 2836883, "IntegerDataType")
    assert rev.transformations[1] == HashTransformation(-1628776639)


def test_staging_revision_json():
    st = staging_revision("/t", ["a", "b"], 100, 41)
    assert st.is_staging
    assert st.to_json() == (
        '{"revisionID":0,"timestamp":41,"tableID":"/t","desiredCubeSize":100,"columnTransformers":['
        '{"className":"io.qbeast.core.transform.EmptyTransformer","columnName":"a"},'
        '{"className":"io.qbeast.core.transform.EmptyTransformer","columnName":"b"}],"transformations":['
        '{"className":"io.qbeast.core.transform.EmptyTransformation"},{"className":"io.qbeast.core.transform.EmptyTransformation"}]}'
    )
    assert Revision.from_json(st.to_json()) == st


@pytest.mark.parametrize(
    "mutate,fragment",
    [
        (lambda o: o.pop("tableID"), "'tableID'"),
        (lambda o: o.update(revisionID="1"), "'revisionID'"),
        (lambda o: o.update(columnTransformers=[]), "no columnTransformers"),
        (lambda o: o["transformations"].pop(), "2 columnTransformers but 1"),
        (lambda o: o.update(desiredCubeSize=0), "desiredCubeSize"),
        (lambda o: o["transformations"][0].pop("orderedDataType"), "orderedDataType"),
    ],
)
def test_bad_revision_json(mutate, fragment):
    obj = json.loads(REVISION_JSON)
    mutate(obj)
    with pytest.raises(CorruptIndexMetadataError, match=fragment):
        Revision.from_json(json.dumps(obj), key="qbeast.revision.1")
    with pytest.raises(CorruptIndexMetadataError, match="qbeast.revision.1 is not valid JSON"):
        Revision.from_json("{nope", key="qbeast.revision.1")


def test_transform_batch():
    rev = Revision.from_json(REVISION_JSON)
    batch = pa.record_batch([pa.array([1, 4000000, None], pa.int32()), pa.array(["a", "b", None])], names=["id", "name"])
    pts = rev.transform(batch)
    assert pts.shape == (3, 2) and pts.dtype == np.float64
    assert pts[:, 0].tolist() == [0.0, 1.0, (2836883 - 1) / 3999999]
    assert np.all((pts >= 0) & (pts <= 1))
    with pytest.raises(IndexColumnError, match="'name'"):
        rev.transform(pa.table({"id": pa.array([1], pa.int32())}))


def test_column_specs():
    ts = parse_column_specs("id, name:hashing,x:quantiles", SCHEMA)
    assert [t.spec for t in ts] == ["id:linear", "name:hashing", "x:quantiles"]
    assert parse_column_specs(["x", "name"], SCHEMA) == (
        LinearTransformer("x", "DoubleDataType"),
        HashTransformer("name", "StringDataType"),
    )
    assert [t.spec for t in parse_column_specs(["id:hashing"], SCHEMA)] == ["id:hashing"]


@pytest.mark.parametrize(
    "specs,error,fragment",
    [
        ("nope", IndexColumnError, "available columns: id, name, x, b"),
        ("id,id", IndexColumnError, "twice"),
        ("id:", IndexColumnError, "malformed"),
        ("id:lin:ear", IndexColumnError, "malformed"),
        (":linear", IndexColumnError, "malformed"),
        ("id,,x", IndexColumnError, "empty column spec"),
        ("", IndexColumnError, "no columns"),
        ([], IndexColumnError, "no columns"),
        ("id:zorder", IndexColumnError, "linear, hashing, quantiles"),
        ("name:linear", UnsupportedTypeError, "name:hashing"),
        ("b", UnsupportedTypeError, "'b'"),
    ],
)
def test_bad_column_specs(specs, error, fragment):
    with pytest.raises(error, match=fragment):
        parse_column_specs(specs, SCHEMA)


def test_stats_aggregations():
    ts = parse_column_specs("id,name,x:quantiles", SCHEMA)
    assert stats_aggregations(ts) == [("id_min", "min", "id"), ("id_max", "max", "id"), ("count", "count", "*")]


def _first(stats=None, cube_size=100, column_stats=None, specs="id,name"):
    ts = parse_column_specs(specs, SCHEMA)
    return compute_revision_change(
        None, ts, stats or {"id_min": 1, "id_max": 10, "count": 5}, cube_size, column_stats, "/t", 1000
    )


def test_first_write_makes_revision_1():
    rev, new = _first()
    assert new and rev.revision_id == 1 and rev.timestamp == 1000 and rev.table_id == "/t"
    lin, h = rev.transformations
    assert (lin.min_number, lin.max_number) == (1, 10) and isinstance(h, HashTransformation)


def test_append_inside_space_is_not_a_change_and_outside_is():
    rev, _ = _first()
    ts = parse_column_specs("id,name", SCHEMA, existing=rev)
    same, new = compute_revision_change(rev, ts, {"id_min": 2, "id_max": 9, "count": 3}, 100, None, "/t", 2000)
    assert not new and same is rev
    wider, new = compute_revision_change(rev, ts, {"id_min": 0, "id_max": 9, "count": 3}, 100, None, "/t", 2000)
    assert new and wider.revision_id == 2 and wider.transformations[0].min_number == 0
    assert wider.transformations[0].max_number == 10 and wider.transformations[1] is rev.transformations[1]
    resized, new = compute_revision_change(rev, ts, {"id_min": 2, "id_max": 9, "count": 3}, 50, None, "/t", 2000)
    assert new and resized.desired_cube_size == 50 and resized.transformations == rev.transformations


def test_a_widened_range_grows_by_the_margin_on_the_side_the_data_passed():
    rev, _ = _first(stats={"id_min": 0, "id_max": 100, "count": 5})
    ts = parse_column_specs("id,name", SCHEMA, existing=rev)
    wider, new = compute_revision_change(rev, ts, {"id_min": 10, "id_max": 101, "count": 3}, 100, None, "/t", 2000, 0.1)
    lin = wider.transformations[0]
    assert new and (lin.min_number, lin.max_number) == (0, 112)  # span 101 x 0.1 = 10.1, rounded outwards
    assert wider.contains(rev) and not rev.contains(wider)
    # the next append a little past the old range stays in the widened revision
    same, new = compute_revision_change(wider, ts, {"id_min": 0, "id_max": 105, "count": 3}, 100, None, "/t", 3000, 0.1)
    assert not new and same is wider
    both, _ = compute_revision_change(rev, ts, {"id_min": -100, "id_max": 200, "count": 3}, 100, None, "/t", 2000, 0.5)
    assert (both.transformations[0].min_number, both.transformations[0].max_number) == (-250, 350)
    exact, _ = compute_revision_change(rev, ts, {"id_min": 10, "id_max": 101, "count": 3}, 100, None, "/t", 2000, 0.0)
    assert (exact.transformations[0].min_number, exact.transformations[0].max_number) == (0, 101)


XY = pa.schema([("x", pa.float64()), ("y", pa.float64())])


def _xy_stats(x: np.ndarray, y: np.ndarray) -> dict:
    return {"x_min": float(x.min()), "x_max": float(x.max()), "y_min": float(y.min()), "y_max": float(y.max()), "count": len(x)}


def _appends(batches, margin=0.1, column_stats=None, origin=True) -> list[Revision]:
    """The revisions a table gets from these (x, y) appends, one write each; `origin` passes the
    table's widening origin as the writer does."""
    revs, rev = [], None
    for i, (x, y) in enumerate(batches):
        ts = parse_column_specs("x,y", XY, existing=rev)
        start = widening_origin(revs, rev) if origin and rev is not None else None
        rev, new = compute_revision_change(rev, ts, _xy_stats(x, y), 2000, column_stats, "/t", 1000 + i, margin, start)
        if new:
            revs.append(rev)
    return revs


def test_a_new_revision_also_widens_the_edges_the_data_reached_without_passing():
    rev, _ = compute_revision_change(
        None, parse_column_specs("x,y", XY), _xy_stats(np.array([0.0, 100.0]), np.array([0.0, 100.0])), 10, None, "/t", 1
    )
    ts = parse_column_specs("x,y", XY, existing=rev)
    # x passes its high edge and reaches its low one (within 1% of the span); y reaches only its low edge
    wider, new = compute_revision_change(
        rev, ts, _xy_stats(np.array([0.5, 101.0]), np.array([0.9, 60.0])), 10, None, "/t", 2, 0.1
    )
    x, y = wider.transformations
    assert new and (x.min_number, x.max_number) == pytest.approx((-10.1, 111.1))
    assert (y.min_number, y.max_number) == pytest.approx((-10.0, 100.0))
    # nothing passed: no revision, however near the edges the data comes
    same, new = compute_revision_change(
        wider,
        parse_column_specs("x,y", XY, existing=wider),
        _xy_stats(np.array([-10.0, 111.0]), np.array([-10.0, 100.0])),
        10,
        None,
        "/t",
        3,
        0.1,
    )
    assert not new and same is wider
    # a declared range (columnStats) is the user's domain: it does not widen for having been reached
    declared, _ = compute_revision_change(
        rev, ts, _xy_stats(np.array([0.5, 101.0]), np.array([0.0, 100.0])), 10, '{"y_min": 0, "y_max": 100}', "/t", 2, 0.1
    )
    assert (declared.transformations[1].min_number, declared.transformations[1].max_number) == (0, 100)
    # margin 0 is qbeast-spark's exact union
    exact, _ = compute_revision_change(rev, ts, _xy_stats(np.array([0.5, 101.0]), np.array([0.0, 100.0])), 10, None, "/t", 2, 0.0)
    assert [(t.min_number, t.max_number) for t in exact.transformations] == [(0.0, 101.0), (0.0, 100.0)]


def test_samples_of_a_fixed_range_open_one_revision_after_the_first_and_drift_keeps_its_far_edge():
    rng = np.random.default_rng(7)
    fixed = [(rng.uniform(0, 100, 2000), rng.uniform(0, 100, 2000)) for _ in range(48)]
    revs = _appends(fixed)
    # before the reached edges widened too, each of the four edges opened a revision of its own (5)
    assert len(revs) == 2
    assert all(t.min_number < -9 and t.max_number > 109 for t in revs[-1].transformations)
    # drifting x (each append a little past the last), y a fixed range: x's low edge never moves,
    # y widens once
    drift = [(rng.uniform(i, i + 100, 1000), rng.uniform(0, 100, 1000)) for i in range(0, 200, 2)]
    revs = _appends(drift)
    assert all(r.transformations[0].min_number == revs[0].transformations[0].min_number for r in revs)
    assert len({(r.transformations[1].min_number, r.transformations[1].max_number) for r in revs}) == 2
    # x's span tripled (100 -> 300): the first widening goes by the margin, each later one doubles
    # x's span from its minimum (a power of two the optimizer moves files into by their tags,
    # `use.qbeast.relabel`): 4 revisions. The margin alone grows the span by 10% a time, 12
    # revisions, and each one re-indexes the table; one per append without either
    assert len(revs) == 4
    assert len(_appends(drift, origin=False)) == 12
    from use.qbeast.relabel import alignment

    assert [alignment(a, b) is not None for a, b in zip(revs, revs[1:], strict=False)] == [False, True, True]
    assert alignment(revs[2], revs[3]).shifts == (1, 0)


def test_the_widening_origin_is_the_oldest_revision_the_latest_contains():
    from use.qbeast.revision_change import widened

    ts = parse_column_specs("x,y", XY)
    r1, _ = compute_revision_change(None, ts, _xy_stats(np.array([0.0, 100.0]), np.array([0.0, 100.0])), 10, None, "/t", 1)
    r2, _ = compute_revision_change(
        r1, ts, _xy_stats(np.array([50.0, 130.0]), np.array([50.0, 60.0])), 10, None, "/t", 2, 0.1, r1
    )
    assert widening_origin([r1, r2], r2) is r1 and widening_origin([r1], r1) is r1
    # a revision of another cube size still contains r1's space: the origin stays
    r3, _ = compute_revision_change(r2, ts, _xy_stats(np.array([50.0, 60.0]), np.array([50.0, 60.0])), 20, None, "/t", 3, 0.1, r1)
    assert r3.desired_cube_size == 20 and widening_origin([r1, r2, r3], r3) is r1
    # a space that no longer holds r1's (another transformer) starts a chain of its own
    hashed = parse_column_specs("x:hashing,y", XY, existing=None)
    r4 = replace(r3, revision_id=4, column_transformers=hashed, transformations=(HashTransformation(0), r3.transformations[1]))
    assert widening_origin([r1, r2, r3, r4], r4) is r4
    # moved past the origin by more than the margin: the side widens by that much again
    old, origin = LinearTransformation(0.0, 150.0, 0, "DoubleDataType"), LinearTransformation(0.0, 100.0, 0, "DoubleDataType")
    w = widened(old, LinearTransformation(0.0, 160.0, 0, "DoubleDataType"), 0.1, origin=origin)
    # 160 + (160 - 100) = 220 (the margin would give 176), rounded up to the span doubled from 0
    assert (w.min_number, w.max_number) == (0.0, 300.0)
    # a Float column cannot grow exactly (float32 bounds): the doubling of the drift as it is
    f = [LinearTransformation(0.0, hi, 0, "FloatDataType") for hi in (150.0, 100.0, 160.0)]
    assert widened(f[0], f[2], 0.1, origin=f[1]).max_number == 220.0
    # not moved past it (a fixed range's samples): the margin, as without an origin
    w = widened(origin, LinearTransformation(0.0, 101.0, 0, "DoubleDataType"), 0.1, origin=origin)
    assert w.max_number == pytest.approx(111.1)
    # margin 0 stays the exact union
    assert widened(old, LinearTransformation(0.0, 160.0, 0, "DoubleDataType"), 0.0, origin=origin).max_number == 160.0


def test_the_margin_keeps_integral_bounds_within_their_type():
    from use.qbeast.revision_change import widened

    old = LinearTransformation(0, 2**31 - 10, 0, "IntegerDataType")
    merged = LinearTransformation(0, 2**31 - 2, 0, "IntegerDataType")
    assert widened(old, merged, 0.5).max_number == 2**31 - 1
    d_old, d_new = LinearTransformation(0.0, 1.0, 0.5, "DoubleDataType"), LinearTransformation(-1.0, 1.0, 0.5, "DoubleDataType")
    w = widened(d_old, d_new, 0.25)
    assert (w.min_number, w.max_number) == (-1.5, 1.0)
    assert widened(d_old, HashTransformation(0), 0.25) == HashTransformation(0)


def test_empty_write_changes_nothing():
    rev, new = _first({"id_min": None, "id_max": None, "count": 0})
    assert not new and rev.revision_id == 0 and rev.transformations == ()


def test_identity_when_one_value():
    rev, _ = _first({"id_min": 7, "id_max": 7, "count": 2})
    assert rev.transformations[0] == IdentityTransformation(7, "IntegerDataType")


def test_column_stats_widen_the_space():
    rev, _ = _first(column_stats='{"id_min": -100, "id_max": 500}')
    assert (rev.transformations[0].min_number, rev.transformations[0].max_number) == (-100, 500)
    rev, _ = _first(column_stats={"x_quantiles": [0.0, 1.0, 2.0]}, specs="id,x:quantiles")
    assert rev.transformations[1] == CDFNumericQuantilesTransformation((0.0, 1.0, 2.0), "DoubleDataType")


def test_bad_revision_change_inputs():
    with pytest.raises(InvalidArgumentError, match="x_quantiles"):
        _first(specs="id,x:quantiles")
    with pytest.raises(InvalidArgumentError, match="cubeSize"):
        _first(cube_size=0)
    with pytest.raises(InvalidArgumentError, match="cubeSize"):
        _first(cube_size="10")
    with pytest.raises(InvalidArgumentError, match="not valid JSON"):
        _first(column_stats="{oops")
    with pytest.raises(InvalidArgumentError, match=r"\['idd_min'\]"):
        _first(column_stats={"idd_min": 1})
    rev, _ = _first()
    with pytest.raises(IndexColumnError, match="cannot change"):
        compute_revision_change(
            rev, parse_column_specs("x,name", SCHEMA), {"x_min": 0.0, "x_max": 1.0, "count": 1}, 100, None, "/t", 1
        )


def test_staging_table_gets_revision_1_with_real_transformers():
    st = staging_revision("/t", ["id", "name"], 100, 5)
    ts = parse_column_specs("id,name", SCHEMA, existing=st)
    assert ts == (LinearTransformer("id", "IntegerDataType"), HashTransformer("name", "StringDataType"))
    rev, new = compute_revision_change(st, ts, {"id_min": 1, "id_max": 3, "count": 3}, 100, None, "/t", 9)
    assert new and rev.revision_id == 1 and not any(isinstance(t, EmptyTransformer) for t in rev.column_transformers)


def test_explicit_type_change_makes_a_new_revision_but_default_keeps_it():
    rev, _ = _first()
    kept = parse_column_specs("id,name", SCHEMA, existing=rev)
    assert kept == rev.column_transformers
    switched = parse_column_specs("id,name:quantiles", SCHEMA, existing=rev)
    new_rev, new = compute_revision_change(
        rev, switched, {"id_min": 2, "id_max": 3, "count": 1}, 100, {"name_quantiles": ["a", "m"]}, "/t", 7
    )
    assert new and new_rev.column_transformers[1].type_name == "quantiles"


def test_configuration_helpers():
    rev = Revision.from_json(REVISION_JSON)
    conf = configuration_with_revision({"delta.appendOnly": "false"}, rev, extra={"columnStats": '{"id_min":0}', "userOpt": "1"})
    assert conf["qbeast.revision.1"] == REVISION_JSON and conf["qbeast.lastRevisionID"] == "1"
    st = Revision.from_json(conf["qbeast.revision.0"])
    assert st.is_staging and st.timestamp == rev.timestamp - 1 and st.columns == rev.columns
    # without the user's specs (an optimization indexing staged rows) the column names, as upstream
    assert conf["columnsToIndex"] == "id,name" and conf["cubeSize"] == "500000"
    # with them, the user's text as qbeast-spark keeps its option (not the typed specs derived from it)
    assert configuration_with_revision({}, rev, columns_to_index="id,name:hashing")["columnsToIndex"] == "id,name:hashing"
    assert configuration_with_revision({}, rev, columns_to_index=["id", " name"])["columnsToIndex"] == "id,name"
    assert conf["tableFormat"] == "delta" and conf["columnStats"] == '{"id_min":0}' and conf["userOpt"] == "1"
    assert conf["delta.appendOnly"] == "false"
    assert set(revisions_from_configuration(conf)) == {0, 1}
    rev2 = Revision(2, 5, "/t", 10, rev.column_transformers, rev.transformations)
    over = configuration_with_revision(conf, rev2, overwrite=True, add_staging=False)
    assert set(revisions_from_configuration(over)) == {2} and over["qbeast.lastRevisionID"] == "2"
    with pytest.raises(InvalidArgumentError):
        configuration_with_revision({}, rev, extra={"qbeast.revision.9": "x"})


def test_bad_configuration():
    with pytest.raises(CorruptIndexMetadataError, match="qbeast.revision.2"):
        revisions_from_configuration({"qbeast.revision.2": REVISION_JSON})
    with pytest.raises(CorruptIndexMetadataError, match="lastRevisionID"):
        revisions_from_configuration({"qbeast.revision.1": REVISION_JSON, "qbeast.lastRevisionID": "3"})
    with pytest.raises(CorruptIndexMetadataError, match="qbeast.revision.x"):
        revisions_from_configuration({"qbeast.revision.x": REVISION_JSON})
    assert revisions_from_configuration({"delta.x": "1"}) == {}


def test_a_drifting_timestamp_opens_revisions_at_doubling_intervals():
    """The case the doubling is for: a 30-day window of event times moving a day per append."""
    import datetime as dt

    schema = pa.schema([("t", pa.timestamp("us", tz="UTC")), ("n", pa.int32())])
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    revs: list[Revision] = []
    rev = None
    opened = []
    for i in range(60):
        lo = start + dt.timedelta(days=i)
        stats = {"t_min": lo, "t_max": lo + dt.timedelta(days=30), "n_min": 0, "n_max": 1000, "count": 100}
        origin = widening_origin(revs, rev) if rev is not None else None
        rev, new = compute_revision_change(
            rev, parse_column_specs("t,n", schema, existing=rev), stats, 100, None, "/t", i, 0.1, origin
        )
        if new:
            revs.append(rev)
            opened.append(i)
    # from the second widening on the span doubles (grows 2^k) from the minimum, so the optimizer
    # moves the older revisions' files (use.qbeast.relabel); doubling the drift alone opened
    # 0, 1, 5, 11, 23, 47, and the margin alone 0, 1, 5, 9, 13, 18, 23, 29, 35, 42, 50, 59
    assert opened == [0, 1, 5, 39]
    from use.qbeast.relabel import alignment

    assert [alignment(a, b) is not None for a, b in zip(revs, revs[1:], strict=False)] == [False, True, True]
    t = revs[-1].transformations[0]
    assert t.ordered_data_type == "TimestampDataType" and isinstance(t.max_number, int)
    assert t.min_number == revs[0].transformations[0].min_number  # the far edge stays
