-- CALL use_catalog.system.optimize, vacuum and convert_to_qbeast (issue 12 §4) over JDBC. Tables
-- are written one row per INSERT (one file each), so plans are the same on every machine; a real
-- optimize or vacuum reports timings and file names, so only their columns are compared.
CREATE TABLE t (a INT, b STRING) USING delta;
INSERT INTO t VALUES (1, 'a');
INSERT INTO t VALUES (2, 'b');
INSERT INTO t VALUES (3, 'c');

-- the plan: one row per merge task, nothing written
CALL use_catalog.system.optimize(table => 't', dry_run => true);

-- positional arguments (table, strategy, revision_id, bytes_per_iter, max_iterations, dry_run)
CALL use_catalog.system.optimize('t', 'BinPacking', NULL, 1000000, NULL, true);

-- one row per iteration (strategy, files and bytes in/out, rows, time_ms, version, ...)
-- golden: columns only
CALL use_catalog.system.optimize(table => 't');

SELECT count(*) AS n, sum(a) AS total FROM t;

-- the fixed point: nothing left to plan, another run commits nothing; names resolve as Spark's do.
-- Nothing selected is one row of zero metrics saying why, as `use optimize` says it
CALL use_catalog.system.optimize(table => 'golden_procedures_optimize.t', dry_run => true);

CALL use_catalog.system.optimize(table => 'spark_catalog.golden_procedures_optimize.t');

-- a strategy that does not apply to a plain Delta table selects nothing: the row says so
CALL use_catalog.system.optimize(table => 't', strategy => 'LeveledCompactionSelection');

-- Delta's statement: the procedure's dry run
OPTIMIZE golden_procedures_optimize.t;

-- vacuum: the removed files are younger than the 168 h retention, so nothing is deleted
CALL use_catalog.system.vacuum(table => 't');

-- below the retention without force => true: refused, nothing deleted
CALL use_catalog.system.vacuum(table => 't', retention_hours => 0);

-- one row per file a forced vacuum would delete (dry run: nothing deleted)
-- golden: columns only
CALL use_catalog.system.vacuum(table => 't', retention_hours => 0, dry_run => true, force => true);

SELECT count(*) AS n FROM t;

-- Delta's RESTORE: one new commit back to version 1 (one row: versions, files and sizes), then the
-- table reads as it did
-- golden: columns only
RESTORE TABLE t TO VERSION AS OF 1;

SELECT count(*) AS n, sum(a) AS total FROM t;

-- convert a parquet directory by path, then index its staging files
CREATE TABLE p (x INT, y INT) USING parquet LOCATION '${SCRATCH}/p';
INSERT INTO p VALUES (1, 2);

CALL use_catalog.system.convert_to_qbeast('${SCRATCH}/p', 'x,y');

CALL use_catalog.system.convert_to_qbeast(table => '${SCRATCH}/p', columns_to_index => 'x,y');

-- already a Qbeast table with another cube size (or columns): refused, not ignored
CALL use_catalog.system.convert_to_qbeast(table => '${SCRATCH}/p', columns_to_index => 'x,y', cube_size => 1000);

CALL use_catalog.system.optimize(table => '${SCRATCH}/p', dry_run => true);

SELECT x, y FROM qbeast.`${SCRATCH}/p`;
