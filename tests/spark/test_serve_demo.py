"""`use serve --demo` (`make run`): the demo table is made in SQL with continuous optimization on,
once per data dir, and the printed help names the JDBC URL, the clients and the seeds' queries."""

from __future__ import annotations


def test_the_demo_table_is_made_once_with_continuous_optimization_on(spark, tmp_path) -> None:
    from use.delta import DeltaLog
    from use.server.config import ServerOptions
    from use.server.demo import (
        AUTO_OPTIMIZE_KEY,
        DEMO_APPENDS,
        DEMO_QUERIES,
        DEMO_ROWS_PER_APPEND,
        DEMO_TABLE,
        DemoTable,
        print_demo,
    )

    options = ServerOptions.from_flags(tmp_path / "data", port=10123)
    demo = DemoTable(options)
    try:
        demo.start(spark)
        rows = spark.sql(f"SELECT count(*), count(DISTINCT id) FROM default.{DEMO_TABLE}").first()
        assert tuple(rows) == (DEMO_APPENDS * DEMO_ROWS_PER_APPEND,) * 2
        props = dict(spark.sql(f"SHOW TBLPROPERTIES default.{DEMO_TABLE}").collect())
        assert props[AUTO_OPTIMIZE_KEY] == "true"
        root = spark.sql(f"DESCRIBE TABLE EXTENDED default.{DEMO_TABLE}").where("col_name = 'Location'").first()[1]
        version = DeltaLog.for_path(root).snapshot().version
        assert version == DEMO_APPENDS + 1  # CREATE, the appends, the property

        demo.start(spark)  # a restart on the same data dir: nothing written
        assert DeltaLog.for_path(root).snapshot().version == version
    finally:
        spark.sql(f"DROP TABLE IF EXISTS default.{DEMO_TABLE}")

    printed: list[str] = []
    print_demo(options, printed.append)
    text = "\n".join(printed)
    assert "jdbc:hive2://127.0.0.1:10123/default" in text and "BeeLine" in text and "pyhive" in text
    assert all(q in text for q in DEMO_QUERIES)
    assert "SELECT * FROM use_catalog.spark_catalog.default.demo_events.optimizations" in text
    assert "Ctrl-C" in text
