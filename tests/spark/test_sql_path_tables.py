"""Tables named by their path, as Delta users write them: `df.write.format("delta").save(path)` in
every save mode, `CREATE TABLE delta.`/p` ...` (with columns or AS SELECT), and the errors for a path
that holds no table. Every table is held against delta-rs."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from sql_support import add_void_column, commit_actions, location, refused, rows, state


def _delta_rs(path: str):
    import deltalake

    return deltalake.DeltaTable(path)


def test_save_creates_the_table_in_every_mode_and_keeps_deltas_semantics_once_it_exists(spark, tmp_path) -> None:
    df = spark.range(6).selectExpr("id", "id * 2 AS v", "CAST(id % 2 AS STRING) AS p")
    path = str(tmp_path / "t")
    df.write.format("delta").save(path)  # Spark's default mode, errorifexists: a new table
    create = commit_actions(path, 0)
    assert {"protocol", "metaData", "add"} <= {k for a in create for k in a}
    info = next(a["commitInfo"] for a in create if "commitInfo" in a)
    assert info["operation"] == "WRITE" and info["operationParameters"]["mode"] == "ErrorIfExists"
    assert rows(spark, f"SELECT * FROM delta.`{path}`") == sorted(tuple(r) for r in df.collect())

    before = state(path)
    with refused(
        r"USE_TABLE_ALREADY_EXISTS_ERROR.*a Delta table already exists at .*t \(save mode errorifexists.*mode\(\"append\"\)"
    ):
        df.write.format("delta").save(path)
    df.write.format("delta").mode("ignore").save(path)  # exists: nothing written
    assert state(path) == before

    # append matches columns by name, as INSERT INTO does; overwrite replaces the rows
    df.select("p", "v", "id").write.format("delta").mode("append").save(path)
    assert rows(spark, f"SELECT count(*), sum(id), sum(v) FROM delta.`{path}`") == [(12, 30, 60)]
    df.where("id < 2").write.format("delta").mode("overwrite").save(path)
    assert rows(spark, f"SELECT id, v FROM delta.`{path}`") == [(0, 0), (1, 2)]
    table = _delta_rs(path)
    assert table.version() == 2 and sorted(table.to_pyarrow_table().column("id").to_pylist()) == [0, 1]
    assert [h["operation"] for h in table.history()] == ["WRITE", "WRITE", "WRITE"]
    # time travel through the path reader: by version, or by time (the last version committed then),
    # as Delta's reader options; a bad value names the option, and nothing is read
    assert spark.read.format("delta").option("versionAsOf", 1).load(path).count() == 12
    from use import DeltaTable

    history = DeltaTable.for_path(spark, path).history().selectExpr("version", "CAST(timestamp AS STRING)").collect()
    at = dict((r[0], r[1]) for r in history)[1]
    assert spark.read.format("delta").option("timestampAsOf", at).load(path).count() == 12
    assert spark.read.format("qbeast").option("timestampAsOf", at).load(path).count() == 12
    for options, message in [
        (
            {"versionAsOf": "latest"},
            r"the read option versionAsOf takes a table version \(an integer of 0 or more\), got 'latest'",
        ),
        (
            {"timestampAsOf": "yesterday"},
            r"the read option timestampAsOf takes a time, e\.g\. '2025-01-01 00:00:00'.*got 'yesterday'",
        ),
        ({"versionAsOf": "1", "timestampAsOf": at}, r"versionAsOf or timestampAsOf, not both"),
        ({"timestampAsOf": "2000-01-01"}, r"no version of .* was committed at or before 2000-01-01"),
        (
            {"readChangeFeed": "true", "startingVersion": "0"},
            r"the read option readChangeFeed \(Delta's change data feed\) is not supported",
        ),
    ]:
        with refused(message):
            spark.read.format("delta").options(**options).load(path).count()

    # ignore and append also create a missing table
    for mode in ("ignore", "append", "overwrite"):
        target = str(tmp_path / f"new_{mode}")
        df.write.format("delta").mode(mode).save(target)
        assert _delta_rs(target).to_pyarrow_table().num_rows == 6, mode


def test_save_partitioned_with_properties_and_refusals_change_nothing(spark, tmp_path) -> None:
    df = spark.range(8).selectExpr("id", "CAST(id % 2 AS STRING) AS p")
    path = str(tmp_path / "parts")
    df.write.format("delta").partitionBy("p").option("delta.appendOnly", "true").save(path)
    table = _delta_rs(path)
    assert table.metadata().partition_columns == ["p"]
    assert table.metadata().configuration == {"delta.appendOnly": "true"}  # the user's spelling kept
    assert sorted(os.listdir(path)) == ["_delta_log", "p=0", "p=1"]
    df.write.format("delta").mode("append").partitionBy("p").save(path)
    df.write.format("delta").mode("append").save(path)  # partitionBy left out: the table's
    assert rows(spark, f"SELECT p, count(*) FROM delta.`{path}` GROUP BY p") == [("0", 12), ("1", 12)]

    before = state(path)
    cases = [
        (df.write.format("delta").mode("append").partitionBy("id"), r"partitionBy\('id'\) differs from the partitioning .* \(p\)"),
        (df.selectExpr("CAST(id AS STRING) AS id", "p", "1 AS z").write.format("delta").mode("append").option("mergeSchema", "true"),
         r"the data does not fit the columns of the table at .*: id is string in the data and bigint in the table\. A write keeps the "
         r"table's column types .*mergeSchema adds top-level columns; it does not change a column's type"),
        (df.write.format("delta").mode("overwrite").option("replaceWhere", "p = '0'"), r"the rows written do not all match replaceWhere=\"p = '0'\""),
        (df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").option("partitionOverwriteMode", "dynamic"),
         r"overwriteSchema=true replaces the whole table .* cannot be combined with a dynamic partition overwrite"),
        (df.selectExpr("*", "1 AS z").write.format("delta").mode("append"),  # Delta's advice, not Spark's arity error
         r"the data has column\(s\) z that the table at .*parts does not have \(its columns: id, p\); to add them to the table, "
         r"write with \.option\(\"mergeSchema\", \"true\"\)"),
        (df.write.format("delta").mode("overwrite"), r"delta.appendOnly"),  # Delta's rule for append-only tables
    ]  # fmt: skip
    for writer, message in cases:
        with refused(message):
            writer.save(path)
        assert state(path) == before, message
    fresh = str(tmp_path / "bad_property")
    with refused(r"unknown Delta table property 'delta.appendOnlyy'"):
        df.write.format("delta").option("delta.appendOnlyy", "true").save(fresh)
    assert not os.path.exists(os.path.join(fresh, "_delta_log"))


def test_save_into_a_qbeast_table_by_path_indexes_the_rows(spark, tmp_path) -> None:
    from use import QbeastTable

    path = str(tmp_path / "q")
    data = spark.range(400).selectExpr("id", "rand(3) * 100 AS x")
    QbeastTable.write(data, path, columns_to_index=["x"], cube_size=100)
    data.write.format("delta").mode("append").save(path)
    qt = QbeastTable.for_path(spark, path)
    assert qt.read().count() == 800
    # the appended rows are indexed like the first ones (no staging files): a sample prunes
    assert {r for r in qt.snapshot().files.column("revision_id").to_pylist()} == {1}
    assert qt.read(sample=0.1).count() < 200
    for _ in range(2):  # idempotent by the txn options: the second save writes nothing
        data.write.format("delta").mode("append").option("txnAppId", "q").option("txnVersion", 0).save(path)
    assert qt.read().count() == 1200 and {r for r in qt.snapshot().files.column("revision_id").to_pylist()} == {1}


def test_create_table_by_path_with_columns_or_a_query(spark, db, tmp_path) -> None:
    a, b, q = (str(tmp_path / n) for n in ("a", "b", "q"))
    spark.sql(f"CREATE TABLE delta.`{a}` USING delta AS SELECT id FROM range(5)")
    assert rows(spark, f"SELECT count(*) FROM delta.`{a}`") == [(5,)]
    with refused(r"TABLE_OR_VIEW_ALREADY_EXISTS"):
        spark.sql(f"CREATE TABLE delta.`{a}` USING delta AS SELECT id FROM range(5)")
    before = state(a)
    spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{a}` USING delta AS SELECT id FROM range(9)")
    with refused(r"replacing delta.`.*a`, a table named by its path, is not supported yet"):
        spark.sql(f"CREATE OR REPLACE TABLE delta.`{a}` USING delta AS SELECT id FROM range(7)")
    assert state(a) == before

    spark.sql(
        f"CREATE TABLE delta.`{b}` (id BIGINT, s STRING) USING delta PARTITIONED BY (s) TBLPROPERTIES ('delta.appendOnly'='true')"
    )
    spark.sql(f"INSERT INTO delta.`{b}` SELECT id, 'x' FROM range(3)")
    table = _delta_rs(b)
    assert table.metadata().partition_columns == ["s"] and table.to_pyarrow_table().num_rows == 3
    spark.range(4).writeTo(f"delta.`{tmp_path}/c`").using("delta").create()
    assert _delta_rs(str(tmp_path / "c")).to_pyarrow_table().num_rows == 4

    spark.sql(
        f"CREATE TABLE qbeast.`{q}` USING qbeast OPTIONS (columnsToIndex 'x', cubeSize '50') AS SELECT id, rand(1) AS x FROM range(300)"
    )
    conf = _delta_rs(q).metadata().configuration
    assert conf["columnsToIndex"] == "x" and json.loads(conf["qbeast.revision.1"])["desiredCubeSize"] == 50
    assert rows(spark, f"SELECT count(*) FROM qbeast.`{q}`") == [(300,)]
    assert (
        spark.sql("SHOW TABLES").where("NOT isTemporary").count() == 0
    )  # named by their paths: nothing registered (the current database is the test's own)

    with refused(r"no Delta table at .*e \(no _delta_log with commits there\) and no columns to create delta.`.*e` with"):
        spark.sql(f"CREATE TABLE delta.`{tmp_path}/e` USING delta")
    with refused(r"names its table by its path, and LOCATION .* is another one: leave LOCATION out"):
        spark.sql(f"CREATE TABLE delta.`{tmp_path}/l` (id INT) USING delta LOCATION '{tmp_path}/other'")
    assert not os.path.exists(tmp_path / "e") and not os.path.exists(tmp_path / "l") and not os.path.exists(tmp_path / "other")


@pytest.mark.parametrize(
    "read",
    [
        lambda spark, p: spark.read.format("delta").load(p).count(),
        lambda spark, p: spark.read.format("delta").schema("id BIGINT").load(p).count(),
        lambda spark, p: spark.sql(f"SELECT * FROM delta.`{p}`").count(),
    ],
    ids=["load", "load-with-schema", "sql"],
)
def test_a_path_without_a_table_says_so_and_how_to_make_one(spark, tmp_path, read) -> None:
    missing = str(tmp_path / "nothing")
    with refused(r"USE_TABLE_NOT_FOUND_ERROR.*no Delta table at .*nothing: the path holds no _delta_log with commits; check "
                 r"the path, or write a table there first \(df.write.format\(\"delta\"\).save\(path\)"):  # fmt: skip
        read(spark, missing)
    assert not os.path.exists(missing)


def test_alter_a_table_named_by_its_path_and_drop_is_refused(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    spark.range(4).write.format("delta").save(path)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('use.optimization.type'='SmallFiles', 'delta.appendOnly'='true')")
    spark.sql(f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES ('delta.appendOnly')")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (note STRING COMMENT 'why')")
    table = _delta_rs(path)
    assert table.metadata().configuration == {"use.optimization.type": "SmallFiles"}
    assert [f.name for f in table.schema().fields] == ["id", "note"]
    assert [h["operation"] for h in table.history()][:3] == ["ADD COLUMNS", "UNSET TBLPROPERTIES", "SET TBLPROPERTIES"]
    assert dict(rows(spark, f"SHOW TBLPROPERTIES delta.`{path}`"))["use.optimization.type"] == "SmallFiles"

    before = state(path)
    for statement, message in [
        (f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('use.optimization.tiering.ratio'='1.2')", r"bad value '1.2' for use.optimization.tiering.ratio"),
        (f"ALTER TABLE delta.`{path}` RENAME COLUMN note TO n", r"RENAME COLUMN is not supported"),
        (f"DROP TABLE delta.`{path}`", r"is a table named by its path, not registered in the catalog, so DROP TABLE has nothing to drop: delete its directory"),
    ]:  # fmt: skip
        with refused(message):
            spark.sql(statement)
        assert state(path) == before, statement
    spark.sql(f"DROP TABLE IF EXISTS delta.`{tmp_path}/nothing`")  # nothing there: nothing to do


def test_table_constraints_are_refused_alike_by_name_and_by_path(spark, db, tmp_path) -> None:
    """ALTER TABLE ... ADD/DROP CONSTRAINT: USE cannot enforce Delta's CHECK constraints on its
    writes, so it refuses them, by path as by name (by path Spark's session catalog failed with a bare
    java.util.NoSuchElementException), and nothing changes."""
    path = str(tmp_path / "c")
    spark.sql(f"CREATE TABLE delta.`{path}` (id INT, v STRING) USING delta")
    spark.sql(f"CREATE TABLE named USING delta LOCATION '{path}'")
    before = state(path)
    for table in ("named", f"delta.`{path}`", f"qbeast.`{path}`"):
        for clause, verb in [
            ("ADD CONSTRAINT pos CHECK (id > 0)", "ADD"),
            ("DROP CONSTRAINT pos", "DROP"),
            ("ADD CONSTRAINT pk PRIMARY KEY (id)", "ADD"),
        ]:
            with refused(rf"USE_NOT_SUPPORTED_ERROR\] ALTER TABLE .*{verb} CONSTRAINT: table constraints \(Delta's CHECK constraints, "
                         r"feature checkConstraints\) are not supported by USE yet.*check the rule in the job that writes"):  # fmt: skip
                spark.sql(f"ALTER TABLE {table} {clause}")
            assert state(path) == before, (table, clause)


def test_merge_schema_adds_the_new_columns_in_the_commit_that_writes_the_rows(spark, tmp_path) -> None:
    path = str(tmp_path / "m")
    spark.range(3).selectExpr("id", "CAST(id * 2 AS INT) AS v", "CAST(id % 2 AS STRING) AS k").write.format("delta").partitionBy(
        "k"
    ).save(path)
    assert all(f.nullable for f in _delta_rs(path).schema().fields)  # as Delta stores a new table's columns
    # a new column, one of the table's missing (NULL), one narrower than the table's (widened)
    new = spark.range(3, 5).selectExpr("id", "'n' AS note", "CAST(id % 2 AS STRING) AS k", "CAST(1 AS SHORT) AS v")
    new.write.format("delta").mode("append").option("mergeSchema", "true").save(path)
    table = _delta_rs(path)
    assert [f.name for f in table.schema().fields] == ["id", "v", "k", "note"]
    assert table.version() == 1
    last = commit_actions(path, 1)
    assert {k for a in last for k in a} == {"commitInfo", "metaData", "add"}  # one commit: schema and rows
    info = next(a["commitInfo"] for a in last if "commitInfo" in a)
    assert info["operationParameters"]["mergeSchema"] == "true" and info["operationParameters"]["mode"] == "Append"
    assert rows(spark, f"SELECT id, v, k, note FROM delta.`{path}`") == [
        (0, 0, "0", None), (1, 2, "1", None), (2, 4, "0", None), (3, 1, "1", "n"), (4, 1, "0", "n"),
    ]  # fmt: skip
    # overwrite with mergeSchema keeps the table's columns and adds the data's
    spark.range(2).selectExpr("id", "'0' AS k", "true AS flag").write.format("delta").mode("overwrite").option(
        "mergeSchema", "true"
    ).save(path)
    assert rows(spark, f"SELECT * FROM delta.`{path}`") == [(0, None, "0", None, True), (1, None, "0", None, True)]
    # nothing new: the usual append (a missing nullable column is NULL)
    spark.range(9, 10).selectExpr("id").write.format("delta").mode("append").option("mergeSchema", "true").save(path)
    assert _delta_rs(path).version() == 3 and rows(spark, f"SELECT count(*) FROM delta.`{path}` WHERE id = 9") == [(1,)]

    # a NOT NULL column missing from the data, and a Qbeast table: refused, nothing changed
    spark.sql(f"CREATE TABLE delta.`{tmp_path}/nn` (id BIGINT NOT NULL, v INT) USING delta")
    before = state(f"{tmp_path}/nn")
    with refused(r"the data has no column id, which the table at .*nn declares NOT NULL"):
        spark.range(1).selectExpr("CAST(id AS INT) AS v", "1 AS z").write.format("delta").mode("append").option(
            "mergeSchema", "true"
        ).save(f"{tmp_path}/nn")
    with refused(r"NULL in column id, which the table at .*nn declares NOT NULL"):
        spark.sql("SELECT CAST(NULL AS BIGINT) AS id, 1 AS z").write.format("delta").mode("append").option(
            "mergeSchema", "true"
        ).save(f"{tmp_path}/nn")
    assert state(f"{tmp_path}/nn") == before
    from use import QbeastTable

    q = str(tmp_path / "q")
    QbeastTable.write(spark.range(50).selectExpr("id", "rand(1) AS x"), q, columns_to_index=["x"], cube_size=20)
    before = state(q)
    with refused(r"mergeSchema into the Qbeast table at .*q is not supported yet; add the columns first"):
        spark.range(5).selectExpr("id", "rand(2) AS x", "1 AS z").write.format("delta").mode("append").option(
            "mergeSchema", "true"
        ).save(q)
    assert state(q) == before


def test_merge_schema_compares_types_as_delta_and_adds_columns_nullable_to_the_last_field(spark, tmp_path) -> None:
    """A struct made by named_struct has a NOT NULL field: that is the data's nullability, which
    Delta does not trust, so it is no type difference; a column mergeSchema adds is stored nullable
    to its last nested field (as Delta's asNullable), so later rows may hold NULLs inside it; an
    all-NULL (void) column is refused with what to cast it to; nothing changes on a refusal."""

    def save(query: str, path: str, **options: str) -> None:
        writer = spark.sql(query).write.format("delta").mode("append")
        for k, v in options.items():
            writer = writer.option(k, v)
        writer.save(path)

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    save("SELECT 1 AS id, named_struct('a', 1) AS s", a)
    save("SELECT 2 AS id, named_struct('a', 2) AS s, 'x' AS c", a, mergeSchema="true")
    assert rows(spark, f"SELECT id, s.a, c FROM delta.`{a}`") == [(1, 1, None), (2, 2, "x")]
    assert _delta_rs(a).version() == 1 and [f.name for f in _delta_rs(a).schema().fields] == ["id", "s", "c"]

    save("SELECT 1 AS id", b)
    save("SELECT 2 AS id, array(named_struct('q', 1)) AS arr, map('k', named_struct('r', 1)) AS m", b, mergeSchema="true")
    added = json.loads(_delta_rs(b).schema().to_json())["fields"]
    arr, m = added[1]["type"], added[2]["type"]
    assert arr["containsNull"] is True and arr["elementType"]["fields"][0]["nullable"] is True
    assert m["valueContainsNull"] is True and m["valueType"]["fields"][0]["nullable"] is True
    save(
        "SELECT 3 AS id, array(named_struct('q', CAST(NULL AS INT)), NULL) AS arr, map('k', CAST(NULL AS STRUCT<r: INT>)) AS m", b
    )
    got = {r[0]: r[1] for r in spark.sql(f"SELECT id, arr FROM delta.`{b}`").collect()}
    assert [None if e is None else e.q for e in got[3]] == [None, None] and got[2][0].q == 1
    table = _delta_rs(b).to_pyarrow_table()
    assert table.schema.field("arr").type.value_field.nullable and pa.types.is_struct(table.schema.field("m").type.item_type)

    before = state(b)
    with refused(r"column n of the data has no type \(it is all NULL, e\.g\. lit\(None\).* cast it to the type its values will have, "
                 r"e\.g\. lit\(None\)\.cast\(\"string\"\)"):  # fmt: skip
        save("SELECT 4 AS id, NULL AS n", b, mergeSchema="true")
    assert state(b) == before
    save("SELECT 4 AS id, NULL AS arr", b)  # an all-NULL value fits a column the table has
    assert rows(spark, f"SELECT count(*) FROM delta.`{b}` WHERE arr IS NULL") == [(2,)]


def test_a_table_with_a_void_column_is_read_with_the_column_null_and_not_written(spark, tmp_path) -> None:
    """delta-spark's mergeSchema of an all-NULL column commits it as `void` (now in the protocol):
    USE reads such a table (it refused it as a corrupt log) and adds no data file to it."""
    import deltalake

    path = str(tmp_path / "v")
    deltalake.write_deltalake(path, pa.table({"id": pa.array([1, 2], pa.int64())}))
    add_void_column(path, "n")
    assert rows(spark, f"SELECT id, n FROM delta.`{path}`") == [(1, None), (2, None)]
    assert rows(spark, f"SELECT count(*) FROM delta.`{path}` WHERE n IS NULL AND id > 1") == [(1,)]
    before = state(path)
    with refused(r"has column\(s\) n of type void .*USE reads the table .*but writes no data into it"):
        spark.sql(f"INSERT INTO delta.`{path}` VALUES (3, NULL)")
    assert state(path) == before


def test_dataframe_writes_take_the_tables_types_or_lossless_widenings_with_or_without_merge_schema(spark, tmp_path) -> None:
    """Delta's DataFrame writer refuses data whose type would need a narrowing or converting cast
    ("Failed to merge incompatible data types") with or without mergeSchema; USE refuses the same,
    naming the column, and takes the widenings that keep every value (which Delta takes only among
    tinyint/smallint/int). SQL INSERT keeps Spark's store assignment, as Delta's does."""
    from use import DeltaTable, QbeastTable

    path = str(tmp_path / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, i INT, f FLOAT, d DECIMAL(10,2), s STRUCT<a: INT, b: STRING>) USING delta"
    )
    before = state(path)
    for columns, problem in [
        ("CAST(3000000000 AS BIGINT) AS i", r"i is bigint in the data and int in the table"),
        ("CAST(1.1 AS DOUBLE) AS f", r"f is double in the data and float in the table"),
        ("'1' AS i", r"i is string in the data and int in the table"),
        ("CAST(1.5 AS DECIMAL(12,2)) AS d", r"d is decimal\(12,2\) in the data and decimal\(10,2\) in the table"),
        ("named_struct('a', CAST(1 AS BIGINT), 'b', 'x') AS s", r"s\.a is bigint in the data and int in the table"),
    ]:
        for options in ({}, {"mergeSchema": "true"}, {"txnAppId": "app", "txnVersion": "1"}):
            writer = spark.sql(f"SELECT 1 AS id, {columns}").write.format("delta").mode("append").options(**options)
            with refused(
                rf"the data does not fit the columns of the table at .*t: {problem}\. .*cast the data to the table's type"
            ):
                writer.save(path)
            assert state(path) == before, (columns, options)
        with pytest.raises(
            Exception, match=rf"columns of a type the table's cannot take without a cast that could change values: {problem}"
        ):
            DeltaTable.write(spark.sql(f"SELECT CAST(1 AS BIGINT) AS id, {columns}"), path)
        assert state(path) == before, columns
    # widenings that keep every value, nested fields by name in any order, through every writer
    widened = "CAST(2 AS SMALLINT) AS i, CAST(2.5 AS FLOAT) AS f, CAST(2.25 AS DECIMAL(8,2)) AS d, named_struct('b', 'y', 'a', CAST(2 AS TINYINT)) AS s"
    spark.sql(f"SELECT CAST(2 AS INT) AS id, {widened}").write.format("delta").mode("append").save(path)
    spark.sql(f"SELECT 3 AS id, {widened}").write.format("delta").mode("append").option("txnAppId", "app").option(
        "txnVersion", "1"
    ).save(path)
    spark.sql(f"SELECT 4 AS id, {widened}, 'n' AS note").write.format("delta").mode("append").option("mergeSchema", "true").save(
        path
    )
    DeltaTable.write(spark.sql(f"SELECT CAST(5 AS BIGINT) AS id, {widened}, 'n' AS note"), path)
    spark.sql(
        f"INSERT INTO delta.`{path}` (id, i, f) VALUES (6, CAST(6 AS BIGINT), CAST(6.5 AS DOUBLE))"
    )  # SQL: Spark's store assignment
    import decimal

    assert rows(spark, f"SELECT id, i, f, d, s.a, s.b FROM delta.`{path}`") == [
        (2, 2, 2.5, decimal.Decimal("2.25"), 2, "y"), (3, 2, 2.5, decimal.Decimal("2.25"), 2, "y"),
        (4, 2, 2.5, decimal.Decimal("2.25"), 2, "y"), (5, 2, 2.5, decimal.Decimal("2.25"), 2, "y"), (6, 6, 6.5, None, None, None),
    ]  # fmt: skip
    table = _delta_rs(path)
    assert [str(f.type) for f in table.schema().fields][:4] == [
        'PrimitiveType("long")',
        'PrimitiveType("integer")',
        'PrimitiveType("float")',
        'PrimitiveType("decimal(10,2)")',
    ]
    assert len(table.to_pyarrow_table()) == 5  # every file holds the table's types

    q = str(tmp_path / "q")
    QbeastTable.write(
        spark.sql("SELECT CAST(id AS INT) AS x, CAST(id AS DOUBLE) AS y FROM range(20)"), q, columns_to_index=["x"], cube_size=10
    )
    QbeastTable.write(
        spark.sql("SELECT CAST(id AS SMALLINT) AS x, CAST(id AS FLOAT) AS y FROM range(20, 30)"), q, columns_to_index=["x"]
    )
    assert rows(spark, f"SELECT count(*), sum(x), sum(y) FROM qbeast.`{q}`") == [(30, 435, 435.0)]
    assert _delta_rs(q).to_pyarrow_table().schema.field("x").type == pa.int32()


def test_txn_options_make_a_save_idempotent_as_a_foreach_batch_needs(spark, tmp_path) -> None:
    """Delta's txnAppId / txnVersion writer options: a batch written again (a streaming query's retry)
    writes nothing; the commit holds the `txn` action delta-rs reads."""
    path = str(tmp_path / "s")
    batch = spark.range(3).selectExpr("id", "CAST(id AS STRING) AS s")

    def save(version: int, mode: str = "append", data=batch) -> None:
        data.write.format("delta").mode(mode).option("txnAppId", "query-1").option("txnVersion", version).save(path)

    save(0)  # creates the table
    save(0)  # the same batch again: nothing
    save(1)
    save(1, mode="overwrite")  # batch 1 is done whatever the mode
    assert rows(spark, f"SELECT count(*) FROM delta.`{path}`") == [(6,)]
    assert _delta_rs(path).version() == 1
    txn = [a["txn"] for a in commit_actions(path, 1) if "txn" in a]
    assert [(t["appId"], t["version"]) for t in txn] == [("query-1", 1)]
    # a streaming query's foreachBatch, exactly as Delta's docs write it
    src = spark.range(10).selectExpr("id", "CAST(id AS STRING) AS s")
    for batch_id in (2, 2, 3):
        src.where(f"id % 2 = {batch_id % 2}").write.format("delta").mode("append").option("txnAppId", "query-1").option(
            "txnVersion", batch_id
        ).save(path)
    assert rows(spark, f"SELECT count(*) FROM delta.`{path}`") == [(16,)]

    before = state(path)
    for options, message in [
        ({"txnAppId": "q"}, r"the writer options txnAppId and txnVersion go together"),
        ({"txnAppId": "q", "txnVersion": "soon"}, r"txnVersion must be a non-negative integer \(e.g. the batch id\), got 'soon'"),
        ({"txnAppId": "q", "txnVersion": "-1"}, r"txnAppId and txnVersion go together \(an app id and a non-negative integer\)"),
    ]:
        with refused(message):
            batch.write.format("delta").mode("append").options(**options).save(path)
        assert state(path) == before, options


def test_write_stream_into_a_path_exactly_once(spark, tmp_path) -> None:
    """`writeStream.format("delta").start(path)`: each micro-batch is one commit carrying the query's
    id and the batch id (Delta's txn action), so a restart from the checkpoint writes nothing twice;
    complete output mode rewrites the table each batch; update mode is refused."""
    incoming, ckpt, path = tmp_path / "in", str(tmp_path / "ckpt"), str(tmp_path / "events")
    incoming.mkdir()

    def arrive(name: str, ids: range) -> None:
        (incoming / f"{name}.json").write_text("".join(f'{{"id": {i}, "k": "{"ab"[i % 2]}"}}\n' for i in ids))

    source = spark.readStream.schema("id BIGINT, k STRING").json(str(incoming))

    def run(query_source=source, target=path, mode="append", checkpoint=ckpt) -> None:
        q = (query_source.writeStream.format("delta").outputMode(mode).partitionBy("k") if mode == "append"
             else query_source.writeStream.format("delta").outputMode(mode))  # fmt: skip
        q = q.option("checkpointLocation", checkpoint).trigger(availableNow=True).start(target)
        q.awaitTermination()
        assert q.exception() is None

    arrive("a", range(0, 4))
    run()
    # a crash after the table's commit and before the checkpoint's: the batch runs again, writes nothing
    last = max(int(f.name) for f in (tmp_path / "ckpt" / "commits").iterdir() if f.name.isdigit())
    for name in (str(last), f".{last}.crc"):  # the checkpoint's record of the batch, and its checksum
        (tmp_path / "ckpt" / "commits" / name).unlink(missing_ok=True)
    version = _delta_rs(path).version()
    run()
    assert _delta_rs(path).version() == version and rows(spark, f"SELECT count(*) FROM delta.`{path}`") == [(4,)]
    arrive("b", range(4, 10))
    arrive("c", range(10, 12))
    run()  # the restart reads only the new files
    assert rows(spark, f"SELECT count(*), count(DISTINCT id), sum(id) FROM delta.`{path}`") == [(12, 12, 66)]
    table = _delta_rs(path)
    assert table.metadata().partition_columns == ["k"]
    txns = [a["txn"] for v in range(table.version() + 1) for a in commit_actions(path, v) if "txn" in a]
    assert [t["version"] for t in txns] == list(range(len(txns))) and len({t["appId"] for t in txns}) == 1

    totals = str(tmp_path / "totals")
    run(source.groupBy("k").count(), totals, "complete", str(tmp_path / "ckpt2"))
    assert rows(spark, f"SELECT * FROM delta.`{totals}`") == [("a", 6), ("b", 6)]
    with pytest.raises(Exception, match=r"takes a stream's rows in append or complete output mode, not update"):
        source.groupBy("k").count().writeStream.format("delta").outputMode("update").option(
            "checkpointLocation", str(tmp_path / "ckpt3")).start(str(tmp_path / "u"))  # fmt: skip
    assert not os.path.exists(tmp_path / "u")


def test_dynamic_partition_overwrite_replaces_only_the_partitions_written(spark, tmp_path) -> None:
    """Delta's `partitionOverwriteMode=dynamic` (writer option, else the session's
    spark.sql.sources.partitionOverwriteMode): an overwrite replaces the partitions it writes and
    keeps the others; it replaced the whole table before (rows of the other partitions lost)."""
    from use.runtime.conf import session_conf

    path = str(tmp_path / "t")
    spark.range(6).selectExpr("id", "CAST(id % 3 AS STRING) AS p").write.format("delta").partitionBy("p").save(path)
    new = spark.range(100, 102).selectExpr("id", "'0' AS p")
    new.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "dynamic").save(path)
    assert rows(spark, f"SELECT id, p FROM delta.`{path}`") == [(1, "1"), (2, "2"), (4, "1"), (5, "2"), (100, "0"), (101, "0")]
    with session_conf(spark, {"spark.sql.sources.partitionOverwriteMode": "dynamic"}):
        spark.range(200, 201).selectExpr("id", "'1' AS p").write.format("delta").mode("overwrite").save(path)
        assert rows(spark, f"SELECT id FROM delta.`{path}`") == [(2,), (5,), (100,), (101,), (200,)]
        before = state(path)
        with refused(r"partitionOverwriteMode=dynamic\) with txnAppId/txnVersion is not supported yet"):
            new.write.format("delta").mode("overwrite").option("txnAppId", "a").option("txnVersion", 1).save(path)
        assert state(path) == before
        # the writer's option wins over the session's
        new.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "static").save(path)
        assert rows(spark, f"SELECT id FROM delta.`{path}`") == [(100,), (101,)]
    before = state(path)
    with refused(r"the writer option partitionOverwriteMode must be static or dynamic, got 'sometimes'"):
        new.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "sometimes").save(path)
    assert state(path) == before


def test_save_as_table_and_insert_into_take_dynamic_partition_overwrite(spark, db) -> None:
    """Delta's documented `saveAsTable` with `partitionOverwriteMode=dynamic` (it replaced the whole
    table before): the written partitions are replaced, the others kept, the table's schema and
    properties unchanged. `insertInto` takes the session's setting (Spark drops its writer options)."""
    from use.runtime.conf import session_conf

    spark.range(6).selectExpr("id", "CAST(id % 3 AS STRING) AS p").write.format("delta").partitionBy("p").option(
        "delta.appendOnly", "false").saveAsTable("dyn")  # fmt: skip
    new = spark.range(100, 102).selectExpr("id", "'0' AS p")
    new.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "dynamic").saveAsTable("dyn")
    assert rows(spark, "SELECT id, p FROM dyn") == [(1, "1"), (2, "2"), (4, "1"), (5, "2"), (100, "0"), (101, "0")]
    with session_conf(spark, {"spark.sql.sources.partitionOverwriteMode": "dynamic"}):
        spark.range(200, 201).selectExpr("id", "'1' AS p").write.mode("overwrite").insertInto("dyn")
    assert rows(spark, "SELECT id FROM dyn") == [(2,), (5,), (100,), (101,), (200,)]
    assert [r.operation for r in spark.sql("DESCRIBE HISTORY dyn").collect()][:2] == ["WRITE", "WRITE"]
    before = state(location(spark, "dyn"))
    with refused(r"partitionBy\('id'\) differs from the partitioning of the table"):
        new.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy("id").saveAsTable(
            "dyn"
        )
    with refused(r"the writer option partitionOverwriteMode must be static or dynamic, got 'often'"):
        new.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "often").saveAsTable("dyn")
    assert state(location(spark, "dyn")) == before
    # without the option, saveAsTable in overwrite mode overwrites every partition
    new.write.format("delta").mode("overwrite").partitionBy("p").saveAsTable("dyn")
    assert rows(spark, "SELECT id FROM dyn") == [(100,), (101,)]


