-- Values of each type as JDBC clients receive them (PyHive renders them as below; the Hive JDBC
-- driver shows a TIMESTAMP with a fraction, 2024-01-02 03:04:05.0).

SELECT CAST('2024-01-02 03:04:05' AS TIMESTAMP) AS ts,
       DATE '2024-02-29' AS d, CAST(1.25 AS DECIMAL(5, 2)) AS dec,
       true AS flag, array(1, 2) AS arr, named_struct('a', 1) AS st;

SELECT CAST(NULL AS INT) AS i, CAST(7 AS TINYINT) AS t, CAST(9000000000 AS BIGINT) AS b, 2.5D AS dbl, 'text' AS s, X'CAFE' AS bin, map('k', 1) AS m;
