-- What every JDBC session gets from the server's session: USE's settings, the Hive metastore.

SET spark.sql.catalogImplementation;

SET spark.sql.session.timeZone;

SELECT current_database();

SET spark.sql.shuffle.partitions = 3;

SET spark.sql.shuffle.partitions;

CREATE TEMPORARY VIEW numbers AS SELECT id FROM range(3);

SELECT * FROM numbers ORDER BY id;
