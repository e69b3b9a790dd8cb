"""SQL DDL on Delta and Qbeast tables through the session catalog (`use.sql`)."""

from __future__ import annotations

import os

import pytest

from sql_support import commit_actions, location, refused, rows, state
from use.delta.storage import resolve_table_root


def test_the_session_serves_delta_and_qbeast_tables(spark) -> None:
    import use.sql

    assert use.sql.configured(spark) and use.sql.installed(spark)
    assert spark.conf.get("spark.sql.catalog.spark_catalog") == use.sql.CATALOG_CLASS


def test_launch_flags_for_pyspark_users(capsys) -> None:
    from use.runtime.shim import build_shim
    from use.shim import main

    assert main(["--conf"]) == 0
    out, err = capsys.readouterr()
    assert out.split() == [
        "--jars", str(build_shim()),
        "--conf", "spark.sql.extensions=use.sql.UseSparkSessionExtension",
        "--conf", "spark.sql.catalog.spark_catalog=use.sql.UseCatalog",
        "--conf", "spark.sql.catalog.use_catalog=use.sql.UseLakeCatalog",
    ]  # fmt: skip
    assert "use.sql.install(spark)" in err


def test_create_managed_delta_table_insert_describe_drop(spark, db) -> None:
    spark.sql("CREATE TABLE t (id BIGINT, name STRING, day DATE) USING delta PARTITIONED BY (day) COMMENT 'people'")
    root = location(spark, "t")
    assert root.startswith(resolve_table_root(spark.conf.get("spark.sql.warehouse.dir")))
    create = commit_actions(root, 0)
    meta = next(a["metaData"] for a in create if "metaData" in a)
    assert meta["partitionColumns"] == ["day"] and meta["description"] == "people"
    assert ("t",) in [(r.tableName,) for r in spark.sql("SHOW TABLES").collect()]

    described = {r[0]: r[1] for r in spark.sql("DESCRIBE TABLE EXTENDED t").collect()}
    assert described["id"] == "bigint" and described["Provider"] == "delta" and described["Type"] == "MANAGED"
    assert "day" in [r[0] for r in spark.sql("DESCRIBE TABLE t").collect()]
    show = spark.sql("SHOW CREATE TABLE t").collect()[0][0]
    assert (
        "USING delta" in show and "PARTITIONED BY (day)" in show and "LOCATION" not in show
    )  # managed: replayed into the warehouse

    spark.sql("INSERT INTO t VALUES (1, 'a', DATE'2024-01-01'), (2, 'b', DATE'2024-01-02')")
    assert rows(spark, "SELECT id, name FROM t") == [(1, "a"), (2, "b")]

    spark.sql("DROP TABLE t")  # managed: the data goes with the registration
    assert not os.path.exists(root)
    assert "t" not in [r.tableName for r in spark.sql("SHOW TABLES").collect()]


def test_create_if_not_exists_and_duplicate(spark, db) -> None:
    spark.sql("CREATE TABLE t (id INT) USING delta")
    before = state(location(spark, "t"))
    spark.sql("CREATE TABLE IF NOT EXISTS t (other STRING) USING delta")
    assert state(location(spark, "t")) == before
    with refused("already exists"):
        spark.sql("CREATE TABLE t (id INT) USING delta")
    assert state(location(spark, "t")) == before


def test_external_table_registers_existing_location_with_its_log_schema(spark, db, tmp_path) -> None:
    import deltalake
    import pyarrow as pa

    path = str(tmp_path / "ext")
    deltalake.write_deltalake(path, pa.table({"k": pa.array([1, 2, 3], pa.int64()), "v": ["x", "y", "z"]}))
    spark.sql(f"CREATE TABLE e USING delta LOCATION '{path}'")
    assert [(r[0], r[1]) for r in spark.sql("DESCRIBE TABLE e").collect()] == [("k", "bigint"), ("v", "string")]
    assert rows(spark, "SELECT * FROM e") == [(1, "x"), (2, "y"), (3, "z")]
    described = {r[0]: r[1] for r in spark.sql("DESCRIBE TABLE EXTENDED e").collect()}
    assert described["Type"] == "EXTERNAL"

    spark.sql("DROP TABLE e")  # external: only the registration goes
    assert deltalake.DeltaTable(path).to_pyarrow_table().num_rows == 3
    # registering it again with matching columns works; with other columns it is refused
    spark.sql(f"CREATE TABLE e (k BIGINT, v STRING) USING delta LOCATION '{path}'")
    spark.sql("DROP TABLE e")
    before = state(path)
    with refused("USE_SCHEMA_MISMATCH_ERROR"):
        spark.sql(f"CREATE TABLE e (k INT) USING delta LOCATION '{path}'")
    assert state(path) == before and "e" not in [r.tableName for r in spark.sql("SHOW TABLES").collect()]