def test_overwrite_schema_replaces_schema_and_partitioning_and_keeps_the_table(spark, tmp_path) -> None:
    """Delta's `overwriteSchema=true` with an overwrite: the DataFrame's schema, and `partitionBy`'s
    partitioning (none without it, as Delta's writer), in one commit; properties and id kept. On a
    Qbeast table (by path, `format("delta")`) the rows are indexed again on its columns."""
    from use import QbeastTable

    path = str(tmp_path / "t")
    spark.range(4).selectExpr("id", "CAST(id % 2 AS STRING) AS p").write.format("delta").partitionBy("p").option(
        "delta.logRetentionDuration", "interval 7 days").save(path)  # fmt: skip
    table_id = _delta_rs(path).metadata().id
    new = spark.range(3).selectExpr("CAST(id AS STRING) AS s", "id * 1.5 AS d")
    new.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    table = _delta_rs(path)
    assert table.schema().to_arrow().names == ["s", "d"] and table.metadata().partition_columns == []
    assert table.metadata().id == table_id and table.metadata().configuration == {"delta.logRetentionDuration": "interval 7 days"}
    assert sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["s"]) == [
        {"s": "0", "d": 0.0}, {"s": "1", "d": 1.5}, {"s": "2", "d": 3.0},
    ]  # fmt: skip
    new.write.format("delta").mode("overwrite").option("overwriteSchema", "true").partitionBy("s").save(path)
    assert _delta_rs(path).metadata().partition_columns == ["s"]
    assert rows(spark, f"SELECT s, d FROM delta.`{path}`") == [("0", 0.0), ("1", 1.5), ("2", 3.0)]
    # without the option an overwrite keeps the schema: an extra column needs mergeSchema, as in Delta
    before = state(path)
    with refused(r"the data has column\(s\) z that the table at .* does not have .*\.option\(\"mergeSchema\", \"true\"\)"):
        new.selectExpr("*", "1 AS z").write.format("delta").mode("overwrite").save(path)
    assert state(path) == before
    # ignored on append, as Delta's: the append must fit the table
    new.write.format("delta").mode("append").option("overwriteSchema", "true").save(path)
    assert rows(spark, f"SELECT count(*) FROM delta.`{path}`") == [(6,)]

    q = str(tmp_path / "q")
    data = spark.range(300).selectExpr("id", "rand(5) * 100 AS x")
    QbeastTable.write(data, q, columns_to_index=["x"], cube_size=100)
    data.selectExpr("x", "CAST(id AS STRING) AS label").write.format("delta").mode("overwrite").option(
        "overwriteSchema", "true"
    ).save(q)
    qt = QbeastTable.for_path(spark, q)
    assert qt.read().columns == ["x", "label"] and qt.read().count() == 300
    assert qt.snapshot().configuration["columnsToIndex"] == "x" and qt.read(sample=0.1).count() < 100
    before = state(q)
    for writer, message in [
        (data.selectExpr("id AS y").write.format("delta").mode("overwrite").option("overwriteSchema", "true"), r"column 'x' to index is not in the data"),
        (data.write.format("delta").mode("overwrite").option("overwriteSchema", "true").partitionBy("id"), r"with overwriteSchema: the Qbeast table .* is not partitioned"),
    ]:  # fmt: skip
        with refused(message):
            writer.save(q)
        assert state(q) == before, message


