-- use_catalog's names and DDL that are refused (issue 12 §5): each one clean message, nothing changed.
CREATE TABLE t (id INT) USING delta;
INSERT INTO t VALUES (1);
CREATE TABLE p (id INT) USING parquet;

-- unknown insight, unknown table, unknown lake table, unknown namespace shape: the valid names
SELECT * FROM use_catalog.spark_catalog.golden_insights_errors.t.nope;
SELECT * FROM use_catalog.spark_catalog.golden_insights_errors.missing.files;
SELECT * FROM use_catalog.no_catalog.db.t.files;
SELECT * FROM use_catalog.system_lake_tables.nope;
SELECT * FROM use_catalog.path.`${SCRATCH}/none`.files;
-- a table that is not Delta
SELECT * FROM use_catalog.spark_catalog.golden_insights_errors.p.files;
-- the table itself is a name only (ALTER TABLE on it is the manual trigger); read it in its catalog
SELECT * FROM use_catalog.spark_catalog.golden_insights_errors.t;
-- Delta's DESCRIBE HISTORY ... LIMIT takes a count of commits
DESCRIBE HISTORY golden_insights_errors.t LIMIT -1;
DESCRIBE HISTORY golden_insights_errors.t LIMIT many;
-- DESCRIBE of a missing table names it as written (as OPTIMIZE does)
DESCRIBE DETAIL golden_insights_errors.nope;

-- DDL on use_catalog is refused
CREATE TABLE use_catalog.spark_catalog.golden_insights_errors.n (id INT);
DROP TABLE use_catalog.spark_catalog.golden_insights_errors.t.files;
DROP TABLE use_catalog.spark_catalog.golden_insights_errors.t;
ALTER TABLE use_catalog.spark_catalog.golden_insights_errors.t.files RENAME TO use_catalog.spark_catalog.golden_insights_errors.t.f2;
INSERT INTO use_catalog.spark_catalog.golden_insights_errors.t.files SELECT * FROM use_catalog.spark_catalog.golden_insights_errors.t.files;
CREATE NAMESPACE use_catalog.spark_catalog.newdb;
DROP NAMESPACE use_catalog.system_lake_tables;

-- nothing changed
SELECT * FROM t;
SELECT version, operation FROM use_catalog.spark_catalog.golden_insights_errors.t.history ORDER BY version;
SHOW TABLES;

-- bad optimization defaults of this session (its own SET): layout and plan compute in a Python
-- worker, yet the error is the one USE error with its SQLSTATE, raised when the query is planned
SET `spark.qbeast.use.optimization.bytes-per-iter`=-5;
SELECT * FROM use_catalog.spark_catalog.golden_insights_errors.t.plan;
SELECT * FROM use_catalog.spark_catalog.golden_insights_errors.t.layout;
SET `spark.qbeast.use.optimization.bytes-per-iter`=5000000;
SET `spark.qbeast.use.optimization.bogus`=1;
SELECT * FROM use_catalog.spark_catalog.golden_insights_errors.t.layout;
