"""Table properties through SQL: the Delta log's `metaData.configuration` is the truth; ALTER TABLE
SET/UNSET commits it (and keeps the metastore's copy in step); bad values change nothing."""

from __future__ import annotations

from sql_support import commit_actions, location, refused, rows, state


def _props(spark, table: str) -> dict[str, str]:
    return {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def test_set_and_unset_commit_metadata_and_keep_the_metastore_in_step(spark, db) -> None:
    spark.sql("CREATE TABLE t (a INT) USING delta")
    root = location(spark, "t")
    spark.sql(
        "ALTER TABLE t SET TBLPROPERTIES ('use.optimization.autoOptimize.enabled'='true', 'use.optimization.type'='SmallFiles')"
    )
    meta = next(a["metaData"] for a in commit_actions(root, 1) if "metaData" in a)
    assert meta["configuration"]["use.optimization.autoOptimize.enabled"] == "true"
    assert commit_actions(root, 1)[0]["commitInfo"]["operation"] == "SET TBLPROPERTIES"
    assert _props(spark, "t")["use.optimization.type"] == "SmallFiles"
    registered = (
        spark._jsparkSession.sessionState()
        .catalog()
        .getTableMetadata(spark._jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply("t", spark._jvm.scala.Some.apply(db)))
    )
    assert registered.properties().get("use.optimization.type").get() == "SmallFiles"

    spark.sql("ALTER TABLE t UNSET TBLPROPERTIES ('use.optimization.type')")
    assert "use.optimization.type" not in _props(spark, "t")
    assert commit_actions(root, 2)[0]["commitInfo"]["operation"] == "UNSET TBLPROPERTIES"
    spark.sql("COMMENT ON TABLE t IS 'the a table'")
    assert {r[0]: r[1] for r in spark.sql("DESCRIBE TABLE EXTENDED t").collect()}["Comment"] == "the a table"


def test_a_property_set_by_delta_rs_is_what_sql_shows(spark, db) -> None:
    import deltalake

    spark.sql("CREATE TABLE t (a INT) USING delta")
    deltalake.DeltaTable(location(spark, "t")).alter.set_table_properties(
        {"delta.logRetentionDuration": "interval 2 days"}, raise_if_not_exists=False
    )
    assert _props(spark, "t")["delta.logRetentionDuration"] == "interval 2 days"


def test_a_property_set_through_the_python_api_is_what_sql_shows(spark, db) -> None:
    from use import DeltaTable

    spark.sql("CREATE TABLE t (a INT) USING delta")
    DeltaTable.for_path(spark, location(spark, "t")).set_properties({"use.optimization.bytes-per-iter": 123456})
    assert _props(spark, "t")["use.optimization.bytes-per-iter"] == "123456"


def test_bad_values_are_refused_and_nothing_changes(spark, db) -> None:
    spark.sql("CREATE TABLE q (x INT) USING qbeast OPTIONS ('columnsToIndex'='x')")
    root = location(spark, "q")
    before = state(root)
    with refused(r"\[USE_CONFIG_ERROR\] bad value 'lots' for use.optimization.bytes-per-iter"):
        spark.sql("ALTER TABLE q SET TBLPROPERTIES ('use.optimization.bytes-per-iter'='lots')")
    with refused("USE_CONFIG_ERROR.*unknown optimization key"):
        spark.sql("ALTER TABLE q SET TBLPROPERTIES ('use.optimization.bytes-per-itr'='5')")
    with refused("USE_CONFIG_ERROR.*SamplingOverheadReduction"):
        spark.sql("ALTER TABLE q SET TBLPROPERTIES ('use.optimization.type'='SamplingOverheadReduction')")
    with refused("USE_CONFIG_ERROR.*Qbeast index metadata"):
        spark.sql("ALTER TABLE q SET TBLPROPERTIES ('qbeast.lastRevisionID'='7')")
    with refused("USE_CONFIG_ERROR.*Qbeast index metadata"):
        spark.sql("ALTER TABLE q UNSET TBLPROPERTIES ('qbeast.revision.0')")
    with refused("USE_CONFIG_ERROR.*delta.appendOnyl"):
        spark.sql("ALTER TABLE q SET TBLPROPERTIES ('delta.appendOnyl'='true')")
    with refused("USE_NOT_SUPPORTED_ERROR"):
        spark.sql("ALTER TABLE q RENAME COLUMN x TO y")
    assert state(root) == before
    assert "use.optimization.bytes-per-iter" not in _props(spark, "q")


def test_real_delta_properties_are_taken_or_refused_saying_why_never_as_misspelt(spark, db) -> None:
    """Every real Delta property is either accepted (acted upon, or kept for other engines: docs/delta.md,
    "Table properties") or refused naming what USE cannot do; "check its spelling" is for
    keys Delta does not have. A refusal changes nothing, by name as by path."""
    spark.sql("CREATE TABLE d (id INT) USING delta")
    root = location(spark, "d")
    refusals = [
        ("delta.enableTypeWidening", "true", r"USE_UNSUPPORTED_FEATURE_ERROR.*reads tables whose column types were widened .* does not widen a column's type itself"),
        ("delta.enableDeletionVectors", "true", r"needs the feature 'deletionVectors', which USE does not support"),
        ("delta.enableRowTracking", "true", r"needs the feature 'rowTracking', which USE does not support"),
        ("delta.columnMapping.mode", "name", r"USE reads column-mapped tables but cannot create or enable column mapping"),
        ("delta.checkpointPolicy", "v2", r"needs V2 checkpoints \(feature v2Checkpoint\), which USE reads but does not write"),
        ("delta.checkpointPolicy", "v3", r"USE_CONFIG_ERROR.*must be 'classic' or 'v2'"),
        ("delta.enableIcebergCompatV2", "true", r"Iceberg compatibility \(UniForm, feature icebergCompatV2\)"),
        ("delta.universalFormat.enabledFormats", "iceberg", r"UniForm .* is not supported by USE"),
        ("delta.feature.deletionVectors", "supported", r"asks to add the table feature 'deletionVectors' to the protocol, which USE does not do by property"),
        ("delta.isolationLevel", "ReadCommitted", r"USE_CONFIG_ERROR.*must be 'Serializable' or 'WriteSerializable'"),
        ("delta.randomizeFilePrefixes", "maybe", r"USE_CONFIG_ERROR.*delta.randomizeFilePrefixes='maybe' must be 'true' or 'false'"),
        ("delta.setTransactionRetentionDuration", "2 months", r"USE_CONFIG_ERROR.*is not a valid interval: months are not allowed"),
    ]  # fmt: skip
    for table in ("d", f"delta.`{root}`"):
        before = state(root)
        for key, value, message in refusals:
            with refused(message):
                spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('{key}'='{value}')")
            assert "check its spelling" not in message
            assert state(root) == before, (table, key)
    accepted = {
        "delta.enableTypeWidening": "false", "delta.enableDeletionVectors": "false", "delta.enableRowTracking": "false",
        "delta.checkpointPolicy": "classic", "delta.enableIcebergCompatV2": "false", "delta.dataSkippingStatsColumns": "id",
        "delta.isolationLevel": "Serializable", "delta.setTransactionRetentionDuration": "interval 7 days",
        "delta.targetFileSize": "134217728", "delta.tuneFileSizesForRewrites": "true", "delta.randomizeFilePrefixes": "true",
    }  # fmt: skip
    pairs = ", ".join(f"'{k}'='{v}'" for k, v in accepted.items())
    spark.sql(f"ALTER TABLE d SET TBLPROPERTIES ({pairs})")
    props = _props(spark, "d")
    assert {k: props[k] for k in accepted} == accepted
    spark.sql("INSERT INTO d VALUES (1)")  # the table stays writable
    assert rows(spark, "SELECT id FROM d") == [(1,)]


def test_values_naming_the_table_other_use_keys_and_index_options_are_checked(spark, db) -> None:
    """A trial accepted each of these, and the table then failed later: every INSERT (index options
    set by hand), every optimization and the service's runs (a missing revision, a missing column, a
    bad `use.gc.enabled`); a typo'd `use.*` key was silently ignored."""
    spark.sql("CREATE TABLE q (x DOUBLE, y DOUBLE, tag STRING) USING qbeast OPTIONS ('columnsToIndex'='x,y', 'cubeSize'='500')")
    spark.sql("INSERT INTO q SELECT id / 10.0, id % 7, 't' FROM range(300)")
    root = location(spark, "q")
    before = state(root)
    for key, value, error in (
        ("use.gc.enabled", "maybe", r"bad value 'maybe' for use.gc.enabled: expected true or false"),
        ("use.gc.enable", "true", r"unknown table property 'use.gc.enable'; did you mean 'use.gc.enabled'\?"),
        ("use.bogus", "1", r"unknown table property 'use.bogus'"),
        ("use.qbeast.revisionMargin", "11", r"use.qbeast.revisionMargin must be a number from 0 to 10"),
        ("use.optimization.revision-id", "99", r"revision-id=99: the table has no such revision; its revisions are \[0, 1\]"),
        ("use.optimization.autoOptimize.revisionId", "5", r"autoOptimize.revisionId=5: the table has no such revision"),
        ("use.optimization.zorder-by", "x,nosuchcol", r"names 'nosuchcol', which is not a column of the table"),
        ("use.optimization.overlap.cluster-key", "nosuchcol", r"'nosuchcol' is not a column of the table"),
        ("use.optimization.bytes-per-iter", "9" * 26, r"at most 9223372036854775807 \(a 64-bit integer\)"),
        ("columnsToIndex", "tag", r"'columnsToIndex' is an option of the Qbeast index.*overwrite"),
        ("cubeSize", "7", r"'cubeSize' is an option of the Qbeast index"),
        ("columnstoindex", "tag", r"'columnstoindex' is an option of the Qbeast index"),
    ):
        with refused(f"USE_CONFIG_ERROR.*{error}"):
            spark.sql(f"ALTER TABLE q SET TBLPROPERTIES ('{key}'='{value}')")
    with refused("USE_CONFIG_ERROR.*'columnsToIndex' is an option of the Qbeast index"):
        spark.sql("ALTER TABLE q UNSET TBLPROPERTIES ('columnsToIndex')")
    with refused("USE_CONFIG_ERROR.*bad value 'maybe' for use.gc.enabled"):
        spark.sql("CREATE TABLE d (a INT) USING delta TBLPROPERTIES ('use.gc.enabled'='maybe')")
    assert state(root) == before
    assert not spark.catalog.tableExists("d")

    # the same keys with good values go in, and the table keeps taking appends
    spark.sql(
        "ALTER TABLE q SET TBLPROPERTIES ('use.optimization.revision-id'='1', 'use.optimization.zorder-by'='y,x', "
        "'use.gc.enabled'='true', 'use.qbeast.revisionMargin'='0.5')"
    )
    spark.sql("INSERT INTO q SELECT id / 10.0, id % 7, 'u' FROM range(20)")
    assert spark.sql("SELECT count(*) FROM q").collect()[0][0] == 320
    # Spark's catalog API passes UNSET without its IF EXISTS: a missing key is skipped, nothing committed
    version = state(root)
    spark.sql("ALTER TABLE q UNSET TBLPROPERTIES ('use.optimization.type')")
    assert state(root) == version
