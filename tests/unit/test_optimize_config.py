"""OptimizationConfig / ServiceConfig: every key, its default, and a clear error for every bad value."""

from __future__ import annotations

import pytest

from use.errors import ConfigError, UnknownStrategyError
from use.optimize import config as config_module
from use.optimize.config import CONFIG_KEYS, CONFIG_KEYS_MARKDOWN, OptimizationConfig, ServiceConfig
from use.optimize.config_values import parse_duration

P = "use.optimization."
U = P + "autoOptimize.optimizeUnindexedFiles."


def parse(**props: str) -> OptimizationConfig:
    return OptimizationConfig.from_properties({P + k.replace("__", "."): v for k, v in props.items()})


def test_defaults_follow_the_seeds() -> None:
    c = OptimizationConfig.from_properties({})
    assert c == OptimizationConfig()
    assert c.type is None and c.strategies is None
    assert c.bytes_per_iter == 1_000_000_000
    assert c.revision_rewrite is False
    assert c.target_revision_id is None  # latest
    assert c.auto_optimize_enabled is None  # "Not set"
    assert c.optimize_unindexed_enabled is True and c.optimize_unindexed_prioritize is True
    assert c.unindexed_batch_bytes == 10_000_000_000
    assert c.unindexed_from_timestamp == 0
    assert c.task_limit == c.bytes_per_iter
    assert c.max_file_size == 1024**3 and c.min_file_size_limit == 1024**3


def test_seed_examples_parse() -> None:
    c = OptimizationConfig.from_properties(
        {P + "type": "CubeDefragmentation", P + "bytes-per-iter": "5000000", "delta.appendOnly": "false", "qbeast.x": "1"}
    )
    assert (c.type, c.bytes_per_iter) == ("CubeDefragmentation", 5_000_000)
    assert OptimizationConfig.from_properties({P + "type": "LeveledCompaction"}).type == "LeveledCompactionSelection"
    c = OptimizationConfig.from_properties(
        {
            P + "autoOptimize.enabled": "true",
            U + "enabled": "true",
            U + "prioritize": "true",
            U + "batchBytes": "5000000000",
            U + "fromTimestamp": "2023-01-01 00:00:00",
        }
    )
    assert c.auto_optimize_enabled is True
    assert c.unindexed_batch_bytes == 5_000_000_000
    assert c.unindexed_from_timestamp == 1_672_531_200_000


def test_continuous_optimization_follows_the_seeds_rule() -> None:
    # a table is continuously optimized when use.optimization.type is set or autoOptimize.enabled=true
    assert OptimizationConfig.from_properties({P + "type": "CubeDefragmentation"}).continuous
    assert OptimizationConfig.from_properties({P + "autoOptimize.enabled": "true"}).continuous
    assert not OptimizationConfig.from_properties({P + "autoOptimize.enabled": "false"}).continuous
    assert not OptimizationConfig.from_properties({P + "bytes-per-iter": "5000000"}).continuous


