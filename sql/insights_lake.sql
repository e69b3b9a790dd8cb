-- use_catalog's namespaces and lake-wide tables (issue 12): system_lake_tables.metastore_summary
-- (the seeds' queries verbatim), optimizations and service_status. The lake holds the tables of
-- every script run before this one, so the verbatim queries over the whole lake check columns only (tests/test_sql_insights.py
-- checks their rows, and a table whose directory is gone or whose log is corrupt).
SHOW NAMESPACES IN use_catalog;
SHOW TABLES IN use_catalog.system_lake_tables;
SHOW NAMESPACES IN use_catalog.spark_catalog LIKE '*golden_insights_lake';

CREATE TABLE scheduled (id INT, x DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='id,x', 'cubeSize'='100')
TBLPROPERTIES ('use.optimization.type'='CubeDefragmentation', 'use.optimization.bytes-per-iter'='5000000');
CREATE TABLE plain (id INT) USING delta;
INSERT INTO plain VALUES (1), (2), (3);
CREATE TABLE other (id INT) USING parquet;
CREATE TABLE ext (id INT) USING delta LOCATION '${SCRATCH}/ext';
INSERT INTO ext VALUES (1);

SHOW NAMESPACES IN use_catalog.spark_catalog.golden_insights_lake;
SHOW TABLES IN use_catalog.spark_catalog.golden_insights_lake;

-- golden: columns only
SELECT * FROM use_catalog.system_lake_tables.metastore_summary;

-- golden: columns only
SELECT * FROM use_catalog.system_lake_tables.metastore_summary WHERE table_properties['use.optimization.type'] is not null;

-- golden: columns only
SELECT * FROM use_catalog.system_lake_tables.metastore_summary
WHERE table_properties['use.optimization.type'] is not null;

SELECT table_name, table_type, provider, is_qbeast, latest_version, num_files, num_records, latest_revision_id,
       optimization_settings, optimization_count, error
FROM use_catalog.system_lake_tables.metastore_summary WHERE database = 'golden_insights_lake' ORDER BY table_name;

SELECT table_name, table_properties['use.optimization.type'] AS type
FROM use_catalog.system_lake_tables.metastore_summary
WHERE database = 'golden_insights_lake' AND table_properties['use.optimization.type'] is not null;

-- golden: columns only
SELECT * FROM use_catalog.system_lake_tables.service_status;

SELECT count(*) FROM use_catalog.system_lake_tables.optimizations WHERE database = 'golden_insights_lake';
