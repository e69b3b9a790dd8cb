"""The default of `optimize_write`: the pure rule (`use.qbeast.write_shuffle`), the data size it
is fed (`use.qbeast.index_plan.collect_stats`), and writes on a real local Spark taking each way."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_qbeast_write import _check_table, _commit, _qsnap, _state

from use.errors import ConfigError
from use.qbeast.write_shuffle import (
    DEFAULT_MAX_READ_SLOWDOWN,
    MAX_READ_SLOWDOWN_CONF,
    WriteShape,
    should_shuffle,
)
from use.qbeast.writer import write

MiB = 1 << 20


def test_rule_shuffles_when_the_parts_would_slow_reads_down() -> None:
    o = 4 * MiB  # Spark's default openCostInBytes
    # Reading a planned file of b bytes costs o + b whole and T * o + b in T parts.
    assert WriteShape(tasks=2, planned_files=10, data_bytes=10 * o, open_cost_bytes=o).read_slowdown() == 1.5
    assert WriteShape(tasks=1, planned_files=10, data_bytes=10 * o, open_cost_bytes=o).read_slowdown() == 1.0
    # Two tasks: only files smaller than one open cost are worth a shuffle (bound 1.5 excluded).
    assert not should_shuffle(WriteShape(2, 10, 10 * o, o))
    assert should_shuffle(WriteShape(2, 10, 10 * o - 10, o))
    assert not should_shuffle(WriteShape(2, 50, 10 << 30, o))  # 10 GiB in 50 files on a laptop
    # 200 tasks: the same 10 GiB in 50 files of ~205 MiB would read ~4.8x slower in 1 MiB parts.
    assert should_shuffle(WriteShape(200, 50, 10 << 30, o))
    # ... but not files of 2 GiB (200 parts of 10 MiB: ~1.4x).
    assert not should_shuffle(WriteShape(200, 5, 10 << 30, o))
    # A small write on a few tasks shuffles; one task has nothing to split; an empty plan nothing.
    assert should_shuffle(WriteShape(4, 1, 100_000, o))
    assert not should_shuffle(WriteShape(1, 500, 1, o))
    assert not should_shuffle(WriteShape(8, 0, 0, o))
    # The bound: 1 shuffles whatever has more than one task; a free open never needs a shuffle.
    assert should_shuffle(WriteShape(2, 1, 1 << 40, o), max_read_slowdown=1.0)
    assert not should_shuffle(WriteShape(200, 1000, 1000, open_cost_bytes=0))
    assert DEFAULT_MAX_READ_SLOWDOWN == 1.5


def test_data_bytes_counts_fixed_widths_and_actual_string_bytes(spark) -> None:
    from pyspark.sql import functions as F

    from use.qbeast.index_plan import DATA_BYTES_ALIAS, collect_stats
    from use.qbeast.revision import parse_column_specs
    from use.qbeast.writer import _arrow_schema

    df = spark.range(0, 100, numPartitions=3).select(
        F.col("id"),  # 8 bytes
        F.col("id").cast("int").alias("i"),  # 4
        F.col("id").cast("double").alias("x"),  # 8
        F.when(F.col("id") % 2 == 0, F.lit("ab")).otherwise(F.lit("\u00e9")).alias("s"),  # 2 bytes each (é in UTF-8)
        F.when(F.col("id") < 10, F.lit(None)).otherwise(F.lit(b"xyz")).alias("b"),  # 3, nulls 0
    )
    transformers = parse_column_specs(["x"], _arrow_schema(df))
    stats = collect_stats(df, transformers, data_bytes=True)
    assert stats[DATA_BYTES_ALIAS] == 100 * (8 + 4 + 8 + 2) + 90 * 3
    assert DATA_BYTES_ALIAS not in collect_stats(df, transformers)


def _data(spark, n: int, start: int = 0):
    from pyspark.sql import functions as F

    return spark.range(start, start + n, numPartitions=6).select(
        F.col("id"), (F.rand(3) * 100).alias("x"), (F.rand(4) * 100).alias("y")
    )


def _cubes_split(path: str, version: int) -> bool:
    """Whether some cube of the commit's new files lies in more than one of them (an unshuffled
    write's parts)."""
    adds = [a["add"] for a in _commit(path, version) if "add" in a]
    cubes = [b["cubeId"] for a in adds for b in json.loads(a["tags"]["blocks"])]
    return len(cubes) > len(set(cubes))


@pytest.fixture
def conf(spark):
    """Set Spark confs for one test; unset afterwards."""
    keys: list[str] = []

    def set_(key: str, value: str) -> None:
        keys.append(key)
        spark.conf.set(key, value)

    yield set_
    for key in keys:
        spark.conf.unset(key)