def test_every_key_parses_and_round_trips() -> None:
    props = {
        P + "type": "SamplingOverheadReduction",
        P + "strategies": "UnindexedFilesSelection, SamplingOverhead,BinPacking",
        P + "bytes-per-iter": "123",
        P + "revision-rewrite": "TRUE",
        P + "revision-id": "2",
        P + "task-max-bytes": "77",
        P + "sampling-fraction": "0.15",
        P + "max-file-size": "1000",
        P + "min-file-size": "900",
        P + "small-files.max-size": "10",
        P + "small-files.count-threshold": "3",
        P + "overlap.cluster-key": "id",
        P + "overlap.depth-threshold": "4",
        P + "open-file-cost": "0",
        P + "zorder-by": "a, `b.c`",
        P + "zorder.min-cube-size": "5000",
        P + "autoOptimize.enabled": "false",
        P + "autoOptimize.revisionId": "1",
        U + "enabled": "false",
        U + "prioritize": "False",
        U + "batchBytes": "99",
        U + "fromTimestamp": "1700000000000",
        P + "tiering.ratio": "8",
        P + "tiering.stagger": "1",
        P + "tiering.max-fragments": "5",
        P + "tiering.root-max-fragments": "1",
        P + "tiering.max-wait": "2h",
        P + "tiering.idle-after": "5 minutes",
    }
    c = OptimizationConfig.from_properties(props)
    assert c.strategies == ("UnindexedFilesSelection", "SamplingOverheadReduction", "BinPacking")
    assert (c.bytes_per_iter, c.revision_rewrite, c.revision_id, c.task_limit) == (123, True, 2, 77)
    assert c.target_revision_id == 2  # revision-id wins over autoOptimize.revisionId
    assert (c.sampling_fraction, c.max_file_size, c.min_file_size_limit) == (0.15, 1000, 900)
    assert (c.small_files_max_size, c.small_files_count_threshold) == (10, 3)
    assert (c.overlap_cluster_key, c.overlap_depth_threshold, c.open_file_cost) == ("id", 4, 0)
    assert (c.zorder_by, c.min_cube_size_limit) == (("a", "b.c"), 5000)
    assert (c.auto_optimize_enabled, c.auto_optimize_revision_id) == (False, 1)
    assert (c.optimize_unindexed_enabled, c.optimize_unindexed_prioritize) == (False, False)
    assert (c.unindexed_batch_bytes, c.unindexed_from_timestamp) == (99, 1_700_000_000_000)
    assert (c.tiering_ratio, c.tiering_max_fragments, c.tiering_root_max_fragments, c.tiering_max_wait) == (8.0, 5, 1, 7200.0)
    assert c.tiering_stagger == 1.0
    assert c.tiering_idle_after == 300.0
    assert OptimizationConfig.from_properties(c.to_properties()) == c
    assert len(c.to_properties()) == len(CONFIG_KEYS)
    # the time factor is on by default (1h) and `off` switches it off, round trip included
    assert OptimizationConfig().tiering_max_wait == 3600.0
    off = OptimizationConfig.from_properties({P + "tiering.max-wait": " OFF "})
    assert off.tiering_max_wait is None and off.to_properties() == {P + "tiering.max-wait": "off"}
    assert OptimizationConfig.from_properties(off.to_properties()) == off


def test_from_timestamp_forms() -> None:
    assert (
        parse(**{"autoOptimize__optimizeUnindexedFiles__fromTimestamp": "2023-01-01"}).unindexed_from_timestamp
        == 1_672_531_200_000
    )
    assert parse(**{"autoOptimize__optimizeUnindexedFiles__fromTimestamp": "0"}).unindexed_from_timestamp == 0


def test_precedence_overrides_table_spark_conf() -> None:
    spark_conf = {"spark.qbeast.use.optimization.bytes-per-iter": "10", "spark.qbeast.use.optimization.max-file-size": "20"}
    props = {P + "bytes-per-iter": "11"}
    c = OptimizationConfig.from_properties(props, spark_conf=spark_conf)
    assert (c.bytes_per_iter, c.max_file_size) == (11, 20)
    c = OptimizationConfig.from_properties(
        props,
        {"bytes_per_iter": 12, "revision-id": 3, P + "revision-rewrite": True, "task_max_bytes": None},
        spark_conf=spark_conf,
    )
    assert (c.bytes_per_iter, c.revision_id, c.revision_rewrite, c.task_max_bytes) == (12, 3, True, None)