def test_save_as_table_overwrite_overwrites_the_rows_and_keeps_the_table(spark, db) -> None:
    """`df.write.mode("overwrite").saveAsTable(t)` on an existing table is Delta's overwrite of its
    rows (the table's schema, partitioning, properties and Qbeast index kept; `overwriteSchema` to
    change them), not a replacement of the table: it dropped a Qbeast table's index and every
    property. `CREATE OR REPLACE TABLE ... AS SELECT` and `writeTo(...).createOrReplace()` still
    replace the table."""
    spark.sql("CREATE TABLE sq (x INT, y INT) USING qbeast TBLPROPERTIES ('columnsToIndex'='x,y', 'cubeSize'='50', "
              "'use.optimization.autoOptimize.enabled'='true')")  # fmt: skip
    spark.sql("INSERT INTO sq SELECT id, id % 7 FROM range(200)")
    new = spark.range(300).selectExpr("CAST(id % 5 AS INT) AS y", "CAST(id AS INT) AS x")  # columns in another order
    new.write.format("delta").mode("overwrite").saveAsTable("sq")
    conf = spark.sql("SHOW TBLPROPERTIES sq").collect()
    kept = {r.key: r.value for r in conf}
    assert kept["columnsToIndex"] == "x,y" and kept["use.optimization.autoOptimize.enabled"] == "true"
    assert rows(spark, "SELECT count(*), sum(x), sum(y) FROM sq") == [(300, 44850, 600)]
    assert spark.table("sq").columns == ["x", "y"]
    from use import QbeastTable

    qt = QbeastTable.for_path(spark, location(spark, "sq"))
    assert qt.read(sample=0.1).count() < 100  # still indexed: the sample prunes
    assert [r.operation for r in spark.sql("DESCRIBE HISTORY sq").collect()][0] == "WRITE"

    spark.sql("CREATE TABLE sp (a INT, p STRING) USING delta PARTITIONED BY (p) TBLPROPERTIES ('delta.appendOnly'='false')")
    spark.sql("INSERT INTO sp VALUES (1, 'x'), (2, 'y')")
    spark.createDataFrame([(3, "z")], "a int, p string").write.format("delta").mode("overwrite").saveAsTable("sp")
    detail = spark.sql("DESCRIBE DETAIL sp").collect()[0]
    assert detail.partitionColumns == ["p"] and detail.properties == {"delta.appendOnly": "false"}
    assert rows(spark, "SELECT a, p FROM sp") == [(3, "z")]
    before = state(location(spark, "sp"))
    for writer, message in [
        (spark.createDataFrame([("q",)], "b string").write.format("delta").mode("overwrite"), r"the data has column\(s\) b that the table"),
        (spark.createDataFrame([(4, "x")], "a int, p string").write.format("delta").mode("overwrite").partitionBy("a"),
         r"partitionBy\('a'\) differs from the partitioning of the table"),
        (spark.createDataFrame([(4, "x")], "a int, p string").write.format("delta").mode("overwrite").option("path", "/tmp/elsewhere"),
         r"saveAsTable\(sp\) in overwrite mode with the option path='/tmp/elsewhere': the table is at "),
    ]:  # fmt: skip
        with refused(message):
            writer.saveAsTable("sp")
        assert state(location(spark, "sp")) == before, message
    # overwriteSchema: the DataFrame's schema and partitioning, the properties kept
    spark.createDataFrame([("q", 1.5)], "b string, c double").write.format("delta").mode("overwrite").option(
        "overwriteSchema", "true").saveAsTable("sp")  # fmt: skip
    detail = spark.sql("DESCRIBE DETAIL sp").collect()[0]
    assert detail.partitionColumns == [] and detail.properties == {"delta.appendOnly": "false"}
    assert spark.table("sp").columns == ["b", "c"] and rows(spark, "SELECT * FROM sp") == [("q", 1.5)]
    # a missing table is created, as before
    spark.range(3).write.format("delta").mode("overwrite").saveAsTable("snew")
    spark.range(4).write.format("delta").mode("overwrite").saveAsTable("snew")
    assert rows(spark, "SELECT count(*) FROM snew") == [(4,)]
    # the V2 replacements still make a new table of the query
    spark.sql("CREATE OR REPLACE TABLE snew USING delta AS SELECT 'a' AS s")
    assert spark.table("snew").columns == ["s"]
    spark.range(2).selectExpr("1.5D AS d").writeTo("snew").using("delta").createOrReplace()
    assert rows(spark, "SELECT d FROM snew") == [(1.5,), (1.5,)]


