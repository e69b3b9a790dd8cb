-- use_catalog's per-table `optimizations` (issue 12): the seeds' query verbatim, on the seeds'
-- table spark_catalog.default.test (this script is the only one that creates it). No optimization
-- has run here: the rows are the table's events (tests/test_sql_insights.py checks them against
-- the log after a real optimize); this script checks the names, the schema and the empty case.
DROP TABLE IF EXISTS default.test;
CREATE TABLE default.test (id INT, x DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='id,x', 'cubeSize'='100');
INSERT INTO default.test SELECT CAST(id AS INT), (id % 97) / 97.0 FROM range(500);

SELECT * FROM use_catalog.spark_catalog.default.test.optimizations;

-- the same table by location
SELECT count(*) FROM use_catalog.path.`${DATA_DIR}/warehouse/test`.optimizations;

-- every table's events, with its name (dashboards)
SELECT catalog, database, table_name, optimization_name FROM use_catalog.system_lake_tables.optimizations
WHERE database = 'default' AND table_name = 'test';

DESCRIBE TABLE use_catalog.spark_catalog.default.test.optimizations;