BAD_VALUES = [
    ("bytes-per-iter", "1.5", "positive integer number of bytes"),
    ("bytes-per-iter", "5GB", "positive integer number of bytes"),
    ("bytes-per-iter", "-1", "positive integer number of bytes"),
    ("bytes-per-iter", "0", "positive integer number of bytes"),
    ("task-max-bytes", "abc", "positive integer number of bytes"),
    ("max-file-size", "-5", "positive integer number of bytes"),
    ("min-file-size", "", "positive integer number of bytes"),
    ("small-files.max-size", "1e6", "positive integer number of bytes"),
    ("open-file-cost", "-1", "non-negative integer number of bytes"),
    ("revision-rewrite", "yes", "true or false"),
    ("revision-rewrite", "1", "true or false"),
    ("revision-id", "-1", "integer >= 0"),
    ("revision-id", "latest", "integer >= 0"),
    ("sampling-fraction", "0", "strictly between 0 and 1"),
    ("sampling-fraction", "1", "strictly between 0 and 1"),
    ("sampling-fraction", "half", "strictly between 0 and 1"),
    ("small-files.count-threshold", "1", "integer >= 2"),
    ("overlap.depth-threshold", "0", "integer >= 1"),
    ("overlap.cluster-key", " ", "one column name"),
    ("overlap.cluster-key", "a,b", "one column name"),
    ("strategies", "BinPacking,,SmallFiles", "comma-separated list"),
    ("strategies", "BinPacking,binpack", "distinct"),
    ("autoOptimize.enabled", "on", "true or false"),
    ("autoOptimize.revisionId", "x", "integer >= 0"),
    ("autoOptimize.optimizeUnindexedFiles.enabled", "nope", "true or false"),
    ("autoOptimize.optimizeUnindexedFiles.prioritize", "2", "true or false"),
    ("autoOptimize.optimizeUnindexedFiles.batchBytes", "10GB", "positive integer number of bytes"),
    ("autoOptimize.optimizeUnindexedFiles.fromTimestamp", "2023/01/01", "YYYY-MM-DD HH:MM:SS"),
    ("autoOptimize.optimizeUnindexedFiles.fromTimestamp", "-5", "epoch milliseconds"),
    ("autoOptimize.optimizeUnindexedFiles.fromTimestamp", "2023-13-01 00:00:00", "YYYY-MM-DD HH:MM:SS"),
    ("tiering.ratio", "1.2", "a number >= 1.5"),
    ("tiering.ratio", "true", "a number >= 1.5"),
    ("tiering.ratio", "four", "a number >= 1.5"),
    ("tiering.stagger", "0.5", "a number >= 1"),
    ("tiering.stagger", "twice", "a number >= 1"),
    ("tiering.max-fragments", "0", "integer >= 1"),
    ("tiering.root-max-fragments", "x", "integer >= 1"),
    ("tiering.max-wait", "10", "positive duration"),
    ("tiering.max-wait", "never", "'off' or a positive duration"),
    ("tiering.idle-after", "0s", "'off' or a positive duration"),
    ("tiering.idle-after", "soon", "'off' or a positive duration"),
]


@pytest.mark.parametrize("key,value,form", BAD_VALUES)
def test_bad_value_names_key_value_and_form(key: str, value: str, form: str) -> None:
    with pytest.raises(ConfigError) as info:
        OptimizationConfig.from_properties({P + key: value})
    msg = str(info.value)
    assert P + key in msg and repr(value) in msg and form in msg


def test_unknown_strategy_lists_known_names() -> None:
    for key in ("type", "strategies"):
        with pytest.raises(UnknownStrategyError) as info:
            OptimizationConfig.from_properties({P + key: "Defrag"})
        msg = str(info.value)
        assert P + key in msg and "'Defrag'" in msg and "LeveledCompactionSelection" in msg and "BinPacking" in msg


def test_unknown_keys() -> None:
    with pytest.raises(ConfigError, match=r"unknown optimization key 'use.optimization.bytes-per-iteration'.*bytes-per-iter"):
        OptimizationConfig.from_properties({P + "bytes-per-iteration": "5"})
    with pytest.raises(ConfigError, match="spark.qbeast.use.optimization.bogus"):
        OptimizationConfig.from_properties({}, spark_conf={"spark.qbeast.use.optimization.bogus": "1"})
    with pytest.raises(ConfigError, match="'bytesPerIter'"):
        OptimizationConfig.from_properties({}, {"bytesPerIter": 5})
    with pytest.raises(ConfigError, match="bytes_per_iter"):
        OptimizationConfig.from_properties({}, {"bytes_per_iter": "many"})


def test_strategies_that_need_a_knob() -> None:
    with pytest.raises(ConfigError, match=r"use.optimization.type selects SamplingOverheadReduction.*sampling-fraction"):
        OptimizationConfig.from_properties({P + "type": "SamplingOverheadReduction"})
    with pytest.raises(ConfigError, match=r"use.optimization.strategies selects ClusterKeyOverlap.*overlap.cluster-key"):
        OptimizationConfig.from_properties({P + "strategies": "BinPacking,ClusterKeyOverlap"})


def test_keys_are_documented() -> None:
    for spec in CONFIG_KEYS:
        assert f"`{spec.full_key}`" in CONFIG_KEYS_MARKDOWN
        assert f"`{spec.full_key}`" in config_module.__doc__, spec.full_key
    assert "spark.qbeast.use.optimization-interval" in CONFIG_KEYS_MARKDOWN


