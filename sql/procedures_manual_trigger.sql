-- The manual trigger of the seeds (continuous-optimization.txt, optimizing-tables-guide.txt),
-- verbatim, on the seeds' table spark_catalog.default.test. The ALTER runs one optimization with
-- those settings (handed to the server's optimization service, which runs it in the background)
-- and changes no property of the table.
DROP TABLE IF EXISTS default.test;
CREATE TABLE default.test (id INT, x DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='id,x', 'cubeSize'='100');
INSERT INTO default.test SELECT CAST(id AS INT), (id % 97) / 97.0 FROM range(300);
INSERT INTO default.test SELECT CAST(id AS INT), (id % 89) / 89.0 FROM range(300);

ALTER TABLE use_catalog.spark_catalog.default.test SET TBLPROPERTIES('use.optimization.type'='CubeDefragmentation','use.optimization.bytes-per-iter'='5000000');

SHOW TBLPROPERTIES default.test ('use.optimization.type');

ALTER TABLE use_catalog.spark_catalog.default.test SET TBLPROPERTIES(
'use.optimization.type'='LeveledCompaction',
'use.optimization.bytes-per-iter'='5000000'
);

SHOW TBLPROPERTIES default.test ('use.optimization.bytes-per-iter');

-- settings go through the optimizer's config parser: a bad one is refused, nothing happens
ALTER TABLE use_catalog.spark_catalog.default.test SET TBLPROPERTIES('use.optimization.bytes-per-iter'='lots');

ALTER TABLE use_catalog.spark_catalog.default.test SET TBLPROPERTIES('use.optimization.type'='NoSuchStrategy');

-- only use.optimization.* settings, only SET
ALTER TABLE use_catalog.spark_catalog.default.test SET TBLPROPERTIES('delta.appendOnly'='true');

ALTER TABLE use_catalog.spark_catalog.default.test UNSET TBLPROPERTIES('use.optimization.type');

ALTER TABLE use_catalog.spark_catalog.default.no_such_table SET TBLPROPERTIES('use.optimization.type'='LeveledCompaction');

SELECT count(*) AS n FROM default.test;
