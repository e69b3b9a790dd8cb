-- use_catalog's per-table insight tables (issue 12): history, detail, files, cubes, revisions, layout and
-- plan of a Qbeast table and a partitioned Delta table. Volatile columns (file names, times,
-- bytes) are left out; the data is deterministic, so is the index.
CREATE TABLE q (id INT, x DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='id,x', 'cubeSize'='100');
INSERT INTO q SELECT CAST(id AS INT), (id % 97) / 97.0 FROM range(500);
INSERT INTO q SELECT CAST(id AS INT), (id % 89) / 89.0 FROM range(500, 700);
CREATE TABLE d (id INT, p STRING) USING delta PARTITIONED BY (p);
INSERT INTO d VALUES (1, 'a'), (2, 'a'), (3, 'b');
INSERT INTO d VALUES (4, 'b');

SHOW TABLES IN use_catalog.spark_catalog.golden_insights_tables.q;

SELECT version, operation, is_optimization, engine_info
FROM use_catalog.spark_catalog.golden_insights_tables.q.history ORDER BY version;

SELECT revision_id, file_level, count(*) AS files, sum(records) AS records, sum(num_cubes) AS cubes
FROM use_catalog.spark_catalog.golden_insights_tables.q.files GROUP BY revision_id, file_level ORDER BY revision_id, file_level;

SELECT revision_id, cube_id, depth, element_count, desired_cube_size, fill, is_leaf, num_blocks
FROM use_catalog.spark_catalog.golden_insights_tables.q.cubes ORDER BY revision_id, cube_id;

SELECT revision_id, is_staging, is_latest, indexed_columns, column_specs, desired_cube_size, num_files, rows, num_cubes, depth
FROM use_catalog.spark_catalog.golden_insights_tables.q.revisions ORDER BY revision_id;

SELECT revision_id, num_files, rows, num_cubes, num_blocks, small_files, depth, overlap_columns, overlap_depth,
       round(health_score, 3) AS health_score
FROM use_catalog.spark_catalog.golden_insights_tables.q.layout ORDER BY revision_id;

SELECT task, strategy, kind, revision_id, num_files, reason
FROM use_catalog.spark_catalog.golden_insights_tables.q.plan ORDER BY task;

SELECT version, operation, is_optimization FROM use_catalog.spark_catalog.golden_insights_tables.d.history ORDER BY version;

SELECT partition_values['p'] AS p, count(*) AS files, sum(records) AS records, max(revision_id) AS revision
FROM use_catalog.spark_catalog.golden_insights_tables.d.files GROUP BY partition_values['p'] ORDER BY p;

SELECT count(*) AS cubes FROM use_catalog.spark_catalog.golden_insights_tables.d.cubes;

SELECT format, version, num_files, partition_columns, clustering_columns, min_reader_version, min_writer_version
FROM use_catalog.spark_catalog.golden_insights_tables.d.detail;

-- Delta's DESCRIBE DETAIL reads the same insight (ids and times differ per run)
-- golden: columns only
DESCRIBE DETAIL golden_insights_tables.q;

SELECT revision_id, num_files, rows, small_files FROM use_catalog.spark_catalog.golden_insights_tables.d.layout;

SELECT count(*) AS tasks FROM use_catalog.spark_catalog.golden_insights_tables.d.plan;

-- each query sees the latest snapshot: one more commit, one more history row
INSERT INTO d VALUES (5, 'c');
SELECT count(*) AS commits FROM use_catalog.spark_catalog.golden_insights_tables.d.history;
SELECT count(*) AS files FROM use_catalog.spark_catalog.golden_insights_tables.d.files;