def test_service_config_interval() -> None:
    assert ServiceConfig.from_spark_conf({}).optimization_interval_s == 600.0
    conf = {"spark.qbeast.use.optimization-interval": "10 minutes", "spark.app.name": "x"}
    assert ServiceConfig.from_spark_conf(conf).optimization_interval_s == 600.0
    assert parse_duration("30s") == 30.0 and parse_duration("1h") == 3600.0 and parse_duration("500ms") == 0.5
    assert parse_duration("2 days") == 172800.0
    for bad in ("10", "ten minutes", "0s", "5 fortnights"):
        with pytest.raises(ConfigError) as info:
            ServiceConfig.from_spark_conf({"spark.qbeast.use.optimization-interval": bad})
        assert "spark.qbeast.use.optimization-interval" in str(info.value) and repr(bad) in str(info.value)
    with pytest.raises(ConfigError, match="bytes-per-iter"):
        ServiceConfig.from_spark_conf({"spark.qbeast.use.optimization.bytes-per-iter": "x"})


def test_unknown_service_keys_are_refused_with_the_closest_known_key() -> None:
    with pytest.raises(ConfigError) as info:
        ServiceConfig.from_spark_conf({"spark.qbeast.use.optimisation-interval": "5s"})
    msg = str(info.value)
    assert msg.startswith(
        "unknown key 'spark.qbeast.use.optimisation-interval'; did you mean 'spark.qbeast.use.optimization-interval'?"
    )
    assert "spark.qbeast.use.gc-interval" in msg and "spark.qbeast.use.optimization.<key>" in msg
    with pytest.raises(ConfigError, match=r"unknown key 'spark.qbeast.use.frobnicate'; the spark.qbeast.use.\* keys are"):
        ServiceConfig.from_spark_conf({"spark.qbeast.use.frobnicate": "1"})  # nothing close: no suggestion
    with pytest.raises(ConfigError, match=r"did you mean 'use.optimization.bytes-per-iter'\?"):
        OptimizationConfig.from_properties({P + "bytes-per-itr": "5"})
    # the namespace every key shares is not a likeness: 'bogus' is not a misspelt 'type'
    with pytest.raises(ConfigError) as info:
        OptimizationConfig.from_properties({P + "bogus": "1"})
    assert "did you mean" not in str(info.value)
    assert (
        ServiceConfig.from_spark_conf({"spark.qbeast.other": "x", "spark.qbeast.use.gc-interval": "1h"}).gc_interval_s == 3600.0
    )


def test_service_config_concurrency_and_gc_keys() -> None:
    from use.optimize.config import gc_enabled

    default = ServiceConfig.from_spark_conf({})
    assert (default.max_concurrent_optimizations, default.gc_interval_s) == (1, 3600.0)
    conf = {"spark.qbeast.use.max-concurrent-optimizations": "3", "spark.qbeast.use.gc-interval": "30s"}
    parsed = ServiceConfig.from_spark_conf(conf)
    assert (parsed.max_concurrent_optimizations, parsed.gc_interval_s) == (3, 30.0)
    for key, bad in [
        ("spark.qbeast.use.max-concurrent-optimizations", "0"),
        ("spark.qbeast.use.max-concurrent-optimizations", "two"),
        ("spark.qbeast.use.max-concurrent-optimizations", "1.5"),
        ("spark.qbeast.use.gc-interval", "hourly"),
    ]:
        with pytest.raises(ConfigError) as info:
            ServiceConfig.from_spark_conf({key: bad})
        assert key in str(info.value) and repr(bad) in str(info.value)
    assert gc_enabled({}) is False and gc_enabled({"use.gc.enabled": "TRUE"}) is True
    assert gc_enabled({"use.gc.enabled": "false"}) is False
    with pytest.raises(ConfigError, match=r"use.gc.enabled.*true or false"):
        gc_enabled({"use.gc.enabled": "yes"})
    for key in ("use.gc.enabled", "spark.qbeast.use.max-concurrent-optimizations", "spark.qbeast.use.gc-interval"):
        assert f"`{key}`" in CONFIG_KEYS_MARKDOWN and f"`{key}`" in config_module.__doc__


@pytest.mark.parametrize(
    "props,continuous",
    [
        ({}, False),
        ({P + "type": "CubeDefragmentation"}, True),
        ({P + "autoOptimize.enabled": "true"}, True),
        ({P + "autoOptimize.enabled": "false"}, False),
        ({P + "bytes-per-iter": "5"}, False),
    ],
)
def test_continuous_optimization_is_asked_for_by_type_or_auto_optimize(props, continuous) -> None:
    assert OptimizationConfig.from_properties(props).continuous is continuous
