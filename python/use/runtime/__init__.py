"""The Spark runtime helpers the layers above share: what runs USE's own Spark work, not what plans it.

* `jobs`          job groups: run a block's jobs in one, wait until a cancelled group's tasks have ended
* `conf`          session settings: read, scoped for a block, the parquet codec, Delta's table defaults
* `query_errors`  PySpark's query-error loggers silenced while USE checks user input through Spark
* `shim`          the JVM shim's jar: built from `jvm-shim/` on first use, and whether a session loaded it
* `jvm`           the driver's JVM as py4j shows it (Spark's and the shim's classes by name)
* `conform`       a DataFrame's columns cast to a table's schema (names, order, nested fields)
* `files`         a DataFrame written as plain Delta data files (mapInArrow), the caller commits them

Building the session itself (`use.session`) sits at the top: it installs the SQL surface.
"""