def test_external_new_table_at_an_empty_location(spark, db, tmp_path) -> None:
    path = str(tmp_path / "new")
    spark.sql(f"CREATE TABLE n (a INT) USING delta LOCATION '{path}'")
    assert os.path.isfile(os.path.join(path, "_delta_log", f"{0:020d}.json"))
    spark.sql("DROP TABLE n")
    assert os.path.isdir(os.path.join(path, "_delta_log"))


def test_qbeast_table_create_insert_and_register(spark, db, tmp_path) -> None:
    from use import QbeastTable

    spark.sql("CREATE TABLE q (x INT, y DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='x,y', 'cubeSize'='50')")
    root = location(spark, "q")
    qt = QbeastTable.for_path(spark, root)
    assert qt.revision_ids() == [0] and qt.indexed_columns() == ["x", "y"] and qt.cube_size() == 50
    spark.sql("INSERT INTO q SELECT CAST(id AS INT), id / 3.0 FROM range(300)")
    assert qt.latest_revision_id == 1 and qt.read().count() == 300
    assert rows(spark, "SELECT count(*) FROM q") == [(300,)]

    # CTAS is one commit: the new table with its data
    spark.sql("CREATE TABLE c USING qbeast OPTIONS ('columnsToIndex'='x') AS SELECT * FROM q")
    croot = location(spark, "c")
    assert sorted(os.listdir(os.path.join(croot, "_delta_log"))) == [f"{0:020d}.json"]
    assert any("add" in a for a in commit_actions(croot, 0)) and QbeastTable.for_path(spark, croot).indexed_columns() == ["x"]

    # the column specs of CREATE's OPTIONS reach the first indexed write
    spark.sql("CREATE TABLE h (x INT, s STRING) USING qbeast OPTIONS ('columnsToIndex'='x,s:hashing')")
    spark.sql("INSERT INTO h SELECT CAST(id AS INT), CAST(id AS STRING) FROM range(50)")
    hashed = QbeastTable.for_path(spark, location(spark, "h")).revision()
    assert type(hashed.column_transformers[1]).__name__ == "HashTransformer"

    # an existing Qbeast table registered by LOCATION keeps its index
    spark.sql(f"CREATE TABLE r USING qbeast LOCATION '{root}'")
    assert rows(spark, "SELECT count(*) FROM r") == [(300,)]


@pytest.mark.parametrize("provider", ["delta", "qbeast"])
def test_add_columns_and_column_comments_are_one_metadata_commit_each(spark, db, provider) -> None:
    """ADD COLUMNS (FIRST/AFTER, into a struct) and ALTER COLUMN ... COMMENT: the rows already
    written read NULL for the new column (no file is skipped on it), delta-rs reads the same."""
    from deltalake import DeltaTable as RsTable

    options = " OPTIONS ('columnsToIndex'='id,x', 'cubeSize'='50')" if provider == "qbeast" else ""
    spark.sql(f"CREATE TABLE t (id INT, x DOUBLE, s STRUCT<a: INT>) USING {provider}{options}")
    spark.sql("INSERT INTO t SELECT CAST(id AS INT), id / 2.0, named_struct('a', CAST(id AS INT)) FROM range(100)")
    root = location(spark, "t")
    version = RsTable(root).version()
    spark.sql("ALTER TABLE t ADD COLUMNS (z STRING COMMENT 'zed', w INT FIRST, s.b STRING)")
    assert RsTable(root).version() == version + 1
    (added,) = [a["commitInfo"] for a in commit_actions(root, version + 1) if "commitInfo" in a]
    assert added["operation"] == "ADD COLUMNS" and '"name":"z"' in added["operationParameters"]["columns"]
    spark.sql("ALTER TABLE t ALTER COLUMN x COMMENT 'the x'")
    described = {r[0]: (r[1], r[2]) for r in spark.sql("DESCRIBE TABLE t").collect()}
    assert described["x"] == ("double", "the x") and described["z"] == ("string", "zed")
    assert [r[0] for r in spark.sql("DESCRIBE TABLE t").collect()][:5] == ["w", "id", "x", "s", "z"]
    spark.sql("INSERT INTO t SELECT 7, 1000, 0.5, named_struct('a', 1, 'b', 'bee'), 'new'")
    assert rows(spark, "SELECT count(*) FROM t WHERE z IS NULL AND w IS NULL AND s.b IS NULL") == [(100,)]
    assert rows(spark, "SELECT id, w, z, s.b FROM t WHERE z = 'new'") == [(1000, 7, "new", "bee")]
    back = RsTable(root).to_pyarrow_table()
    assert back.schema.names == ["w", "id", "x", "s", "z"] and back.column("z").null_count == 100
    if provider == "qbeast":
        assert rows(spark, "SELECT count(*) FROM t TABLESAMPLE (50 PERCENT)")[0][0] > 0