def test_default_write_shuffles_small_files_and_not_large_ones(spark, tmp_path, conf) -> None:
    """4 write tasks (6 input partitions, 4 cores) and a few hundred KB of rows: the planned files
    are far smaller than a file's open cost, so by default the write shuffles (one file per planned
    group). With opening a file priced at 1 byte, parts cost readers nothing: no shuffle."""
    path = str(tmp_path / "t")
    write(spark, _data(spark, 12_000), path, ["x", "y"], cube_size=1_000)
    assert not _cubes_split(path, 0) and len(_qsnap(path).files) > 4
    conf("spark.sql.files.openCostInBytes", "1")
    write(spark, _data(spark, 6_000, start=12_000), path, ["x", "y"])
    assert _cubes_split(path, 1)
    _check_table(spark, path, np.arange(18_000), ["x", "y"])


def test_explicit_settings_win_over_the_rule(spark, tmp_path, conf) -> None:
    """The Spark conf decides against the rule both ways: `false` keeps parts the rule would
    shuffle away, `true` shuffles where the rule would not."""
    path = str(tmp_path / "t")
    conf("spark.qbeast.index.optimizeWrite", "false")
    write(spark, _data(spark, 12_000), path, ["x", "y"], cube_size=1_000)
    assert _cubes_split(path, 0)
    conf("spark.sql.files.openCostInBytes", "1")
    conf("spark.qbeast.index.optimizeWrite", "true")
    write(spark, _data(spark, 6_000, start=12_000), path, ["x", "y"])
    assert not _cubes_split(path, 1)
    _check_table(spark, path, np.arange(18_000), ["x", "y"])


@pytest.mark.parametrize("bad", ["0.5", "lots", "nan"])
def test_bad_max_read_slowdown_is_a_config_error_that_writes_nothing(spark, tmp_path, conf, bad) -> None:
    path = str(tmp_path / "t")
    write(spark, _data(spark, 500), path, ["x", "y"], cube_size=1_000)
    before = _state(path)
    conf(MAX_READ_SLOWDOWN_CONF, bad)
    with pytest.raises(ConfigError, match=r"spark\.qbeast\.index\.maxReadSlowdown must be a number >= 1"):
        write(spark, _data(spark, 500, start=500), path, ["x", "y"])
    assert _state(path) == before
    # An explicit setting needs no rule: the bad bound is not even read.
    write(spark, _data(spark, 500, start=500), path, ["x", "y"], optimize_write=True)


def _index_of(path: str) -> dict[tuple[str, int], int]:
    """(cube, maxWeight) -> rows over every block of the table: the index, whatever the files (an
    append may lower a cube's maxWeight, so its older blocks keep the older one)."""
    blocks = _qsnap(path).blocks
    out: dict[tuple[str, int], int] = {}
    for cube, w, n in zip(
        blocks.column("cube_id").to_pylist(),
        blocks.column("max_weight").to_pylist(),
        blocks.column("element_count").to_pylist(),
        strict=False,
    ):
        out[(cube, w)] = out.get((cube, w), 0) + n
    return out


def test_shuffled_jvm_write_gives_the_index_of_the_other_ways(spark, tmp_path, conf) -> None:
    """The same rows written four ways (JVM path shuffled, unshuffled and by default; Python path
    shuffled) give the same index: the same cubes, maxWeights and rows per cube, two appends deep.
    Shuffled, each planned file is written whole: every cube lies in one file, and the JVM path
    writes exactly the files the Python path writes."""
    from use.qbeast.jvm_write import JVM_WRITE_CONF

    first, second = _data(spark, 9_000).cache(), _data(spark, 5_000, start=9_000).cache()
    ways = {
        "jvm-shuffled": (True, "true"),
        "jvm-unshuffled": (False, "true"),
        "default": (None, "true"),
        "python-shuffled": (True, "false"),
    }
    for name, (shuffle, jvm) in ways.items():
        conf(JVM_WRITE_CONF, jvm)
        path = str(tmp_path / name)
        write(spark, first, path, ["x", "y"], cube_size=800, optimize_write=shuffle)
        write(spark, second, path, ["x", "y"], optimize_write=shuffle)
    indexes = {name: _index_of(str(tmp_path / name)) for name in ways}
    assert len(indexes["jvm-shuffled"]) > 8
    assert all(index == indexes["jvm-shuffled"] for index in indexes.values())
    for name in ("jvm-shuffled", "python-shuffled", "default"):  # 4 tasks, small files: the rule shuffles
        path = str(tmp_path / name)
        assert not _cubes_split(path, 0) and not _cubes_split(path, 1)
    assert _cubes_split(str(tmp_path / "jvm-unshuffled"), 0)
    assert len(_qsnap(str(tmp_path / "jvm-shuffled")).files) == len(_qsnap(str(tmp_path / "python-shuffled")).files)
    _check_table(spark, str(tmp_path / "jvm-shuffled"), np.arange(14_000), ["x", "y"])
    first.unpersist()
    second.unpersist()
