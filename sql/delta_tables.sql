-- Delta tables of the session catalog over JDBC: managed and external DDL, registration of an
-- existing table by LOCATION, inserts and overwrites, filtered reads, time travel, properties.

CREATE TABLE events (id BIGINT, city STRING, day DATE) USING delta PARTITIONED BY (day) COMMENT 'raw events';

-- IF NOT EXISTS leaves the table as it is (its columns stay id, city, day)
CREATE TABLE IF NOT EXISTS events (other STRING) USING delta;

INSERT INTO events VALUES (1, 'BCN', DATE '2024-01-01'), (2, 'NYC', DATE '2024-01-02'), (3, 'BCN', DATE '2024-01-01');

SELECT * FROM events ORDER BY id;

SELECT city, count(*) AS n FROM events WHERE day = DATE '2024-01-01' GROUP BY city ORDER BY city;

SELECT id FROM events WHERE id >= 2 ORDER BY id;

-- a static partition: only 2024-01-01 is replaced
INSERT OVERWRITE events PARTITION (day = '2024-01-01') SELECT 10, 'MAD';

SELECT * FROM events ORDER BY id;

-- the whole table
INSERT OVERWRITE events SELECT 7, 'LON', DATE '2024-03-01';

SELECT * FROM events ORDER BY id;

-- time travel: version 0 is the CREATE, 1 the first INSERT, 2 the partition overwrite
SELECT * FROM events VERSION AS OF 1 ORDER BY id;

SELECT * FROM events VERSION AS OF 2 ORDER BY id;

SELECT * FROM events VERSION AS OF 99;

DESCRIBE events;

DESCRIBE TABLE EXTENDED events;

SHOW CREATE TABLE events;

SHOW TBLPROPERTIES events;

ALTER TABLE events SET TBLPROPERTIES ('use.optimization.bytes-per-iter' = '1000', 'owner.team' = 'analytics');

SHOW TBLPROPERTIES events;

-- a bad use.optimization.* value is refused with the parser's error; nothing changes
ALTER TABLE events SET TBLPROPERTIES ('use.optimization.bytes-per-iter' = '-5');

ALTER TABLE events SET TBLPROPERTIES ('use.optimization.type' = 'NoSuchStrategy');

SHOW TBLPROPERTIES events ('use.optimization.bytes-per-iter');

ALTER TABLE events UNSET TBLPROPERTIES ('use.optimization.bytes-per-iter');

SHOW TBLPROPERTIES events;

-- external: a new table at an empty location
CREATE TABLE ext (k BIGINT, v STRING) USING delta LOCATION '${SCRATCH}/ext';

INSERT INTO ext VALUES (1, 'x'), (2, 'y');

-- DROP of an external table removes the registration only
DROP TABLE ext;

-- registering the existing table takes the schema from its log
CREATE TABLE again USING delta LOCATION '${SCRATCH}/ext';

DESCRIBE again;

SELECT * FROM again ORDER BY k;

-- DELETE (copy-on-write, one commit) returns the rows it deleted; one that matches nothing commits nothing
DELETE FROM again WHERE k = 1;

DELETE FROM again WHERE v = 'none';

-- UPDATE likewise (one commit, the files holding a matching row rewritten)
UPDATE again SET v = upper(v) WHERE k = 2;

-- MERGE: an upsert in one commit (affected, updated, deleted, inserted rows)
MERGE INTO again USING (SELECT 2L AS k, 'z' AS v UNION ALL SELECT 3L, 'w') s ON again.k = s.k
  WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *;

SELECT * FROM again ORDER BY k;

-- a path identifier reads a table without registering it
SELECT count(*) FROM delta.`${SCRATCH}/ext`;

-- CTAS and CREATE OR REPLACE (each one commit; the history stays)
CREATE TABLE summary USING delta AS SELECT city, count(*) AS n FROM events GROUP BY city;

SELECT * FROM summary ORDER BY city;

CREATE OR REPLACE TABLE summary USING delta AS SELECT 1 AS one;

SELECT * FROM summary;

SELECT * FROM summary VERSION AS OF 0 ORDER BY city;

CREATE OR REPLACE TABLE fresh (a INT) USING delta;

SHOW TABLES;

-- DROP of a managed table removes its data: CREATE ... LOCATION on its old directory finds no table
DROP TABLE summary;

CREATE TABLE summary_back USING delta LOCATION '${DATA_DIR}/warehouse/golden_delta_tables.db/summary';

DROP TABLE again;

SELECT count(*) FROM delta.`${SCRATCH}/ext`;

SHOW TABLES;

-- CREATE TABLE ... LIKE: an empty Delta table with the source's columns, partitioning and properties
CREATE TABLE events_like LIKE events;

SELECT partition_columns, num_files, properties, description FROM use_catalog.spark_catalog.golden_delta_tables.events_like.detail;

-- DESCRIBE HISTORY / DETAIL answer in Delta's columns
-- golden: columns only
DESCRIBE HISTORY events;

-- golden: columns only
DESCRIBE DETAIL events;

-- CONVERT TO DELTA: a parquet table of the catalog, then a parquet directory by path
CREATE TABLE raw USING parquet PARTITIONED BY (day) LOCATION '${SCRATCH}/raw' AS SELECT 1L AS id, DATE '2024-01-01' AS day UNION ALL SELECT 2L, DATE '2024-01-02';

CONVERT TO DELTA raw;

INSERT INTO raw VALUES (3, DATE '2024-01-02');

SELECT * FROM raw ORDER BY id;

SELECT format, partition_columns FROM use_catalog.spark_catalog.golden_delta_tables.raw.detail;

INSERT OVERWRITE DIRECTORY '${SCRATCH}/raw2' USING parquet SELECT 'a' AS k, 10 AS n;

CONVERT TO DELTA parquet.`${SCRATCH}/raw2` NO STATISTICS;

SELECT * FROM delta.`${SCRATCH}/raw2`;

CONVERT TO DELTA parquet.`${SCRATCH}/raw2` PARTITIONED BY (k STRING);

-- Delta's auto compaction: the third small file of a table with it on is compacted by the INSERT itself
CREATE TABLE compacted (id BIGINT) USING delta TBLPROPERTIES ('delta.autoOptimize.autoCompact' = 'true');

SET spark.databricks.delta.autoCompact.minNumFiles = 3;

INSERT INTO compacted VALUES (1);

INSERT INTO compacted VALUES (2);

INSERT INTO compacted VALUES (3);

SELECT version, operation, parameters['auto'] AS auto FROM use_catalog.spark_catalog.golden_delta_tables.compacted.history ORDER BY version;

SELECT num_files FROM use_catalog.spark_catalog.golden_delta_tables.compacted.detail;

SELECT sum(id) FROM compacted;

SET spark.databricks.delta.autoCompact.enabled = maybe;

INSERT INTO compacted VALUES (4);

RESET spark.databricks.delta.autoCompact.enabled;

RESET spark.databricks.delta.autoCompact.minNumFiles;

-- Delta's symlink format manifests, written on request
GENERATE symlink_format_manifest FOR TABLE compacted;

GENERATE manifest FOR TABLE compacted;
