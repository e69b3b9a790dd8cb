"""The OTree write's JVM path (the shim's OTreeFileWriter) against the Python path it replaces:
same rows in the same files with the same blocks and stats, on a real local Spark."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from test_qbeast_write import _check_table, _commit, _listing, _qsnap

from use.delta.log import DeltaLog
from use.errors import ConfigError, ShimBuildError
from use.qbeast.jvm_write import JVM_WRITE_CONF, point_columns
from use.qbeast.writer import write


def _writer_of(path: str) -> set[str]:
    """Which parquet library wrote each live file: 'parquet-mr' (Spark, the JVM path) or
    'parquet-cpp-arrow' (pyarrow, the Python path)."""
    files = _qsnap(path).files.column("path").to_pylist()
    return {pq.read_metadata(os.path.join(path, p)).created_by.split(" ")[0] for p in files}


def _typed(spark, n: int, start: int = 0, *, nulls: bool = True):
    """Rows of every type the JVM path transforms (double, date, timestamp before and after 1970
    with sub-millisecond micros), with nulls in an indexed column (unless `nulls=False`: a null
    takes the revision's random null value, so two tables would not share their space), NaN in a
    data float and a struct holding a float."""
    from pyspark.sql import functions as F

    base = spark.range(start, start + n, numPartitions=2)
    null_x = F.col("id") % 97 == 0 if nulls else F.lit(False)
    return base.select(
        F.col("id"),
        F.when(null_x, F.lit(None)).otherwise(F.rand(3) * 100).alias("x"),
        F.date_add(F.lit(dt.date(1965, 1, 1)), (F.rand(4) * 20_000).cast("int")).alias("d"),
        F.timestamp_micros((F.rand(5) * 2e15 - 5e14).cast("long")).alias("ts"),
        F.when(F.col("id") % 50 == 7, F.lit(float("nan"))).otherwise(F.rand(6)).cast("float").alias("f"),
        F.struct((F.rand(7) * 10).alias("g"), F.col("id").cast("string").alias("label")).alias("st"),
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"),
    )


def _files(path: str) -> list[dict]:
    """Per live file: its ids, blocks (sorted) and parsed stats, in the order of their smallest id."""
    qsnap = _qsnap(path)
    out = []
    for p, tags, stats in zip(
        qsnap.files.column("path").to_pylist(),
        qsnap.files.column("tags").to_pylist(),
        qsnap.files.column("stats").to_pylist(),
        strict=False,
    ):
        ids = pq.read_table(os.path.join(path, p), columns=["id"]).column("id").to_numpy()
        blocks = sorted(json.loads(dict(tags)["blocks"]), key=lambda b: b["cubeId"])
        out.append({"ids": np.sort(ids).tolist(), "blocks": blocks, "stats": json.loads(stats)})
    return sorted(out, key=lambda f: f["ids"][0])


@pytest.fixture
def python_path(spark):
    spark.conf.set(JVM_WRITE_CONF, "false")
    yield
    spark.conf.unset(JVM_WRITE_CONF)


def test_session_has_the_shim_and_linear_writes_take_the_jvm_path(spark, tmp_path, python_path) -> None:
    from use.runtime.shim import shim_loaded

    assert shim_loaded(spark)
    spark.conf.unset(JVM_WRITE_CONF)
    linear = str(tmp_path / "linear")
    write(spark, _typed(spark, 3_000), linear, ["x", "d", "ts"], cube_size=500)
    assert _writer_of(linear) == {"parquet-mr"}
    # Rows with a null indexed value sit where the revision's null value puts them: blocks exact.
    _check_table(spark, linear, np.arange(3_000), ["x", "d", "ts"])
    # Transformations without a bit-exact Spark expression take the Python path.
    hashed = str(tmp_path / "hashed")
    write(spark, _typed(spark, 3_000), hashed, ["x", "s:hashing"], cube_size=500)
    assert _writer_of(hashed) == {"parquet-cpp-arrow"}
    # So does a codec Spark does not write as pyarrow does.
    spark.conf.set("spark.sql.parquet.compression.codec", "brotli")
    try:
        brotli = str(tmp_path / "brotli")
        write(spark, _typed(spark, 1_000), brotli, ["x"], cube_size=500)
        assert _writer_of(brotli) == {"parquet-cpp-arrow"}
    finally:
        spark.conf.unset("spark.sql.parquet.compression.codec")
    # And any write when the conf says so.
    spark.conf.set(JVM_WRITE_CONF, "false")
    off = str(tmp_path / "off")
    write(spark, _typed(spark, 1_000), off, ["x"], cube_size=500)
    assert _writer_of(off) == {"parquet-cpp-arrow"}


@pytest.mark.parametrize("shuffle", [False, True], ids=["no-shuffle", "shuffled"])
def test_both_paths_write_the_same_files(spark, tmp_path, python_path, shuffle) -> None:
    """Same input, both paths, with or without the shuffle by file (`optimize_write`): the same
    rows in each file, the same blocks, the same Delta stats (NaN columns and floats inside structs
    without a max), two appends deep. Shuffled, every planned file is written once, whole."""
    df1, df2 = _typed(spark, 6_000, nulls=False).cache(), _typed(spark, 4_000, start=6_000, nulls=False).cache()
    tables = {}
    for jvm in ("true", "false"):
        spark.conf.set(JVM_WRITE_CONF, jvm)
        path = str(tmp_path / f"jvm_{jvm}")
        write(spark, df1, path, ["x", "d", "ts"], cube_size=300, optimize_write=shuffle)
        write(spark, df2, path, ["x", "d", "ts"], optimize_write=shuffle)
        tables[jvm] = path
    assert _writer_of(tables["true"]) == {"parquet-mr"} and _writer_of(tables["false"]) == {"parquet-cpp-arrow"}
    jvm_files, py_files = _files(tables["true"]), _files(tables["false"])
    assert len(jvm_files) == len(py_files) > 8
    for path in tables.values():
        for version in (0, 1):
            adds = [a["add"] for a in _commit(path, version) if "add" in a]
            cubes = [b["cubeId"] for a in adds for b in json.loads(a["tags"]["blocks"])]
            # One file per planned group when shuffled; parts of one cube from several tasks if not.
            assert (len(cubes) == len(set(cubes))) == shuffle
    assert [f["ids"] for f in jvm_files] == [f["ids"] for f in py_files]
    assert [f["blocks"] for f in jvm_files] == [f["blocks"] for f in py_files]
    # The Delta stats are equal but for two bounds the JVM path leaves out, both safe (a missing
    # bound never skips a file): parquet-mr writes no min/max for a float chunk holding NaN, and
    # floats inside structs are not checked for NaN in the JVM, so they get no max.
    for jvm_file, py_file in zip(jvm_files, py_files, strict=False):
        js, ps = jvm_file["stats"], py_file["stats"]
        has_nan = any(i % 50 == 7 for i in jvm_file["ids"])
        assert ("f" in js["maxValues"]) == ("f" in js["minValues"]) == (not has_nan)
        assert ("f" in ps["maxValues"]) == (not has_nan) and "f" in ps["minValues"]
        assert "g" not in js["maxValues"]["st"] and "g" in ps["maxValues"]["st"]
        if has_nan:
            del ps["minValues"]["f"]
        del ps["maxValues"]["st"]["g"]
        assert js == ps
    # Every promise of a written table holds for the JVM path's (exact blocks, delta-rs reads all).
    _check_table(spark, tables["true"], np.arange(10_000), ["x", "d", "ts"])
    # Only the data files and the log in the root: no `.crc` side files from Hadoop.
    live = set(_qsnap(tables["true"]).files.column("path").to_pylist())
    assert {p for p in _listing(tables["true"]) if not p.startswith("_delta_log/")} == live
    # Timestamps as INT64 microseconds (Spark's INT96 default would leave them without stats).
    any_file = os.path.join(tables["true"], min(live))
    ts = pq.read_metadata(any_file).schema.column(3)
    assert (ts.name, ts.physical_type) == ("ts", "INT64") and "timeUnit=microseconds" in str(ts.logical_type)
    assert spark.read.parquet(tables["true"]).count() == 10_000


def test_point_columns_equal_numpy_transform_bit_for_bit(spark, tmp_path) -> None:
    """The Spark expressions give exactly `revision.transform` (numpy) on edge values: out of the
    space on both sides, NaN, infinities, nulls, huge longs, dates and timestamps before 1970 with
    sub-millisecond parts (floor, not truncation)."""
    import pyarrow as pa

    path = str(tmp_path / "space")
    utc = dt.UTC
    space = pa.table(
        {
            "l": pa.array([-(2**61), 2**62], pa.int64()),
            "x": pa.array([-3.5, 1e3], pa.float64()),
            "f": pa.array([0.0, 1.0], pa.float32()),
            "d": pa.array([dt.date(1950, 1, 1), dt.date(2030, 1, 1)], pa.date32()),
            "ts": pa.array(
                [dt.datetime(1960, 1, 1, tzinfo=utc), dt.datetime(2040, 1, 1, tzinfo=utc)], pa.timestamp("us", tz="UTC")
            ),
        }
    )
    write(spark, spark.createDataFrame(space), path, ["l", "x", "f", "d", "ts"], cube_size=10)
    revision = _qsnap(path).revisions[1]
    ts_values = [-1, -999, -1_000, -1_001, 0, 1, 1_999, -(10**15) - 1, 2 * 10**15 + 7, None]
    n = len(ts_values)
    probe = pa.table(
        {
            "l": pa.array([-(2**63), 2**63 - 1, 0, 2**61 + 1, 123_456_789_012_345_677, None, -1, 7, 2**62, -(2**61)], pa.int64()),
            "x": pa.array(
                [float("nan"), float("inf"), -float("inf"), -0.0, 1e300, -1e300, None, 0.1, 999.999, -3.5], pa.float64()
            ),
            "f": pa.array([float("nan"), 0.3, None, 1.5, -0.1, 1e-8, 0.999999, 0.5, 1.0, 0.0], pa.float32()),
            "d": pa.array(
                [dt.date(1, 1, 1), dt.date(1969, 12, 31), dt.date(1970, 1, 1), None, dt.date(9999, 12, 31)] * 2, pa.date32()
            ),
            "ts": pa.array(ts_values, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        }
    )
    assert probe.num_rows == n
    df = spark.createDataFrame(probe)
    points = point_columns(df, revision)
    assert points is not None
    got = df.select(*[p.alias(f"c{i}") for i, p in enumerate(points)]).toArrow()
    spark_points = np.column_stack([got.column(i).to_numpy() for i in range(got.num_columns)])
    numpy_points = revision.transform(probe)
    assert spark_points.shape == numpy_points.shape == (n, 5)
    assert np.array_equal(spark_points, numpy_points), np.argwhere(spark_points != numpy_points)
    # Decimals have no bit-exact expression (pyarrow's decimal -> double may round differently).
    dec = spark.createDataFrame([(1,)], "v int").selectExpr(
        "cast(v as decimal(10, 2)) as l", "1.0 as x", "cast(0 as float) as f", "current_date() as d", "current_timestamp() as ts"
    )
    assert point_columns(dec, revision) is None


@pytest.mark.parametrize("jvm", ["true", "false"], ids=["jvm", "python"])
def test_failed_shuffled_write_task_leaves_the_table_as_it_was(spark, tmp_path, monkeypatch, python_path, jvm) -> None:
    """A shuffled write whose task for file 0 fails (a directory already sits at that file's name)
    after the input was shuffled: that task's other files and every file the other tasks wrote
    are deleted, nothing is committed; the directory, not the write's, is left alone."""
    import types
    import uuid

    from use.qbeast import write_tasks

    path = str(tmp_path / "t")
    write(spark, _typed(spark, 2_000), path, ["x", "d"], cube_size=500)
    before = (DeltaLog.for_path(path).snapshot().version, _listing(path))
    write_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    monkeypatch.setattr(write_tasks, "uuid", types.SimpleNamespace(uuid4=lambda: write_id, uuid3=uuid.uuid3, UUID=uuid.UUID))
    # File 0 is in every plan; whichever task writes it finds a non-empty directory there.
    blockers = [write_tasks._task_file_name(write_id, 0, t) for t in range(spark.sparkContext.defaultParallelism)]
    for name in blockers:
        os.makedirs(os.path.join(path, name, "not-a-data-file"))
    spark.conf.set(JVM_WRITE_CONF, jvm)
    with pytest.raises(Exception, match="is not empty|already exists"):
        write(spark, _typed(spark, 6_000, start=10_000), path, ["x", "d"], optimize_write=True)
    after = [p for p in _listing(path) if p.split("/")[0] not in blockers]
    assert (DeltaLog.for_path(path).snapshot().version, after) == before
    assert all(os.path.isdir(os.path.join(path, name, "not-a-data-file")) for name in blockers)


def test_shuffled_writes_fall_back_to_the_python_path(spark, tmp_path) -> None:
    """Where the JVM path cannot run (a hashing transformation, a codec Spark writes otherwise) a
    shuffled write takes the Python path: still one file per planned group, every row once."""
    hashed = str(tmp_path / "hashed")
    write(spark, _typed(spark, 3_000), hashed, ["x", "s:hashing"], cube_size=500, optimize_write=True)
    spark.conf.set("spark.sql.parquet.compression.codec", "brotli")
    try:
        brotli = str(tmp_path / "brotli")
        write(spark, _typed(spark, 3_000), brotli, ["x"], cube_size=500, optimize_write=True)
    finally:
        spark.conf.unset("spark.sql.parquet.compression.codec")
    for path in (hashed, brotli):
        assert _writer_of(path) == {"parquet-cpp-arrow"}
        adds = [a["add"] for a in _commit(path, 0) if "add" in a]
        cubes = [b["cubeId"] for a in adds for b in json.loads(a["tags"]["blocks"])]
        assert len(adds) > 1 and len(cubes) == len(set(cubes))
    _check_table(spark, hashed, np.arange(3_000), ["x", "s"])
    # Spark's bundled codecs cannot read brotli: the rows are checked with pyarrow.
    assert sorted(i for f in _files(brotli) for i in f["ids"]) == list(range(3_000))


def test_failed_jvm_write_leaves_the_table_as_it_was(spark, tmp_path) -> None:
    """A task failing mid-write (here a row that raises) fails the write; every file written by
    any task is deleted and nothing is committed; a new table leaves no directory behind."""
    from pyspark.sql import functions as F

    path = str(tmp_path / "t")
    write(spark, _typed(spark, 2_000), path, ["x", "d"], cube_size=500)
    before = (DeltaLog.for_path(path).snapshot().version, _listing(path))
    bad = _typed(spark, 3_000, start=10_000).withColumn(
        "s", F.when(F.col("id") == 12_999, F.raise_error(F.lit("boom in a write task"))).otherwise(F.col("s"))
    )
    with pytest.raises(Exception, match="boom in a write task"):
        write(spark, bad, path, ["x", "d"])
    assert (DeltaLog.for_path(path).snapshot().version, _listing(path)) == before
    fresh = str(tmp_path / "fresh")
    with pytest.raises(Exception, match="boom in a write task"):
        write(spark, bad, fresh, ["x", "d"], cube_size=500)
    assert not os.path.exists(fresh)


def test_bad_jvm_write_conf_is_a_config_error(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    write(spark, _typed(spark, 500), path, ["x"], cube_size=500)
    before = (DeltaLog.for_path(path).snapshot().version, _listing(path))
    spark.conf.set(JVM_WRITE_CONF, "sometimes")
    try:
        with pytest.raises(ConfigError, match=r"spark\.qbeast\.index\.jvmWrite must be true or false, got 'sometimes'"):
            write(spark, _typed(spark, 500, start=500), path, ["x"])
    finally:
        spark.conf.unset(JVM_WRITE_CONF)
    assert (DeltaLog.for_path(path).snapshot().version, _listing(path)) == before


def test_shim_build_is_cached_and_reports_compile_errors(tmp_path, monkeypatch) -> None:
    from use.runtime import shim

    src = tmp_path / "src"
    (src / "t").mkdir(parents=True)
    monkeypatch.setattr(shim, "SOURCE_DIR", src)
    monkeypatch.setattr(shim, "_BUILD_DIR", tmp_path / "build")
    with pytest.raises(ShimBuildError, match="no Scala sources"):
        shim.build_shim()
    good = src / "t" / "Ok.scala"
    good.write_text("package t\nobject Ok { def one: Int = 1 }\n")
    jar = shim.build_shim()
    assert jar.is_file() and jar.parent == tmp_path / "build"
    mtime = jar.stat().st_mtime_ns
    assert shim.build_shim() == jar and jar.stat().st_mtime_ns == mtime  # cached, not rebuilt
    good.write_text('package t\nobject Ok { def one: Int = "not an int" }\n')
    with pytest.raises(ShimBuildError, match=r"did not compile[\s\S]*type mismatch"):
        shim.build_shim()
    # The failed build left no partial jar; the good one is still there for its sources.
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == [jar.name]
    assert isinstance(shim.SOURCE_DIR, Path)


def test_session_settings_put_the_shim_after_the_callers_jars() -> None:
    from use.runtime.shim import build_shim
    from use.session import session_settings

    jar = str(build_shim())
    assert session_settings()["spark.jars"] == jar
    mine = session_settings({"spark.jars": "/opt/extra.jar", "spark.sql.shuffle.partitions": "3"})
    assert mine["spark.jars"] == f"/opt/extra.jar,{jar}" and mine["spark.sql.shuffle.partitions"] == "3"


def test_a_new_build_removes_older_jars_of_its_spark_version_only(tmp_path) -> None:
    """Another venv's JVM on the same source tree may be running on its jar: removing it broke its
    later jobs (Spark's closure cleaner reads class bytes from the jar: "capturingClassReader is null")."""
    from use.runtime.shim import _prune_old_jars

    names = ["use-jvm-shim-spark4.1.1-aaaa.jar", "use-jvm-shim-spark4.1.1-bbbb.jar", "use-jvm-shim-spark4.3.0-cccc.jar",
             "use-jvm-shim-0123456789abcdef.jar"]  # fmt: skip
    for name in names:
        (tmp_path / name).write_bytes(b"jar")
    _prune_old_jars(tmp_path / "use-jvm-shim-spark4.1.1-bbbb.jar")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["use-jvm-shim-spark4.1.1-bbbb.jar", "use-jvm-shim-spark4.3.0-cccc.jar"]
