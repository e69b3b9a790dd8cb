"""Delta's symlink format manifests (`delta.compatibility.symlinkFormatManifest.enabled`,
`GENERATE symlink_format_manifest FOR TABLE`): what Presto/Trino's Hive connector/Athena read a Delta
table through stays the table's live files after every commit."""

from __future__ import annotations

import os

import pytest

from sql_support import location, refused, rows, state

MANIFEST = "_symlink_format_manifest"


def _manifests(root: str) -> dict[str, list[str]]:
    top = os.path.join(root, MANIFEST)
    out = {}
    for d, _dirs, names in os.walk(top):
        if "manifest" in names:
            with open(os.path.join(d, "manifest")) as f:
                out[os.path.relpath(d, top) if d != top else ""] = sorted(line.strip() for line in f if line.strip())
    return out


def _live(root: str) -> dict[str, list[str]]:
    """The table's live files per partition dir, as delta-rs lists them (`file:` + absolute path)."""
    import deltalake

    dt = deltalake.DeltaTable(root)
    out: dict[str, list[str]] = {}
    for uri in dt.file_uris():
        path = uri[len("file://") :] if uri.startswith("file://") else uri
        rel = os.path.relpath(os.path.dirname(path), root)
        out.setdefault("" if rel == "." else rel, []).append("file:" + path)
    return {k: sorted(v) for k, v in out.items()}


