"""Table properties through SQL: the Delta log's `metaData.configuration` is the truth; ALTER TABLE
SET/UNSET commits it (and keeps the metastore's copy in step); bad values change nothing."""

from __future__ import annotations

from sql_support import commit_actions, location, refused, state


def _props(spark, table: str) -> dict[str, str]:
    return {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def test_set_and_unset_commit_metadata_and_keep_the_metastore_in_step(spark, db) -> None:
    spark.sql("CREATE TABLE t (a INT) USING delta")
    root = location(spark, "t")
    spark.sql(
        "ALTER TABLE t SET TBLPROPERTIES ('use.optimization.autoOptimize.enabled'='true', "
        "'use.optimization.type'='SmallFiles')"
    )
    meta = next(a["metaData"] for a in commit_actions(root, 1) if "metaData" in a)
    assert meta["configuration"]["use.optimization.autoOptimize.enabled"] == "true"
    assert commit_actions(root, 1)[0]["commitInfo"]["operation"] == "SET TBLPROPERTIES"
    assert _props(spark, "t")["use.optimization.type"] == "SmallFiles"
    registered = spark._jsparkSession.sessionState().catalog().getTableMetadata(
        spark._jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply("t", spark._jvm.scala.Some.apply(db))
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
        spark.sql("ALTER TABLE q ADD COLUMNS (z INT)")
    assert state(root) == before
    assert "use.optimization.bytes-per-iter" not in _props(spark, "q")
