-- Errors reach JDBC clients as one message (what is wrong; Spark's hint how to fix it), with the
-- SQLSTATE, never a JVM stack trace or a Python traceback.

CREATE TABLE t (id INT, name STRING) USING parquet;

SELECT * FROM no_such_table;

SELECT no_such_column FROM t;

SELEC 1;

SELECT 1 / 0;

SELECT raise_error('custom failure');

CREATE TABLE t (id INT) USING parquet;

DROP TABLE no_such_table;

INSERT INTO t VALUES (1, 'a', 'one column too many');

INSERT INTO t VALUES ('not a number', 'x');

DELETE FROM t WHERE id = 1;

CREATE TABLE bad (id INT) USING no_such_format;

SELECT * FROM t;
