"""Converting a parquet directory or a Delta table (made by delta-rs) into a Qbeast table (§6.4)."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from use.errors import IndexColumnError, InvalidArgumentError, TableNotFoundError, UnsupportedFeatureError


def _data(n: int, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "x": pa.array(range(start, start + n), pa.int64()),
            "y": pa.array([(i * 7919) % 1000 / 10.0 for i in range(start, start + n)], pa.float64()),
            "s": pa.array([f"s{i % 13}" for i in range(start, start + n)]),
        }
    )


def _parquet_dir(path: str, parts: int = 3, n: int = 200) -> None:
    os.makedirs(path)
    for i in range(parts):
        pq.write_table(_data(n, i * n), os.path.join(path, f"part-{i:05d}.parquet"))
    open(os.path.join(path, "_SUCCESS"), "w").close()


def _listing(path: str) -> dict[str, float]:
    out = {}
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            out[p] = os.path.getmtime(p)
    return out


def _log_lines(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_parquet_directory(spark, table_path):
    from use import QbeastTable
    from use.qbeast.writer import write

    _parquet_dir(table_path)
    result = QbeastTable.convert(spark, table_path, ["x", "y"], cube_size=100)
    assert result.converted and result.source_format == "parquet" and result.num_files == 3
    # one commit (version 0): protocol, metaData with staging revision 0 and lastRevisionID "0",
    # and one add per parquet file
    assert result.version == 0
    assert sorted(os.listdir(os.path.join(table_path, "_delta_log"))) == [f"{0:020d}.json"]
    last = _log_lines(table_path, result.version)
    assert sum("add" in a for a in last) == 3 and not any("remove" in a for a in last)
    assert sum("protocol" in a for a in last) == 1
    [meta] = [a["metaData"] for a in last if "metaData" in a]
    assert meta["configuration"]["qbeast.lastRevisionID"] == "0"
    assert meta["configuration"]["columnsToIndex"] == "x,y"
    rev0 = json.loads(meta["configuration"]["qbeast.revision.0"])
    assert [t["className"] for t in rev0["columnTransformers"]] == ["io.qbeast.core.transform.EmptyTransformer"] * 2
    assert rev0["desiredCubeSize"] == 100
    [commit] = [a["commitInfo"] for a in last if "commitInfo" in a]
    assert commit["operation"] == "CONVERT"
    assert commit["operationParameters"]["sourceFormat"] == "parquet"

    qt = QbeastTable.for_path(spark, table_path)
    assert qt.revision_ids() == [0] and qt.latest_revision_id == 0
    assert qt.read().count() == 600
    # the staging files are pruned by their footer stats
    from use.qbeast.reader import plan_read

    assert plan_read(spark, qt.snapshot(), filter="x < 150").num_files == 1
    # sampling a converted table hashes the staging revision's columns
    from pyspark.sql import functions as F

    from use.qbeast.weight import weight_from_fraction

    expected = qt.read().filter(F.hash("x", "y") < weight_from_fraction(0.3)).count()
    assert qt.read(sample=0.3).count() == expected

    # an indexed append creates revision 1, and all rows stay readable
    df = spark.createDataFrame(_data(300, 10_000).to_pandas())
    wr = write(spark, df, table_path, ["x", "y"], cube_size=100)
    assert wr.revision_id == 1
    qt = QbeastTable.for_path(spark, table_path)
    assert qt.revision_ids() == [0, 1]
    assert qt.read().count() == 900
    assert qt.read(filter="x >= 10000").count() == 300

    # converting again is a no-op, with the table's own index (or no cube size) ...
    version = QbeastTable.for_path(spark, table_path).snapshot().version
    for cube_size in (100, None):
        again = QbeastTable.convert(spark, table_path, ["x", "y"], cube_size=cube_size)
        assert not again.converted and again.source_format == "qbeast"
        assert again.version == version
    # ... and refused, not ignored, with another one (a trial's `'nosuch', 1000` came back "not converted")
    from use.errors import IndexColumnError

    with pytest.raises(IndexColumnError, match=r"already a Qbeast table indexed on x, y, not on nosuch; .*overwrite"):
        QbeastTable.convert(spark, table_path, "nosuch", cube_size=100)
    with pytest.raises(IndexColumnError, match=r"already a Qbeast table with cube size 100, not 1000; omit cube_size"):
        QbeastTable.convert(spark, table_path, ["x", "y"], cube_size=1000)
    assert QbeastTable.for_path(spark, table_path).snapshot().version == version


def test_delta_table_made_by_delta_rs(spark, table_path):
    deltalake = pytest.importorskip("deltalake")
    from use import QbeastTable
    from use.qbeast.writer import write

    deltalake.write_deltalake(table_path, _data(250))
    deltalake.write_deltalake(table_path, _data(250, 250), mode="append")
    result = QbeastTable.convert(spark, table_path, "x,s:hashing", cube_size=50)
    assert result.converted and result.source_format == "delta" and result.version == 2
    qt = QbeastTable.for_path(spark, table_path)
    assert qt.revision(0).columns == ("x", "s")
    assert qt.read().count() == 500
    # delta-rs still reads the converted table
    assert deltalake.DeltaTable(table_path).to_pyarrow_table().num_rows == 500

    df = spark.createDataFrame(_data(200, 1000).to_pandas())
    write(spark, df, table_path, ["x", "s:hashing"], cube_size=50)
    qt = QbeastTable.for_path(spark, table_path)
    assert qt.latest_revision_id == 1 and qt.read().count() == 700
    assert sorted(r.x for r in qt.read(filter="x in (3, 1003)").collect()) == [3, 1003]


def test_bad_inputs_change_nothing(spark, tmp_path):
    from use import QbeastTable

    # missing path
    with pytest.raises(TableNotFoundError):
        QbeastTable.convert(spark, str(tmp_path / "missing"), ["x"])
    # an empty directory
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TableNotFoundError):
        QbeastTable.convert(spark, str(empty), ["x"])
    assert _listing(str(empty)) == {}

    plain = str(tmp_path / "plain")
    _parquet_dir(plain)
    before = _listing(plain)
    for bad in (["nope"], "x,x", "x:nonsense", [], "", [1], None):
        with pytest.raises(IndexColumnError):
            QbeastTable.convert(spark, plain, bad)  # type: ignore[arg-type]
    for bad_size in (0, -5, 1.5, "10", True):
        with pytest.raises(InvalidArgumentError):
            QbeastTable.convert(spark, plain, ["x"], cube_size=bad_size)  # type: ignore[arg-type]
    assert _listing(plain) == before and not os.path.exists(os.path.join(plain, "_delta_log"))

    # partitioned directories are refused
    parted = tmp_path / "parted"
    (parted / "k=1").mkdir(parents=True)
    pq.write_table(_data(10), str(parted / "k=1" / "part-0.parquet"))
    before = _listing(str(parted))
    with pytest.raises(UnsupportedFeatureError, match="partitioned"):
        QbeastTable.convert(spark, str(parted), ["x"])
    assert _listing(str(parted)) == before


def test_partitioned_delta_table_is_refused(tmp_path, spark):
    deltalake = pytest.importorskip("deltalake")
    from use import QbeastTable

    path = str(tmp_path / "pdelta")
    deltalake.write_deltalake(path, _data(20).append_column("k", pa.array([i % 2 for i in range(20)])), partition_by=["k"])
    before = _listing(path)
    with pytest.raises(UnsupportedFeatureError, match="partitioned"):
        QbeastTable.convert(spark, path, ["x"])
    assert _listing(path) == before
