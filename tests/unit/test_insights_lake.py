"""Lake-wide rows: `metastore_summary` on real tables (delta-rs writes them), missing and corrupt
tables as error rows, other providers, service state; the lake-wide `optimizations`."""

from __future__ import annotations

import datetime as dt
import os

import pytest

import use.insights as insights
from insights_support import commit_event, set_properties
from optimize_support import plain_delta
from use.insights.facts import TableFacts

UTC = dt.UTC


def identity(path: str, name: str = "t", provider: str = "delta", **kw) -> insights.TableIdentity:
    return insights.TableIdentity("spark_catalog", "default", name, "EXTERNAL", provider, path, kw.pop("props", {}), **kw)


def test_a_delta_table_row(tmp_path) -> None:
    path = plain_delta(str(tmp_path / "t"), appends=3)
    set_properties(path, {"use.optimization.autoOptimize.enabled": "true", "use.optimization.bytes-per-iter": "5000000"})
    version = commit_event(path, "BinPacking")
    # The metastore's mirror is stale (a type since removed from the log, no bytes-per-iter): the log wins.
    props = {"use.optimization.autoOptimize.enabled": "true", "use.optimization.type": "Gone", "owner": "me"}
    t = insights.metastore_summary_row(identity(path, props=props))
    assert t.schema == insights.METASTORE_SUMMARY_SCHEMA
    (row,) = t.to_pylist()
    facts = TableFacts.load(path)
    sizes = facts.snapshot.files.column("size").to_pylist()
    assert (row["catalog"], row["database"], row["table_name"], row["table_type"], row["provider"], row["location"]) == (
        "spark_catalog", "default", "t", "EXTERNAL", "delta", path)  # fmt: skip
    assert dict(row["table_properties"]) == {
        "use.optimization.autoOptimize.enabled": "true", "use.optimization.bytes-per-iter": "5000000", "owner": "me"}  # fmt: skip
    assert (row["latest_version"], row["num_files"], row["size_in_bytes"]) == (version, len(sizes), sum(sizes))
    assert row["last_commit_time"] == dt.datetime.fromtimestamp(facts.commit_time_ms / 1000, UTC)
    assert row["num_records"] == 3 * sum(1 for i in range(40) if i % 13 in (0, 1, 2))
    assert (row["is_qbeast"], row["latest_revision_id"], row["auto_optimize"]) == (False, None, True)
    assert dict(row["optimization_settings"]) == {
        "use.optimization.autoOptimize.enabled": "true", "use.optimization.bytes-per-iter": "5000000"}  # fmt: skip
    assert (row["optimization_state"], row["next_optimization_at"], row["last_optimization_error"]) == ("not served", None, None)
    assert (row["optimization_note"], row["optimization_note_at"]) == (None, None)
    assert row["optimization_count"] == 1
    assert row["last_optimization_time"] == dt.datetime.fromtimestamp(facts.history[-1].timestamp / 1000, UTC)
    assert row["pending_bytes"] == sum(insights.plan(facts.qsnap).column("bytes").to_pylist()) > 0
    assert row["health_score"] == pytest.approx(insights.health_score(facts.qsnap)) and 0 < row["health_score"] < 100
    assert row["error"] is None


def test_missing_and_corrupt_tables_are_error_rows(tmp_path) -> None:
    gone = identity(str(tmp_path / "gone"), "gone")
    corrupt_path = plain_delta(str(tmp_path / "corrupt"), appends=2)
    with open(os.path.join(corrupt_path, "_delta_log", f"{1:020d}.json"), "w") as fh:
        fh.write("{not json\n")
    t = insights.metastore_summary([gone, identity(corrupt_path, "corrupt")])
    assert t.schema == insights.METASTORE_SUMMARY_SCHEMA
    missing, corrupt = t.to_pylist()
    assert missing["table_name"] == "gone" and missing["error"].startswith("TableNotFoundError: no table at")
    assert corrupt["error"].startswith("CorruptLogError:")
    for row in (missing, corrupt):
        assert row["latest_version"] is None and row["health_score"] is None and row["optimization_state"] == "not served"


def test_invalid_optimization_properties_keep_the_rest_of_the_row(tmp_path) -> None:
    path = plain_delta(str(tmp_path / "t"), appends=2)
    set_properties(path, {"use.optimization.bytes-per-iter": "lots"})
    (row,) = insights.metastore_summary_row(identity(path)).to_pylist()
    assert row["latest_version"] == 2 and row["num_files"] == 6 and row["optimization_count"] == 0
    assert row["pending_bytes"] is None and row["health_score"] is None and row["auto_optimize"] is None
    assert "ConfigError" in row["error"] and "use.optimization.bytes-per-iter" in row["error"]


def test_other_providers_and_the_service_state(tmp_path) -> None:
    path = plain_delta(str(tmp_path / "t"), appends=1)
    parquet = insights.TableIdentity("spark_catalog", "db", "p", "MANAGED", "parquet", str(tmp_path / "p"), {"a": "b"})
    view = insights.TableIdentity("spark_catalog", "db", "v", "VIEW")
    states = {"t": insights.ServiceState("running", next_run_ms=5_000, last_error="boom", note="queued", note_ms=7_000)}
    t = insights.metastore_summary([parquet, view, identity(path)], service=lambda i: states.get(i.table_name), spark_conf={})
    p, v, delta = t.to_pylist()
    assert (p["provider"], dict(p["table_properties"]), p["latest_version"], p["error"]) == ("parquet", {"a": "b"}, None, None)
    assert (v["table_type"], v["location"], v["optimization_state"]) == ("VIEW", None, "not served")
    assert (delta["optimization_state"], delta["last_optimization_error"]) == ("running", "boom")
    assert delta["next_optimization_at"] == dt.datetime(1970, 1, 1, 0, 0, 5, tzinfo=UTC)
    assert (delta["optimization_note"], delta["optimization_note_at"]) == ("queued", dt.datetime(1970, 1, 1, 0, 0, 7, tzinfo=UTC))
    assert (v["optimization_note"], v["optimization_note_at"]) == (None, None)
    assert delta["auto_optimize"] is False and delta["error"] is None
    assert insights.metastore_summary([]).schema == insights.METASTORE_SUMMARY_SCHEMA


def test_lake_optimizations_name_each_tables_events(tmp_path) -> None:
    a = plain_delta(str(tmp_path / "a"), appends=1)
    b = plain_delta(str(tmp_path / "b"), appends=1)
    va1, va2, vb = commit_event(a, "BinPacking"), commit_event(a, "SmallFiles"), commit_event(b, "ClusterKeyOverlap")
    t = insights.lake_optimizations([identity(a, "a"), identity(str(tmp_path / "gone"), "gone"), identity(b, "b"),
                                     insights.TableIdentity("c", "d", "v", "VIEW")])  # fmt: skip
    assert t.schema == insights.LAKE_OPTIMIZATIONS_SCHEMA
    assert t.select(["table_name", "optimization_name", "version"]).to_pylist() == [
        {"table_name": "a", "optimization_name": "BinPacking", "version": va1},
        {"table_name": "a", "optimization_name": "SmallFiles", "version": va2},
        {"table_name": "b", "optimization_name": "ClusterKeyOverlap", "version": vb},
    ]
    assert set(t.column("catalog").to_pylist()) == {"spark_catalog"}
    assert insights.lake_optimizations([]).schema == insights.LAKE_OPTIMIZATIONS_SCHEMA
