-- Bad CALLs (issue 12 §5): each one clean message over JDBC, nothing changed.
CREATE TABLE t (a INT) USING delta;
INSERT INTO t VALUES (1);
CREATE TABLE p (a INT) USING parquet;

CALL use_catalog.system.optimize(table => 'no_such_table');

CALL use_catalog.system.optimize(table => 'no_db.t');

CALL use_catalog.system.optimize(table => '${SCRATCH}/no/such/dir');

CALL use_catalog.system.optimize(table => 'p');

CALL use_catalog.system.optimize(table => 't', strategy => 'NoSuchStrategy');

CALL use_catalog.system.optimize(table => 't', bytes_per_iter => 0);

CALL use_catalog.system.optimize(table => 't', max_iterations => 0);

CALL use_catalog.system.optimize(table => 't', dry_run => 'maybe');

CALL use_catalog.system.optimize(table => 't', no_such_argument => 1);

CALL use_catalog.system.optimize();

CALL use_catalog.system.optimize(table => 't', files => array('a.parquet'), zorder_by => 'a');

-- a strategy that needs a setting: the argument or the SQL that gives it
CALL use_catalog.system.optimize(table => 't', strategy => 'ZOrder');

CALL use_catalog.system.optimize(table => 't', strategy => 'SamplingOverheadReduction', dry_run => true);

CALL use_catalog.system.no_such_procedure('t');

CALL use_catalog.system.vacuum(table => 't', retention_hours => 1);

CALL use_catalog.system.convert_to_qbeast(table => 't', columns_to_index => 'no_such_column');

-- Delta's OPTIMIZE and VACUUM statements run the procedures, with their checks
OPTIMIZE t WHERE a = 1;

OPTIMIZE no_such_table ZORDER BY (a);

VACUUM t RETAIN 1 HOURS;

VACUUM t LITE;

RESTORE TABLE t TO VERSION AS OF 99;

RESTORE t TO TIMESTAMP AS OF now();

-- this connection's own optimization defaults are the procedures' defaults
SET `spark.qbeast.use.optimization.bytes-per-iter`=-5;

CALL use_catalog.system.optimize(table => 't', dry_run => true);

SET `spark.qbeast.use.optimization.bytes-per-iter`=5000000;

SELECT * FROM t;
