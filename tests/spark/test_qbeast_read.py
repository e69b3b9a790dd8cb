"""Reads of tables made by the OTree writer: filters and samples equal the same operations over a
full read, exactly, and selective ones read strictly fewer files."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from use.errors import InvalidArgumentError, NotAQbeastTableError, TableNotFoundError

N = 3000


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    """Two appends (the second widens x, so two revisions) indexed on x (int), d (date) and s (hashed
    string), with nulls; plus a non-indexed payload."""
    from pyspark.sql import functions as F

    from use.qbeast.writer import write

    path = str(tmp_path_factory.mktemp("qread") / "t")

    def gen(start: int, n: int):
        return spark.range(start, start + n, numPartitions=3).select(
            F.col("id").cast("int").alias("x"),
            F.expr("date_add(date'2024-01-01', cast(id % 366 as int))").alias("d"),
            F.when(F.col("id") % 17 == 0, F.lit(None))
            .otherwise(F.concat(F.lit("k"), (F.col("id") % 50).cast("string")))
            .alias("s"),
            (F.col("id") * 7 % 1000 / 10.0).alias("v"),
            F.when(F.col("id") % 11 == 0, F.lit(None)).otherwise(F.col("id") % 5).alias("p"),
        )

    first = write(spark, gen(0, N), path, ["x", "d", "s"], cube_size=300)
    second = write(spark, gen(N, N // 2), path, ["x", "d", "s"], cube_size=300)
    assert (first.revision_id, second.revision_id) == (1, 2)
    return path


def rows(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


FILTERS = [
    "x >= 1000 and x < 1200",
    "x < 50 or x > 4400",
    "x in (5, 77, 2500, 4000)",
    "d = date'2024-03-01'",
    "d between '2024-02-01' and '2024-02-10' and x < 3000",
    "s = 'k7'",
    "s in ('k1', 'k2') and x > 2000",
    "s is null",
    "p is null and x < 500",
    "v > 99.0",
    "not (x >= 100)",
    "x > 100000",
]


@pytest.mark.parametrize("flt", FILTERS)
def test_filter_equals_full_read_filter(spark, table, flt):
    from use import QbeastTable

    qt = QbeastTable.for_path(spark, table)
    full = qt.read()
    assert rows(qt.read(filter=flt)) == rows(full.filter(flt))


def test_filter_as_column(spark, table):
    from pyspark.sql import functions as F

    from use import QbeastTable

    qt = QbeastTable.for_path(spark, table)
    col = (F.col("d") >= F.lit(dt.date(2024, 6, 1))) & F.col("s").isin("k3", "k4")
    assert rows(qt.read(filter=col)) == rows(qt.read().filter(col))


def test_selective_filters_read_fewer_files(spark, table):
    from use.qbeast.reader import load_snapshot, plan_read

    qsnap = load_snapshot(table)
    total = qsnap.files.num_rows
    assert total > 6
    for flt in ("x >= 1000 and x < 1100", "x > 4400"):
        plan = plan_read(spark, qsnap, filter=flt)
        assert 0 < plan.num_files < total, flt
    assert plan_read(spark, qsnap, filter="x > 100000").num_files == 0


@pytest.mark.parametrize("fraction", [0.01, 0.1, 0.37, 1.0])
def test_sample_is_exactly_the_hash_filter(spark, table, fraction):
    from pyspark.sql import functions as F

    from use import QbeastTable
    from use.qbeast.weight import weight_from_fraction

    qt = QbeastTable.for_path(spark, table)
    full = qt.read()
    got = rows(qt.read(sample=fraction))
    if fraction == 1.0:
        assert got == rows(full)
    else:
        assert got == rows(full.filter(F.hash("x", "d", "s") < weight_from_fraction(fraction)))


def test_a_sample_after_an_append_that_lowered_a_cube_s_weight_without_writing_to_it(spark, tmp_path):
    """Found by a randomized trial: two appends of one indexed column with many equal values (cube
    size 10). The second lowers a cube's maxWeight and writes no row into it (its lightest rows
    there tie at the new weight, so they go down to a child), so no block records the lower
    weight; the reads stopped at the cube for sample(0.1) and returned 67 of its 73 rows. Every
    reader now returns exactly the rows below the sample's weight, as the same rows written at once."""
    import random

    from pyspark.sql import functions as F

    from use import QbeastTable
    from use.qbeast.weight import weight_from_fraction

    def batch(start: int, n: int, seed: int) -> Any:
        r = random.Random(seed)
        return spark.createDataFrame([(start + i, r.randint(950, 1050)) for i in range(n)], "id long, y int")

    path, once = str(tmp_path / "appended"), str(tmp_path / "once")
    first, second = batch(0, 200, 1), batch(200, 500, 4)
    for df in (first, second):
        QbeastTable.write(df, path, columns_to_index=["y"], cube_size=10, mode="append")
    QbeastTable.write(first.union(second), once, columns_to_index=["y"], cube_size=10)
    qt = QbeastTable.for_path(spark, path)
    for fraction in (0.05, 0.1, 0.37):
        expected = rows(qt.read().filter(F.hash("y") < weight_from_fraction(fraction)))
        assert rows(qt.read(sample=fraction)) == expected == rows(QbeastTable.for_path(spark, once).read(sample=fraction))
        assert rows(spark.read.format("qbeast").load(path).sample(fraction)) == expected
    assert len(rows(qt.read(sample=0.1))) == 73


def test_small_samples_read_fewer_files_and_bytes(spark, table):
    from use.qbeast.reader import load_snapshot, plan_read

    qsnap = load_snapshot(table)
    small = plan_read(spark, qsnap, sample=0.02)
    assert 0 < small.num_files < small.total_files
    assert small.bytes < small.total_bytes / 2
    # sample + filter prunes on both
    both = plan_read(spark, qsnap, sample=0.02, filter="x > 4400")
    assert both.num_files <= small.num_files


def test_sample_and_filter_together(spark, table):
    from pyspark.sql import functions as F

    from use import QbeastTable
    from use.qbeast.weight import weight_from_fraction

    qt = QbeastTable.for_path(spark, table)
    got = qt.read(sample=0.2, filter="x < 3000 and s is not null")
    expected = qt.read().filter("x < 3000 and s is not null").filter(F.hash("x", "d", "s") < weight_from_fraction(0.2))
    assert rows(got) == rows(expected)


def test_read_of_a_snapshot_and_empty_results(spark, table):
    from use.qbeast.reader import load_snapshot, read

    qsnap = load_snapshot(table)
    df = read(spark, qsnap, filter="x > 100000")
    assert df.count() == 0 and df.schema.fieldNames() == ["x", "d", "s", "v", "p"]


def test_bad_reads(spark, table, tmp_path):
    from use import QbeastTable
    from use.qbeast.reader import read

    qt = QbeastTable.for_path(spark, table)
    for bad in (-0.1, 1.5, "0.1", True, float("nan")):
        with pytest.raises(InvalidArgumentError, match="sample"):
            qt.read(sample=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="nope"):
        qt.read(filter="nope > 3")
    with pytest.raises(InvalidArgumentError):
        qt.read(filter=3)  # type: ignore[arg-type]
    with pytest.raises(TableNotFoundError):
        read(spark, str(tmp_path / "missing"))
    # a plain Delta table reads, but cannot be sampled (no indexed columns)
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa

    plain = str(tmp_path / "plain")
    deltalake.write_deltalake(plain, pa.table({"a": [1, 2, 3]}))
    assert read(spark, plain, filter="a > 1").count() == 2
    with pytest.raises(NotAQbeastTableError):
        read(spark, plain, sample=0.5)