def test_column_changes_that_need_a_rewrite_or_mapping_are_refused_and_change_nothing(spark, db, tmp_path) -> None:
    from test_delta_column_mapping import make_table

    spark.sql("CREATE TABLE t (id INT, name STRING) USING delta")
    spark.sql("INSERT INTO t VALUES (1, 'a')")
    root = location(spark, "t")
    before = state(root)
    for statement, message in [
        (
            "ALTER TABLE t ADD COLUMNS (n INT NOT NULL)",
            r"USE_INVALID_ARGUMENT_ERROR.*column n is NOT NULL.*add it without NOT NULL",
        ),
        ("ALTER TABLE t ADD COLUMNS (d INT DEFAULT 3)", r"USE_NOT_SUPPORTED_ERROR.*DEFAULT"),
        ("ALTER TABLE t RENAME COLUMN name TO label", r"USE_NOT_SUPPORTED_ERROR.*RENAME COLUMN .*column mapping"),
        ("ALTER TABLE t DROP COLUMN name", r"USE_NOT_SUPPORTED_ERROR.*DROP COLUMN .*CREATE OR REPLACE TABLE"),
        ("ALTER TABLE t ALTER COLUMN id TYPE BIGINT", r"USE_NOT_SUPPORTED_ERROR.*TYPE .*CAST"),
        ("ALTER TABLE t ADD COLUMNS (id INT)", r"FIELD_ALREADY_EXISTS"),
        ("ALTER TABLE t ADD COLUMNS (ntz TIMESTAMP_NTZ)", r"USE_UNSUPPORTED_FEATURE_ERROR.*table feature"),
    ]:
        with refused(message):
            spark.sql(statement)
        assert state(root) == before, statement
    # a schema computed from a version whose metadata changed since is a conflict, not a lost change
    import json

    from use.errors import MetadataChangedError
    from use.sql.protocol import AlterSchemaRequest, TableRef
    from use.sql.tables import alter_schema

    read = len(before[0]) - 1
    spark.sql("ALTER TABLE t SET TBLPROPERTIES ('owner.team'='lake')")
    schema = json.loads(next(a["metaData"]["schemaString"] for a in commit_actions(root, 0) if "metaData" in a))
    schema["fields"].append({"name": "z", "type": "integer", "nullable": True, "metadata": {}})
    changed = state(root)
    with pytest.raises(MetadataChangedError):
        alter_schema(spark, AlterSchemaRequest(TableRef(root, root, "delta"), json.dumps(schema), read, ("z",)), [])
    assert state(root) == changed
    mapped = str(tmp_path / "cm")
    make_table(mapped)
    spark.sql(f"CREATE TABLE cm USING delta LOCATION '{mapped}'")
    before = state(mapped)
    with refused(r"USE_UNSUPPORTED_FEATURE_ERROR.*column mapping"):
        spark.sql("ALTER TABLE cm ADD COLUMNS (z INT)")
    assert state(mapped) == before


