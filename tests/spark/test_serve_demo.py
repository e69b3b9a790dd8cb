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
        DEMO_STRATEGY,
        DEMO_TABLE,
        TYPE_KEY,
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
        assert props[AUTO_OPTIMIZE_KEY] == "true" and props[TYPE_KEY] == DEMO_STRATEGY
        root = spark.sql(f"DESCRIBE TABLE EXTENDED default.{DEMO_TABLE}").where("col_name = 'Location'").first()[1]
        version = DeltaLog.for_path(root).snapshot().version
        assert version == DEMO_APPENDS + 1  # CREATE, the appends, the property

        demo.start(spark)  # a restart on the same data dir: nothing written
        assert DeltaLog.for_path(root).snapshot().version == version

        # The seeds' two queries, as the demo prints them, show the table: in the continuously
        # optimized tables at once, and in its events once an optimization ran (the service's, here one call).
        events_query, summary_query, _ = DEMO_QUERIES
        summary = spark.sql(summary_query).where(f"database = 'default' AND table_name = '{DEMO_TABLE}'").collect()
        assert len(summary) == 1 and summary[0].auto_optimize and summary[0].pending_bytes > 0, summary
        print(f"{summary_query}\n  -> {summary[0].table_name}: health {summary[0].health_score:.1f}, "
              f"parts {dict(summary[0].health_parts)}, pending {summary[0].pending_bytes} bytes")  # fmt: skip
        assert spark.sql(events_query).count() == 0
        spark.sql(f"CALL use_catalog.system.optimize(table => 'default.{DEMO_TABLE}')").collect()
        events = spark.sql(events_query).collect()
        assert events, "the optimization the demo table was set up for left no event"
        print(f"{events_query}\n  -> {len(events)} events: {sorted({e.optimization_name for e in events})}")
    finally:
        spark.sql(f"DROP TABLE IF EXISTS default.{DEMO_TABLE}")

    printed: list[str] = []
    print_demo(options, printed.append)
    text = "\n".join(printed)
    assert "jdbc:hive2://127.0.0.1:10123/default" in text and "BeeLine" in text and "pyhive" in text
    assert all(q in text for q in DEMO_QUERIES)
    assert "SELECT * FROM use_catalog.spark_catalog.default.demo_events.optimizations" in text
    assert "Ctrl-C" in text