def test_replace_where_writes_only_rows_of_the_partitions_it_replaces(spark, tmp_path) -> None:
    """`INSERT INTO t REPLACE WHERE <partition condition>`: the matching partitions' rows replaced;
    a row outside them is refused, as Delta's constraint check does, with nothing written."""
    path = str(tmp_path / "t")
    spark.range(6).selectExpr("id", "CAST(id % 3 AS STRING) AS p").write.format("delta").partitionBy("p").save(path)
    spark.sql(f"INSERT INTO delta.`{path}` REPLACE WHERE p = '0' SELECT 100 AS id, '0' AS p")
    assert rows(spark, f"SELECT id FROM delta.`{path}`") == [(1,), (2,), (4,), (5,), (100,)]
    before = state(path)
    with refused(r"the rows written do not all fall in the partitions the statement replaces: rows of partition p=1"):
        spark.sql(f"INSERT INTO delta.`{path}` REPLACE WHERE p = '0' SELECT 101 AS id, '1' AS p")
    with refused(r"the rows written do not all match the REPLACE WHERE condition \(`id` > 3L\) \(e.g. \{'id': 2"):
        spark.sql(f"INSERT INTO delta.`{path}` REPLACE WHERE id > 3 SELECT 2 AS id, '1' AS p")
    assert state(path) == before