def test_ctas_and_create_or_replace_keep_one_commit_each(spark, db) -> None:
    spark.sql("CREATE TABLE d USING delta PARTITIONED BY (p) AS SELECT id, id % 3 AS p FROM range(30)")
    root = location(spark, "d")
    assert state(root)[0] == (f"{0:020d}.json",)
    assert commit_actions(root, 0)[0]["commitInfo"]["operation"] == "CREATE TABLE AS SELECT"
    assert rows(spark, "SELECT p, count(*) FROM d GROUP BY p") == [(0, 10), (1, 10), (2, 10)]

    spark.sql(
        "CREATE OR REPLACE TABLE d USING delta TBLPROPERTIES ('delta.appendOnly'='false') AS SELECT id * 10 AS v FROM range(5)"
    )
    assert state(root)[0] == (f"{0:020d}.json", f"{1:020d}.json")
    assert rows(spark, "SELECT * FROM d") == [(0,), (10,), (20,), (30,), (40,)]
    assert [r[0] for r in spark.sql("DESCRIBE TABLE d").collect()] == ["v"]
    actions = commit_actions(root, 1)
    assert any("metaData" in a for a in actions) and sum("remove" in a for a in actions) >= 1
    assert rows(spark, "SELECT count(*) FROM d VERSION AS OF 0") == [(30,)]  # the history stays

    spark.sql("REPLACE TABLE d (a STRING) USING delta")
    assert rows(spark, "SELECT * FROM d") == [] and [r[0] for r in spark.sql("DESCRIBE TABLE d").collect()] == ["a"]
    spark.sql("CREATE OR REPLACE TABLE fresh (a INT) USING delta")
    assert rows(spark, "SELECT * FROM fresh") == []


def test_show_tblproperties_and_create_statement_round_trip(spark, db, tmp_path) -> None:
    spark.sql(
        "CREATE TABLE p (a INT) USING delta TBLPROPERTIES ('use.optimization.bytes-per-iter'='1000', "
        "'delta.logRetentionDuration'='interval 7 days')"
    )
    props = dict((r[0], r[1]) for r in spark.sql("SHOW TBLPROPERTIES p").collect())
    assert props["use.optimization.bytes-per-iter"] == "1000"
    assert props["delta.logRetentionDuration"] == "interval 7 days"
    statement = spark.sql("SHOW CREATE TABLE p").collect()[0][0]
    spark.sql("DROP TABLE p")  # managed: the table goes; the statement re-creates it
    spark.sql(statement.replace("spark_catalog.", "").replace(f"{db}.p", "p2"))
    assert dict((r[0], r[1]) for r in spark.sql("SHOW TBLPROPERTIES p2").collect())["use.optimization.bytes-per-iter"] == "1000"


def test_path_identifiers_and_format_delta(spark, tmp_path) -> None:
    import deltalake
    import pyarrow as pa

    path = str(tmp_path / "p")
    deltalake.write_deltalake(path, pa.table({"a": pa.array([1, 2], pa.int64())}))
    assert rows(spark, f"SELECT * FROM delta.`{path}`") == [(1,), (2,)]
    assert sorted(r[0] for r in spark.read.format("delta").load(path).collect()) == [1, 2]
    spark.createDataFrame([(3,)], "a BIGINT").write.format("delta").mode("append").save(path)
    assert deltalake.DeltaTable(path).to_pyarrow_table().num_rows == 3


@pytest.mark.parametrize("provider", ["delta", "qbeast"])
def test_truncate_keeps_history(spark, db, provider) -> None:
    opts = "OPTIONS ('columnsToIndex'='id')" if provider == "qbeast" else ""
    spark.sql(f"CREATE TABLE tr USING {provider} {opts} AS SELECT id FROM range(10)")
    spark.sql("TRUNCATE TABLE tr")
    assert rows(spark, "SELECT count(*) FROM tr") == [(0,)]
    assert rows(spark, "SELECT count(*) FROM tr VERSION AS OF 0") == [(10,)]


def test_other_providers_stay_spark_s_own(spark, db) -> None:
    spark.sql("CREATE TABLE pq USING parquet AS SELECT id FROM range(3)")
    spark.sql("INSERT INTO pq SELECT 10")
    spark.sql("CREATE VIEW v AS SELECT id * 2 AS d FROM pq")
    assert rows(spark, "SELECT * FROM v") == [(0,), (2,), (4,), (20,)]
    described = {r[0]: r[1] for r in spark.sql("DESCRIBE TABLE EXTENDED pq").collect()}
    assert described["Provider"] == "parquet"
    spark.sql("DROP VIEW v")
    spark.sql("DROP TABLE pq")


