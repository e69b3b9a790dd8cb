"""The public facade: `use.QbeastTable` over a real table (write, for_path, revisions, metrics, errors)."""

from __future__ import annotations

import json
import os

import pytest

from use.errors import (
    IndexColumnError,
    InvalidArgumentError,
    NotAQbeastTableError,
    TableNotFoundError,
    VersionNotFoundError,
)


def _listing(path: str) -> dict[str, float]:
    return {os.path.join(d, f): os.path.getmtime(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files}


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    from pyspark.sql import functions as F

    import use

    path = str(tmp_path_factory.mktemp("qtable") / "t")
    df = spark.range(0, 2000, numPartitions=2).select(
        F.col("id").alias("a"), (F.col("id") % 97).cast("double").alias("b"), F.lit("z").alias("c")
    )
    result = use.QbeastTable.write(df, path, ["a", "b"], cube_size=400)
    return path, result


def test_write_and_open(spark, written):
    import use

    path, result = written
    assert result.revision_id == 1 and result.num_rows == 2000 and result.num_files >= 1
    qt = use.QbeastTable.for_path(spark, path)
    assert qt.path == os.path.abspath(path)
    assert qt.revision_ids() == [0, 1] and qt.latest_revision_id == 1
    assert qt.indexed_columns() == ["a", "b"] and qt.cube_size() == 400
    assert qt.revision(1).columns == ("a", "b") and qt.revision().revision_id == 1
    assert qt.read().count() == 2000
    assert qt.snapshot().version == result.version


def test_revisions_metadata_is_plain_data(spark, written):
    import use

    path, _ = written
    meta = use.QbeastTable.for_path(spark, path).revisions_metadata()
    json.dumps(meta)  # plain data all the way down
    by_id = {m["revision_id"]: m for m in meta}
    assert by_id[0]["is_staging"] and by_id[0]["num_files"] == 0
    assert by_id[1]["revisionID"] == 1 and by_id[1]["desiredCubeSize"] == 400
    assert by_id[1]["num_rows"] == 2000 and by_id[1]["indexed_columns"] == ["a", "b"]
    assert by_id[1]["columnTransformers"][0]["className"] == "io.qbeast.core.transform.LinearTransformer"


def test_index_metrics(spark, written):
    import use

    path, _ = written
    qt = use.QbeastTable.for_path(spark, path)
    metrics = qt.index_metrics()
    assert sorted(metrics) == [1]
    m = qt.index_metrics(1)
    assert m is metrics[1] or m == metrics[1]
    assert m.row_count == 2000 and m.desired_cube_size == 400 and m.dimension_count == 2
    assert m.cube_count >= 5 and m.depth >= 2
    assert sum(m.file_levels.values()) == m.file_count
    # inner cubes are about the desired size (the estimation is approximate)
    assert 0.5 < m.inner_size_vs_desired < 1.6
    assert "inner cube sizes" in str(m)
    with pytest.raises(VersionNotFoundError):
        qt.index_metrics(7)


def test_snapshot_is_fresh_after_another_commit(spark, written):
    """A QbeastTable reads the log on every call: another writer's commit is seen at once."""
    import pyarrow as pa

    import use
    from use.delta import DeltaLog
    from use.delta.datafile import write_data_file

    path, _ = written
    qt = use.QbeastTable.for_path(spark, path)
    v, n = qt.snapshot().version, qt.read().count()
    log = DeltaLog.for_path(path)
    schema = log.snapshot().schema
    add = write_data_file(path, pa.table({"a": [10**9], "b": [1.0], "c": ["new"]}).cast(schema), schema=schema)
    log.start_transaction().add(add).commit("WRITE", {"mode": "Append"})  # an untagged (staging) file
    assert qt.snapshot().version == v + 1 and qt.read().count() == n + 1
    assert qt.latest_revision_id == 1 and qt.read(filter="c = 'new'").count() == 1


def test_errors(spark, written, tmp_path):
    import pyarrow as pa

    import use

    path, _ = written
    qt = use.QbeastTable.for_path(spark, path)
    with pytest.raises(VersionNotFoundError, match="revision 9"):
        qt.revision(9)
    with pytest.raises(InvalidArgumentError):
        qt.revision("1")  # type: ignore[arg-type]
    with pytest.raises(TableNotFoundError, match="no table"):
        use.QbeastTable.for_path(spark, str(tmp_path / "missing"))
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(TableNotFoundError):
        use.QbeastTable.for_path(spark, str(tmp_path / "emptydir"))
    deltalake = pytest.importorskip("deltalake")
    plain = str(tmp_path / "plain")
    deltalake.write_deltalake(plain, pa.table({"a": [1, 2]}))
    with pytest.raises(NotAQbeastTableError, match="convert"):
        use.QbeastTable.for_path(spark, plain)
    # a bad write changes nothing on disk
    before = _listing(path)
    with pytest.raises(IndexColumnError):
        use.QbeastTable.write(spark.range(5).selectExpr("id as a", "cast(id as double) as b", "'z' as c"), path, ["nope"])
    assert _listing(path) == before
