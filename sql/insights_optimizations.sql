-- use_catalog's per-table `optimizations` (issue 12): the seeds' query verbatim, on the seeds'
-- table spark_catalog.default.test (procedures_manual_trigger.sql drops and makes it again too).
-- First the empty case, then after a CALL optimize the events (tests/test_sql_insights.py checks
-- them field by field against the log).
DROP TABLE IF EXISTS default.test;
CREATE TABLE default.test (id INT, x DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='id,x', 'cubeSize'='100');
INSERT INTO default.test SELECT CAST(id AS INT), (id % 97) / 97.0 FROM range(0, 60);
INSERT INTO default.test SELECT CAST(id AS INT), (id % 97) / 97.0 FROM range(60, 120);
INSERT INTO default.test SELECT CAST(id AS INT), (id % 97) / 97.0 FROM range(120, 180);
INSERT INTO default.test SELECT CAST(id AS INT), (id % 97) / 97.0 FROM range(180, 240);
INSERT INTO default.test SELECT CAST(id AS INT), (id % 97) / 97.0 FROM range(240, 300);
INSERT INTO default.test SELECT CAST(id AS INT), (id % 97) / 97.0 FROM range(300, 360);

SELECT * FROM use_catalog.spark_catalog.default.test.optimizations;

-- one optimization from SQL: its rows (timings, files) vary, the columns and the events do not
-- golden: columns only
CALL use_catalog.system.optimize(table => 'default.test');

-- golden: columns only
SELECT * FROM use_catalog.spark_catalog.default.test.optimizations;

SELECT optimization_name, revision_id, input_files_stats.element_count AS rows_in, output_files_stats.element_count AS rows_out,
       version IS NOT NULL AS has_version, finished_at >= started_at AS ordered
FROM use_catalog.spark_catalog.default.test.optimizations ORDER BY version, optimization_name;

-- the same table by location
SELECT count(*) FROM use_catalog.path.`${DATA_DIR}/warehouse/test`.optimizations;

-- every table's events, with its name (dashboards)
SELECT catalog, database, table_name, optimization_name FROM use_catalog.system_lake_tables.optimizations
WHERE database = 'default' AND table_name = 'test';

DESCRIBE TABLE use_catalog.spark_catalog.default.test.optimizations;