def test_replace_a_qbeast_table_by_a_delta_one(spark, db) -> None:
    spark.sql("CREATE TABLE r USING qbeast OPTIONS ('columnsToIndex'='id') AS SELECT id FROM range(10)")
    spark.sql("CREATE OR REPLACE TABLE r USING delta AS SELECT id FROM range(3)")
    described = {r[0]: r[1] for r in spark.sql("DESCRIBE TABLE EXTENDED r").collect()}
    props = {r[0] for r in spark.sql("SHOW TBLPROPERTIES r").collect()}
    assert described["Provider"] == "delta" and not any(k.startswith("qbeast.") for k in props)
    assert rows(spark, "SELECT count(*) FROM r") == [(3,)]


def test_qbeast_index_options_as_tblproperties(spark, db) -> None:
    """qbeast-spark's `CREATE TABLE ... USING qbeast TBLPROPERTIES ('columnsToIndex'=...)` declares the
    index as OPTIONS do; managed tables say so in their first commit (`isManaged`)."""
    from use import QbeastTable

    spark.sql(
        "CREATE TABLE tp (x INT, y DOUBLE, s STRING) USING qbeast "
        "TBLPROPERTIES ('columnsToIndex'='x,y', 'cubeSize'='40', 'k'='v', 'tableFormat'='delta')"
    )
    root = location(spark, "tp")
    qt = QbeastTable.for_path(spark, root)
    assert qt.indexed_columns() == ["x", "y"] and qt.cube_size() == 40
    create = commit_actions(root, 0)
    assert create[0]["commitInfo"]["operationParameters"]["isManaged"] == "true"
    spark.sql("INSERT INTO tp SELECT CAST(id AS INT), id / 2.0, 'a' FROM range(200)")
    props = dict((r[0], r[1]) for r in spark.sql("SHOW TBLPROPERTIES tp").collect())
    assert props["k"] == "v" and props["columnsToIndex"] == "x,y" and qt.latest_revision_id == 1

    spark.sql("CREATE TABLE tc USING qbeast TBLPROPERTIES ('columnsToIndex'='x') AS SELECT * FROM tp")
    assert QbeastTable.for_path(spark, location(spark, "tc")).indexed_columns() == ["x"]
    assert rows(spark, "SELECT count(*) FROM tc") == [(200,)]

    # the same option twice with different values, or another table format: refused, nothing created
    df = spark.range(3).selectExpr("CAST(id AS INT) AS x", "CAST(id AS INT) AS y")
    with pytest.raises(Exception, match="USE_INVALID_ARGUMENT_ERROR.*columnsToIndex is given twice"):
        df.writeTo("bad").using("qbeast").option("columnsToIndex", "x").tableProperty("columnsToIndex", "y").create()
    with refused("USE_CONFIG_ERROR.*format is 'delta'"):
        spark.sql("CREATE TABLE bad (x INT) USING qbeast TBLPROPERTIES ('columnsToIndex'='x', 'tableFormat'='iceberg')")
    assert "bad" not in [r.tableName for r in spark.sql("SHOW TABLES").collect()]
    # on a Delta table the keys stay the Qbeast index's, as before
    with refused("USE_CONFIG_ERROR.*option of the Qbeast index"):
        spark.sql("CREATE TABLE bad (x INT) USING delta TBLPROPERTIES ('columnsToIndex'='x')")

    # SHOW CREATE TABLE leaves out what the writer keeps (revisions, their bookkeeping) and a managed
    # table's location: replayed, it creates a new table indexed as this one, in the warehouse
    spark.sql("INSERT INTO tp VALUES (1, 2, 'a')")
    statement = spark.sql("SHOW CREATE TABLE tp").collect()[0][0]
    assert "qbeast.revision" not in statement and "lastRevisionID" not in statement and "LOCATION" not in statement
    spark.sql(statement.replace("spark_catalog.", "").replace(f"{db}.tp", "tp2"))
    assert location(spark, "tp2") != location(spark, "tp")
    assert QbeastTable.for_path(spark, location(spark, "tp2")).indexed_columns() == ["x", "y"]
    assert rows(spark, "SELECT count(*) FROM tp2") == [(0,)]