def test_every_commit_keeps_the_manifests_of_a_partitioned_table_current(spark, db) -> None:
    spark.sql(
        "CREATE TABLE m (id BIGINT, day STRING) USING delta PARTITIONED BY (day) "
        "TBLPROPERTIES ('delta.compatibility.symlinkFormatManifest.enabled'='true')"
    )
    root = location(spark, "m")
    spark.sql("INSERT INTO m SELECT id, IF(id < 5, 'a b', 'c:d') FROM range(10)")
    spark.sql("INSERT INTO m SELECT id, IF(id < 15, 'a b', NULL) FROM range(10, 20)")
    assert _manifests(root) == _live(root)
    assert set(_manifests(root)) == {"day=a b", "day=c%3Ad", "day=__HIVE_DEFAULT_PARTITION__"}
    # an OPTIMIZE replaces files: the manifest lists the new ones only
    spark.sql("OPTIMIZE m")
    assert _manifests(root) == _live(root) and len(_manifests(root)["day=a b"]) == 1
    # a partition left without files loses its manifest; the others are untouched
    spark.sql("DELETE FROM m WHERE day = 'c:d'")
    assert _manifests(root) == _live(root) and "day=c%3Ad" not in _manifests(root)
    assert not os.path.exists(os.path.join(root, MANIFEST, "day=c%3Ad"))
    # VACUUM keeps the manifest directory (hidden, as Delta's VACUUM treats `_` names)
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql("VACUUM m RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert _manifests(root) == _live(root)
    assert rows(spark, "SELECT count(*) FROM m") == [(15,)]


def test_unpartitioned_tables_the_python_api_and_generate(spark, db, tmp_path) -> None:
    from use import DeltaTable

    path = str(tmp_path / "u")
    DeltaTable.write(spark.range(5).coalesce(1), path)
    assert not os.path.exists(os.path.join(path, MANIFEST))  # off: nothing written
    # GENERATE writes them whatever the property says (Delta's), here by path
    assert rows(spark, f"GENERATE symlink_format_manifest FOR TABLE delta.`{path}`") == [(1, 0)]
    assert _manifests(path) == _live(path)
    dt = DeltaTable.for_path(spark, path)
    dt.set_properties({"delta.compatibility.symlinkFormatManifest.enabled": "true"})
    DeltaTable.write(spark.range(5, 9).coalesce(1), path)
    assert _manifests(path) == _live(path) and len(_manifests(path)[""]) == 2
    DeltaTable.write(spark.range(3).coalesce(1), path, mode="overwrite")
    assert _manifests(path) == _live(path) and len(_manifests(path)[""]) == 1
    r = dt.generate()
    assert r.written == ("",) and r.deleted == ()


def test_generate_deletes_stale_manifests_and_refuses_unknown_modes(spark, db) -> None:
    spark.sql("CREATE TABLE g (id BIGINT, p STRING) USING delta PARTITIONED BY (p)")
    root = location(spark, "g")
    spark.sql("INSERT INTO g VALUES (1, 'x'), (2, 'y')")
    assert rows(spark, "GENERATE symlink_format_manifest FOR TABLE g") == [(2, 0)]
    spark.sql("DELETE FROM g WHERE p = 'y'")  # the property is off: the manifest goes stale
    assert set(_manifests(root)) == {"p=x", "p=y"}
    assert rows(spark, "CALL use_catalog.system.generate(table => 'g')") == [(1, 1)]
    assert _manifests(root) == _live(root)
    before = state(root)
    with refused("GENERATE mode 'manifest' is not known: the one mode is symlink_format_manifest"):
        spark.sql("GENERATE manifest FOR TABLE g")
    assert state(root) == before


def test_manifests_cannot_be_turned_on_for_a_column_mapped_table() -> None:
    from use.delta.snapshot import validate_configuration
    from use.errors import UnsupportedFeatureError

    mapped = {"delta.columnMapping.mode": "name"}
    with pytest.raises(UnsupportedFeatureError, match="symlinkFormatManifest.enabled=true on a table with column mapping"):
        validate_configuration({**mapped, "delta.compatibility.symlinkFormatManifest.enabled": "true"}, mapped)


@pytest.mark.parametrize("provider", ["delta", "qbeast"])
def test_a_table_created_with_its_data_has_its_manifests_at_once(spark, db, provider) -> None:
    options = "'columnsToIndex'='id', " if provider == "qbeast" else ""
    spark.sql(
        f"CREATE TABLE c_{provider} USING {provider} TBLPROPERTIES ({options}"
        "'delta.compatibility.symlinkFormatManifest.enabled'='true') AS SELECT id FROM range(20)"
    )
    root = location(spark, f"c_{provider}")
    assert _manifests(root) == _live(root) and len(_manifests(root)[""]) >= 1


def test_a_repartitioning_overwrite_leaves_no_stale_manifest(spark, tmp_path) -> None:
    path = str(tmp_path / "r")
    df = spark.range(6).selectExpr("id", "CAST(id % 2 AS STRING) AS a", "CAST(id % 3 AS STRING) AS b")
    df.write.format("delta").partitionBy("a").option("delta.compatibility.symlinkFormatManifest.enabled", "true").save(path)
    from use import DeltaTable

    DeltaTable.for_path(spark, path).set_properties({"delta.compatibility.symlinkFormatManifest.enabled": "true"})
    spark.range(1).selectExpr("id", "'x' AS a", "'y' AS b").write.format("delta").mode("append").save(path)
    assert set(_manifests(path)) == {"a=0", "a=1", "a=x"}
    df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").partitionBy("b").save(path)
    assert _manifests(path) == _live(path) and set(_manifests(path)) == {"b=0", "b=1", "b=2"}


def test_a_timestamp_partition_has_one_manifest_named_in_utc(spark, db, tmp_path) -> None:
    """A timestamp partition's manifest directory is Hive's `yyyy-MM-dd HH:mm:ss` in UTC (what Hive
    readers parse, as USE named it before), whichever session wrote it and however the log spells
    the value (zone-less from delta-rs, Delta's ISO form from USE): one partition, one manifest."""
    import datetime as dt

    import deltalake
    import pyarrow as pa

    from use.runtime.conf import session_conf

    root = str(tmp_path / "m")
    at = pa.array([dt.datetime(2024, 3, 10, 9, 30, tzinfo=dt.UTC)], pa.timestamp("us", "UTC"))
    deltalake.write_deltalake(root, pa.table({"id": pa.array([1], pa.int64()), "pts": at}), partition_by=["pts"])
    spark.sql(f"CREATE TABLE m USING delta LOCATION '{root}'")
    with session_conf(spark, {"spark.sql.session.timeZone": "America/Los_Angeles"}):
        spark.sql("ALTER TABLE m SET TBLPROPERTIES ('delta.compatibility.symlinkFormatManifest.enabled'='true')")
        spark.sql("INSERT INTO m VALUES (2, TIMESTAMP'2024-03-10 01:30:00')")
    manifests = _manifests(root)
    assert list(manifests) == ["pts=2024-03-10 09%3A30%3A00"] and len(manifests["pts=2024-03-10 09%3A30%3A00"]) == 2
    assert "pts=2024-03-10 09%3A30%3A00" in os.listdir(root)  # USE's data files: the directory the manifest names
