-- Spark's own parquet tables through the server: DDL, writes, reads, metadata.
-- Managed tables live under the server's warehouse (DATA_DIR/warehouse).

CREATE TABLE events (id BIGINT, city STRING, amount DOUBLE) USING parquet;

INSERT INTO events VALUES (1, 'BCN', 10.5), (2, 'NYC', 20.0), (3, 'BCN', NULL);

SELECT * FROM events ORDER BY id;

SELECT city, count(*) AS n, sum(amount) AS total FROM events GROUP BY city ORDER BY city;

INSERT INTO events SELECT id + 10, city, amount * 2 FROM events WHERE city = 'BCN';

SELECT count(*) FROM events;

CREATE TABLE big_spenders USING parquet AS SELECT id, amount FROM events WHERE amount > 15;

SELECT * FROM big_spenders ORDER BY id;

INSERT OVERWRITE big_spenders SELECT id, amount FROM events WHERE id > 10;

SELECT * FROM big_spenders ORDER BY id;

CREATE TABLE by_city (id BIGINT, city STRING) USING parquet PARTITIONED BY (city);

INSERT INTO by_city SELECT id, city FROM events;

SHOW PARTITIONS by_city;

SELECT * FROM by_city WHERE city = 'NYC';

CREATE TABLE external_events (id BIGINT, note STRING) USING parquet LOCATION '${SCRATCH}/external_events';

INSERT INTO external_events VALUES (7, 'outside the warehouse');

SELECT * FROM external_events;

DESCRIBE events;

DESCRIBE TABLE EXTENDED external_events;

SHOW CREATE TABLE by_city;

ALTER TABLE events SET TBLPROPERTIES ('owner.team' = 'analytics', 'comment' = 'raw events');

SHOW TBLPROPERTIES events ('owner.team');

ALTER TABLE events UNSET TBLPROPERTIES ('owner.team');

SHOW TBLPROPERTIES events ('owner.team');

SHOW TABLES;

DROP TABLE big_spenders;

DROP TABLE external_events;

SHOW TABLES;
