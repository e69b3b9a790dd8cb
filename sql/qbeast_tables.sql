-- Qbeast tables of the session catalog over JDBC: OPTIONS, indexed inserts, filtered reads,
-- TABLESAMPLE as the Qbeast sample (tests/test_sql_golden.py checks the sampled rows recorded here
-- against QbeastTable.read(sample=...) of the same rows), time travel, CTAS and replace.

CREATE TABLE points (x BIGINT, y BIGINT, tag STRING) USING qbeast OPTIONS ('columnsToIndex' = 'x,y', 'cubeSize' = '500');

SHOW TBLPROPERTIES points ('columnsToIndex');

SHOW TBLPROPERTIES points ('cubeSize');

INSERT INTO points SELECT id, (id * 7) % 1000, CAST(id % 5 AS STRING) FROM range(5000);

SELECT count(*), sum(x), sum(y) FROM points;

SELECT count(*), min(x), max(x) FROM points WHERE x >= 1000 AND x < 1100;

SELECT tag, count(*) AS n FROM points WHERE y < 10 GROUP BY tag ORDER BY tag;

-- exactly the rows of QbeastTable.read(sample=0.1) / read(sample=0.01)
SELECT count(*) AS n, sum(x) AS sx, sum(y) AS sy FROM points TABLESAMPLE (10 PERCENT);

SELECT count(*) AS n, sum(x) AS sx, sum(y) AS sy FROM points TABLESAMPLE (1 PERCENT);

SELECT x, y FROM points TABLESAMPLE (1 PERCENT) WHERE x < 2500 ORDER BY x;

INSERT INTO points VALUES (100000, 5, 'late');

SELECT count(*) FROM points;

SELECT count(*) FROM points VERSION AS OF 1;

-- INSERT OVERWRITE of the whole table keeps the index's columns
INSERT OVERWRITE points SELECT id, id, 'over' FROM range(10);

SELECT count(*), sum(x) FROM points;

SHOW TBLPROPERTIES points ('columnsToIndex');

DESCRIBE points;

-- CTAS: one commit; then CREATE OR REPLACE with other indexed columns
CREATE TABLE squares USING qbeast OPTIONS ('columnsToIndex' = 'n') AS SELECT id AS n, id * id AS sq FROM range(100);

SELECT count(*), sum(sq) FROM squares;

CREATE OR REPLACE TABLE squares USING qbeast OPTIONS ('columnsToIndex' = 'sq', 'cubeSize' = '20') AS SELECT id * id AS sq FROM range(50);

SELECT count(*), max(sq) FROM squares;

SHOW TBLPROPERTIES squares ('columnsToIndex');

-- an existing Qbeast table registered by LOCATION keeps its index
CREATE TABLE points_again USING qbeast LOCATION '${DATA_DIR}/warehouse/golden_qbeast_tables.db/points';

SELECT count(*), sum(x) FROM points_again;

SHOW TBLPROPERTIES points_again ('columnsToIndex');

ALTER TABLE points SET TBLPROPERTIES ('use.optimization.type' = 'SmallFiles');

SHOW TBLPROPERTIES points_again ('use.optimization.type');

-- external: DROP keeps the data
CREATE TABLE ext USING qbeast OPTIONS ('columnsToIndex' = 'id') LOCATION '${SCRATCH}/ext' AS SELECT id FROM range(20);

DROP TABLE ext;

SELECT count(*) FROM qbeast.`${SCRATCH}/ext`;

SHOW TABLES;