def test_replace_where_on_any_column_in_sql_and_write_to(spark, db, tmp_path) -> None:
    """`INSERT INTO t REPLACE WHERE <condition on any columns>` and `writeTo(t).overwrite(<condition>)`:
    Delta's replaceWhere, the condition handed over as Spark SQL (strings with quotes, dates,
    timestamps, IN, OR, NOT), on Delta and Qbeast tables; rows outside it are refused, nothing written."""
    from pyspark.sql import functions as F

    spark.sql("CREATE TABLE rw (id BIGINT, s STRING, d DATE, t TIMESTAMP) USING delta")
    spark.sql(
        "INSERT INTO rw SELECT id, IF(id = 1, \"it's\", 'x'), DATE'2024-01-01' + CAST(id AS INT), "
        "TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, CAST(id AS INT)) FROM range(10)"
    )
    spark.sql("INSERT INTO rw REPLACE WHERE s = 'it''s' OR id IN (7, 8) SELECT 8, 'x', DATE'2024-02-01', NULL")
    assert rows(spark, "SELECT id FROM rw ORDER BY id") == [(i,) for i in (0, 2, 3, 4, 5, 6, 8, 9)]
    spark.sql(
        "INSERT INTO rw REPLACE WHERE d >= DATE'2024-01-06' AND NOT (t < TIMESTAMP'2024-01-01 06:00:00') "
        "SELECT 9, 'n', DATE'2024-03-01', TIMESTAMP'2024-01-02 00:00:00'"
    )  # replaces 6 and 9 (8's null time matches neither way, as in Delta: kept)
    assert rows(spark, "SELECT id, s FROM rw ORDER BY id") == [
        (0, "x"),
        (2, "x"),
        (3, "x"),
        (4, "x"),
        (5, "x"),
        (8, "x"),
        (9, "n"),
    ]
    spark.createDataFrame([(9, "w")], "id BIGINT, s STRING").selectExpr(
        "id", "s", "DATE'2024-03-02' AS d", "CAST(NULL AS TIMESTAMP) AS t"
    ).writeTo("rw").overwrite(F.col("id") >= 9)
    assert rows(spark, "SELECT id, s FROM rw WHERE id >= 8 ORDER BY id") == [(8, "x"), (9, "w")]
    root = location(spark, "rw")
    before = state(root)
    with refused(r"do not all match the REPLACE WHERE condition"):
        spark.sql("INSERT INTO rw REPLACE WHERE id < 3 SELECT 50, 'x', NULL, NULL")
    assert state(root) == before
    # a Qbeast table: the replaced rows' files are rewritten, the new rows written
    spark.sql("CREATE TABLE rq (x DOUBLE, y DOUBLE) USING qbeast TBLPROPERTIES ('columnsToIndex'='x,y')")
    spark.sql("INSERT INTO rq SELECT id, id * 2 FROM range(20)")
    spark.sql("INSERT INTO rq REPLACE WHERE x >= 10 SELECT 10.5, 0")
    assert rows(spark, "SELECT count(*), max(x) FROM rq") == [(11, 10.5)]