def test_create_table_like_makes_an_empty_table_with_the_sources_definition(spark, db, tmp_path) -> None:
    """`CREATE TABLE t LIKE s`: a Delta table (with a log) of the source's columns, partitioning,
    comment and properties (a Qbeast source's index options, not its revisions), as Delta's; Spark's
    command only registered the name, so every read of the new table failed."""
    import deltalake

    spark.sql("CREATE TABLE src (id INT, p STRING) USING delta PARTITIONED BY (p) COMMENT 'the source' "
              "TBLPROPERTIES ('delta.appendOnly'='true', 'use.optimization.autoOptimize.enabled'='true')")  # fmt: skip
    spark.sql("INSERT INTO src VALUES (1, 'a')")
    spark.sql("CREATE TABLE copy LIKE src")
    (detail,) = spark.sql("DESCRIBE DETAIL copy").collect()
    assert (detail.format, detail.partitionColumns, detail.description, detail.numFiles) == ("delta", ["p"], "the source", 0)
    assert detail.properties == {"delta.appendOnly": "true", "use.optimization.autoOptimize.enabled": "true"}
    assert deltalake.DeltaTable(location(spark, "copy")).metadata().partition_columns == ["p"]
    spark.sql("INSERT INTO copy VALUES (2, 'b')")
    assert rows(spark, "SELECT * FROM copy") == [(2, "b")]
    before = state(location(spark, "copy"))
    with refused("TABLE_OR_VIEW_ALREADY_EXISTS"):
        spark.sql("CREATE TABLE copy LIKE src")
    spark.sql("CREATE TABLE IF NOT EXISTS copy LIKE src")
    assert state(location(spark, "copy")) == before
    with refused("TABLE_OR_VIEW_NOT_FOUND.*nosuch"):
        spark.sql("CREATE TABLE other LIKE nosuch")
    # a Qbeast source: its index options and the statement's properties, no revision of its own
    spark.sql("CREATE TABLE qsrc (x DOUBLE, y DOUBLE) USING qbeast TBLPROPERTIES ('columnsToIndex'='x,y', 'cubeSize'='100')")
    spark.sql("INSERT INTO qsrc SELECT rand(1), rand(2) FROM range(300)")
    spark.sql("CREATE TABLE qcopy LIKE qsrc TBLPROPERTIES ('use.optimization.autoOptimize.enabled'='true')")
    props = {r.key: r.value for r in spark.sql("SHOW TBLPROPERTIES qcopy").collect()}
    assert (props["columnsToIndex"], props["cubeSize"], props["use.optimization.autoOptimize.enabled"]) == ("x,y", "100", "true")
    assert props["qbeast.lastRevisionID"] == "0" and rows(spark, "SELECT count(*) FROM qcopy") == [(0,)]
    # a table of another format made a Delta table by USING delta, at a LOCATION
    spark.sql("CREATE TABLE psrc (a INT, b STRING) USING parquet PARTITIONED BY (b)")
    where = str(tmp_path / "like")
    spark.sql(f"CREATE TABLE dcopy LIKE psrc USING delta LOCATION '{where}'")
    assert deltalake.DeltaTable(where).metadata().partition_columns == ["b"]
    assert location(spark, "dcopy") == where
    spark.sql("CREATE TABLE pcopy LIKE psrc")  # neither is USE's: Spark's own command
    assert [r.data_type for r in spark.sql("DESCRIBE TABLE EXTENDED pcopy").collect() if r.col_name == "Provider"] == ["parquet"]


def test_drop_not_null_is_one_metadata_commit(spark, db) -> None:
    """`ALTER TABLE t ALTER COLUMN c DROP NOT NULL`, as Delta's: the column becomes nullable (every
    row written fits); SET NOT NULL stays refused (the rows written are not checked)."""
    import deltalake

    spark.sql("CREATE TABLE nn (id INT NOT NULL, name STRING) USING delta")
    spark.sql("INSERT INTO nn VALUES (1, 'a')")
    with pytest.raises(Exception, match="NOT_NULL_ASSERT_VIOLATION"):  # Spark's runtime check
        spark.sql("INSERT INTO nn VALUES (NULL, 'b')")
    root = location(spark, "nn")
    before = state(root)
    spark.sql("ALTER TABLE nn ALTER COLUMN id DROP NOT NULL")
    assert len(state(root)[0]) == len(before[0]) + 1
    info = next(a["commitInfo"] for a in commit_actions(root, len(before[0])) if "commitInfo" in a)
    assert info["operation"] == "CHANGE COLUMN"
    assert deltalake.DeltaTable(root).schema().to_arrow().field("id").nullable
    spark.sql("INSERT INTO nn VALUES (NULL, 'b')")
    assert rows(spark, "SELECT name, id FROM nn") == [("a", 1), ("b", None)]
    before = state(root)
    with refused(r"non-nullable|SET NOT NULL"):
        spark.sql("ALTER TABLE nn ALTER COLUMN name SET NOT NULL")
    assert state(root) == before
