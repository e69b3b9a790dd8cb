"""Delta's `spark.databricks.delta.properties.defaults.*`: the session's default properties of new
tables, applied by every path that creates one; explicit properties win; bad values refused."""

from __future__ import annotations

import os

from sql_support import location, refused, rows

PREFIX = "spark.databricks.delta.properties.defaults."


def _props(spark, table: str) -> dict[str, str]:
    return {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def test_new_tables_take_the_sessions_default_properties(spark, db, tmp_path) -> None:
    from use import DeltaTable
    from use.delta import DeltaLog
    from use.runtime.conf import session_conf

    defaults = {PREFIX + "appendOnly": "true", PREFIX + "enableChangeDataFeed": "true", PREFIX + "noSuchKey": "1"}
    with session_conf(spark, defaults):
        spark.sql("CREATE TABLE a (id BIGINT) USING delta")
        spark.sql("CREATE TABLE b USING delta TBLPROPERTIES ('delta.appendOnly'='false') AS SELECT 1L AS id")
        spark.sql("CREATE TABLE q (x DOUBLE) USING qbeast TBLPROPERTIES ('columnsToIndex'='x')")
        spark.range(3).write.format("delta").save(str(tmp_path / "p"))
        DeltaTable.write(spark.range(3), str(tmp_path / "w"))
        spark.range(3).write.format("delta").saveAsTable("s")
    a = _props(spark, "a")
    assert a["delta.appendOnly"] == "true" and a["delta.enableChangeDataFeed"] == "true" and "delta.noSuchKey" not in a
    assert _props(spark, "b")["delta.appendOnly"] == "false"  # the table's own property wins
    assert _props(spark, "q")["delta.appendOnly"] == "true" and _props(spark, "s")["delta.appendOnly"] == "true"
    for path in (str(tmp_path / "p"), str(tmp_path / "w"), location(spark, "a")):
        snap = DeltaLog.for_path(path).snapshot()
        assert snap.metadata.configuration["delta.enableChangeDataFeed"] == "true"
        assert snap.protocol.min_writer_version >= 4  # the change data feed's protocol, as when turned on
    # existing tables are left as they are; an append-only table refuses a DELETE, as the default asked
    with session_conf(spark, {PREFIX + "appendOnly": "false"}):
        spark.sql("INSERT INTO a VALUES (1)")
    assert _props(spark, "a")["delta.appendOnly"] == "true"
    with refused("append"):
        spark.sql("DELETE FROM a")
    assert rows(spark, "SELECT count(*) FROM a") == [(1,)]


def test_a_bad_default_refuses_the_creation_and_creates_nothing(spark, db, tmp_path) -> None:
    from use.runtime.conf import session_conf

    with session_conf(spark, {PREFIX + "appendOnly": "maybe"}):
        with refused(
            r"the session's default property of new tables spark\.databricks\.delta\.properties\.defaults\.appendOnly='maybe'"
        ):
            spark.sql("CREATE TABLE bad (id BIGINT) USING delta")
    assert rows(spark, "SHOW TABLES LIKE 'bad'") == []
    with session_conf(spark, {PREFIX + "enableDeletionVectors": "true"}):
        with refused("deletionVectors"):
            spark.range(2).write.format("delta").save(str(tmp_path / "dv"))
    left = [f for _d, _s, names in os.walk(str(tmp_path / "dv")) for f in names]
    assert [f for f in left if f.endswith(".parquet") or f.endswith(".json")] == []