def test_user_metadata_of_a_write_option_or_the_session_lands_in_the_commit(spark, tmp_path) -> None:
    """Delta's `userMetadata` writer option, else `spark.databricks.delta.commitInfo.userMetadata`:
    the commit's `commitInfo.userMetadata` (DESCRIBE HISTORY's column), for saves, SQL writes and DML."""
    from use import DeltaTable
    from use.runtime.conf import session_conf

    path = str(tmp_path / "t")

    def last_user_metadata() -> str | None:
        return DeltaTable.for_path(spark, path).history(1).collect()[0]["userMetadata"]

    spark.range(4).write.format("delta").option("userMetadata", "created by job 7").save(path)
    assert last_user_metadata() == "created by job 7"
    spark.range(4, 6).write.format("delta").mode("append").option("userMetadata", "nightly").save(path)
    assert last_user_metadata() == "nightly"
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (10)")
    assert last_user_metadata() is None
    with session_conf(spark, {"spark.databricks.delta.commitInfo.userMetadata": "backfill"}):
        spark.sql(f"INSERT INTO delta.`{path}` VALUES (11)")
        assert last_user_metadata() == "backfill"
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 11")
        assert last_user_metadata() == "backfill"
        spark.range(1).write.format("delta").mode("append").option("userMetadata", "the option wins").save(path)
        assert last_user_metadata() == "the option wins"
    # DESCRIBE HISTORY (the history insight) shows it too
    assert [r["userMetadata"] for r in spark.sql(f"DESCRIBE HISTORY '{path}' LIMIT 3").collect()] == [
        "the option wins", "backfill", "backfill"]  # fmt: skip
    assert rows(spark, f"SELECT count(*) FROM delta.`{path}`") == [(8,)]


