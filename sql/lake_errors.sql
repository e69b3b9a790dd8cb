-- Bad statements on Delta and Qbeast tables: one clean message each (USE's error kind, what is
-- wrong, how to fix it), and nothing changed (the last statements show the tables as they were).

CREATE TABLE t (id BIGINT, name STRING) USING delta;

INSERT INTO t VALUES (1, 'a'), (2, 'b');

CREATE TABLE q (x BIGINT, y BIGINT) USING qbeast OPTIONS ('columnsToIndex' = 'x,y');

CREATE TABLE b (x INT) USING qbeast OPTIONS ('columnsToIndex' = 'x', 'cubeSise' = '10');

CREATE TABLE b (x INT) USING delta OPTIONS ('columnsToIndex' = 'x');

CREATE TABLE b (x INT) USING qbeast OPTIONS ('columnsToIndex' = 'nope');

CREATE TABLE b (x INT) USING qbeast;

CREATE TABLE b (x INT) USING qbeast OPTIONS ('columnsToIndex' = 'x', 'cubeSize' = 'big');

CREATE TABLE b (x INT) USING delta TBLPROPERTIES ('use.optimization.bytes-per-iter' = 'lots');

CREATE TABLE b USING delta LOCATION '${SCRATCH}/nothing_here';

CREATE TABLE b (id INT) USING delta LOCATION '${DATA_DIR}/warehouse/golden_lake_errors.db/t';

CREATE TABLE b USING qbeast LOCATION '${DATA_DIR}/warehouse/golden_lake_errors.db/t';

INSERT INTO t SELECT 1;

INSERT INTO t VALUES ('not a number', 'x');

INSERT INTO q SELECT 1, 'two';

DELETE FROM t WHERE rand() < 0.5;

UPDATE t SET name = uuid() WHERE id = 2;

MERGE INTO t USING (SELECT 1 AS id, 'm' AS name UNION ALL SELECT 1, 'n') s ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name;

ALTER TABLE t SET TBLPROPERTIES ('use.optimization.bytes-per-iter' = '-1');

ALTER TABLE t SET TBLPROPERTIES ('qbeast.columnsToIndex' = 'id');

ALTER TABLE t DROP COLUMN name;

INSERT INTO t VERSION AS OF 0 VALUES (3, 'c');

SELECT * FROM t VERSION AS OF 7;

SHOW TABLES;

SELECT * FROM t ORDER BY id;

SELECT count(*) FROM q;