def test_replace_where_replaces_the_rows_matching_a_condition_on_any_column(spark, tmp_path) -> None:
    """Delta's `.option("replaceWhere", cond)` with an overwrite: the rows matching the condition
    (here on a data column) are replaced by the written ones in one commit, the files it can match
    rewritten with their other rows; rows outside the condition, a bad condition, and other
    replacing options with it are refused, nothing written."""
    from use import QbeastTable

    path = str(tmp_path / "t")
    spark.range(12).selectExpr("id", "CAST(id % 2 AS STRING) AS p").coalesce(1).write.format("delta").partitionBy("p").save(path)
    new = spark.range(100, 103).selectExpr("id", "'0' AS p")
    before = state(path)
    for writer, message in [
        (new.write.format("delta").mode("overwrite").option("replaceWhere", "id >= 200"), r"do not all match replaceWhere='id >= 200' \(e.g. \{'id': 100"),
        (new.write.format("delta").mode("overwrite").option("replaceWhere", "nosuch > 1"), r"the writer option replaceWhere='nosuch > 1' cannot be applied to the table"),
        (new.write.format("delta").mode("overwrite").option("replaceWhere", "id >= 100").option("overwriteSchema", "true"), r"cannot be combined with"),
    ]:  # fmt: skip
        with refused(message):
            writer.save(path)
        assert state(path) == before, message
    new.write.format("delta").mode("overwrite").option("replaceWhere", "id >= 4 AND id < 8 OR id >= 100").save(path)
    assert rows(spark, f"SELECT id FROM delta.`{path}`") == [
        (0,),
        (1,),
        (2,),
        (3,),
        (8,),
        (9,),
        (10,),
        (11,),
        (100,),
        (101,),
        (102,),
    ]
    assert sorted(_delta_rs(path).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 3, 8, 9, 10, 11, 100, 101, 102]
    version = len(before[0])
    info = next(a["commitInfo"] for a in commit_actions(path, version) if "commitInfo" in a)
    assert info["operation"] == "WRITE" and json.loads(info["operationParameters"]["predicate"]) == [
        "id >= 4 AND id < 8 OR id >= 100"
    ]
    spark.range(3).write.format("delta").mode("append").option("replaceWhere", "id > 0").save(
        path + "_new"
    )  # a new table: written
    # a Qbeast table: the rewritten rows join its staging revision; reads and samples stay exact
    q = str(tmp_path / "q")
    QbeastTable.write(spark.range(300).selectExpr("id", "rand(7) * 100 AS x"), q, columns_to_index=["x"], cube_size=50)
    qt = QbeastTable.for_path(spark, q)
    kept = qt.read().where("x >= 10").count()
    spark.range(1000, 1010).selectExpr("id", "5.0D AS x").write.format("delta").mode("overwrite").option(
        "replaceWhere", "x < 10"
    ).save(q)
    assert rows(spark, f"SELECT count(*), min(id) FROM qbeast.`{q}` WHERE x < 10") == [(10, 1000)]
    assert qt.read().count() == kept + 10 and qt.read(sample=1.0).count() == kept + 10
    # format("qbeast") takes it too (it overwrote the whole table before)
    spark.range(2000, 2005).selectExpr("id", "95.0D AS x").write.format("qbeast").mode("overwrite").option(
        "replaceWhere", "x >= 90"
    ).save(q)
    assert rows(spark, f"SELECT count(*), min(id) FROM qbeast.`{q}` WHERE x >= 90") == [(5, 2000)]
    assert rows(spark, f"SELECT count(*) FROM qbeast.`{q}` WHERE x < 10") == [(10,)]
