"""Planning an OTree write on Spark (qbeast-format spec §3.1-3.5): the passes over the input that
decide, before any data file is written, where every row will go.

1. one aggregation for the revision statistics (min/max per linear column, count);
2. the row weight is Spark's own `hash()` of the indexed columns, so reads can recompute it;
3. `mapInArrow` estimates cube domains per partition (`use.qbeast.domains`) on a seeded sample of
   a large input; the driver merges them with the existing index, estimates cube weights
   (`use.qbeast.estimate`) and rolls the cubes up into files (`use.qbeast.rollup`).

The result, an `IndexPlan`, is all `use.qbeast.write_tasks` needs to write the files. Only small
metadata (statistics, domains per cube, row counts per cube) is ever collected to the driver.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql import types as T

from use.errors import ConfigError
from use.qbeast.domains import (
    DEFAULT_BUFFER_CAPACITY,
    CubeDomains,
    CubeLookup,
    ExistingInnerCubes,
    JointLookup,
    estimate_domains,
    estimation_fraction,
    group_cube_size,
)
from use.qbeast.estimate import assign_cubes, estimate
from use.qbeast.index_status import IndexStatus, counts_in_place
from use.qbeast.jvm_write import count_in_jvm
from use.qbeast.revision import Revision, stats_aggregations
from use.qbeast.rollup import RollupPlan, rollup
from use.qbeast.weight import MAX_WEIGHT
from use.runtime.conf import int_conf, session_conf
from use.runtime.jvm import driver_jvm

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from use.qbeast.index_status import InputBlocks
    from use.qbeast.snapshot import QbeastSnapshot

__all__ = [
    "DATA_BYTES_ALIAS",
    "WEIGHT_COLUMN",
    "NARROW_BATCH_ROWS",
    "IndexPlan",
    "arrow_batches",
    "collect_stats",
    "one_task_per_core",
    "plan_index",
    "plan_rewrite",
    "positive_int_conf",
    "with_weight",
]

WEIGHT_COLUMN = "_qbeastWeight"
DATA_BYTES_ALIAS = "_dataBytes"
_BUFFER_CAPACITY_CONF = "spark.qbeast.index.cubeDomainsBufferCapacity"
NARROW_BATCH_ROWS = 100_000
"""Rows per Arrow batch of a `mapInArrow` pass over a few narrow columns (see `arrow_batches`)."""
# Domain estimation over at most this many (sampled) rows runs on the driver (`_domains_on_driver`).
_DRIVER_DOMAIN_ROWS = 1_000_000
# The domain-estimation sample is seeded, so writing the same rows twice plans the same tree.
_ESTIMATION_SEED = 20_240_611


@dataclass(frozen=True)
class IndexPlan:
    """Where the rows of one write go: each cube's maxWeight (`cube_weights`, what a row's weight
    is compared with on its way down), the rollup of cubes into files, and the rows expected per
    cube (`sizes`, which spread the files over the write tasks)."""

    cube_weights: Mapping[str, int]
    rollup: RollupPlan
    sizes: Mapping[str, int]


def with_weight(df: DataFrame, revision: Revision) -> DataFrame:
    """Add the row weight: Spark's own `hash()` of the indexed columns, in revision order."""
    return df.withColumn(WEIGHT_COLUMN, F.hash(*[df[c] for c in revision.columns]))


def _buffer_capacity(spark: SparkSession) -> int:
    return positive_int_conf(spark, _BUFFER_CAPACITY_CONF, DEFAULT_BUFFER_CAPACITY, "rows")


def positive_int_conf(spark: SparkSession, key: str, default: int, unit: str) -> int:
    raw = spark.conf.get(key, str(default))
    try:
        value = int(str(raw))
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{key} must be a positive integer ({unit}), got {raw!r}")
    return value


def _domains_task(revision: Revision, gcs: int, existing_weights: Mapping[str, int], buffer_capacity: int) -> Any:
    """The per-partition domain estimation, as a `mapInArrow` function (runs on executors)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        existing = ExistingInnerCubes(existing_weights)
        results: list[CubeDomains] = []
        pending_points: list[np.ndarray] = []
        pending_weights: list[np.ndarray] = []
        pending = 0

        def flush(final: bool) -> None:
            nonlocal pending_points, pending_weights, pending
            if not pending:
                return
            points = np.concatenate(pending_points)
            weights = np.concatenate(pending_weights)
            full = (pending // buffer_capacity) * buffer_capacity if not final else pending
            results.append(
                estimate_domains(
                    points[:full], weights[:full], group_cube_size=gcs, existing=existing, buffer_capacity=buffer_capacity
                )
            )
            pending_points, pending_weights = [points[full:]], [weights[full:]]
            pending = pending - full

        for batch in batches:
            if not batch.num_rows:
                continue
            pending_points.append(revision.transform(batch))
            pending_weights.append(batch.column(WEIGHT_COLUMN).to_numpy(zero_copy_only=False).astype(np.int32))
            pending += batch.num_rows
            if pending >= buffer_capacity:
                flush(final=False)
        flush(final=True)
        merged = CubeDomains.concat(results).aggregate()
        if len(merged):
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([c.decode("ascii") for c in merged.cubes.tolist()], pa.string()),
                    pa.array(merged.domains, pa.float64()),
                ],
                names=["cube", "domain"],
            )

    return run


@contextlib.contextmanager
def arrow_batches(spark: SparkSession, max_rows: int, max_bytes: int | None = None) -> Iterator[None]:
    """Larger Arrow batches for the writer's `mapInArrow` passes, capped in bytes for wide rows.

    At Spark's default of 10,000 rows per batch the per-batch cost of the JVM -> Python transfer
    dominates (measured on 5M rows: a no-op `mapInArrow` over 4 columns took ~4.6 CPU-s at 10,000
    rows per batch, ~3.3 at 100,000; over 8 columns of ~200 bytes a row, 9.1 CPU-s vs 6.1). The row
    limit is only ever raised and the byte limit only ever lowered, and both are restored after
    the action, since they are session settings.
    """
    changes: dict[str, str] = {}
    rows_key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    current_rows = int_conf(spark, rows_key, 10_000)
    if 0 < current_rows < max_rows:
        changes[rows_key] = str(max_rows)
    if max_bytes is not None:
        bytes_key = "spark.sql.execution.arrow.maxBytesPerBatch"
        if int_conf(spark, bytes_key, 2**31 - 1) > max_bytes:
            changes[bytes_key] = str(max_bytes)
    with session_conf(spark, changes):
        yield


def one_task_per_core(df: DataFrame) -> tuple[DataFrame, int]:
    """`df` coalesced (no shuffle) to at most one partition per core for a `mapInArrow` pass, and
    its number of partitions.

    Each Python task has a fixed cost (worker, Arrow stream; measured ~0.1 s), which for a narrow
    or sampled pass is most of the work: over 8 cached partitions of 5M rows on 2 cores, a sampled
    pass took 0.83 s in 8 tasks and 0.40 s in 2.
    """
    num_partitions = df.rdd.getNumPartitions()
    num_tasks = max(1, min(num_partitions, df.sparkSession.sparkContext.defaultParallelism))
    return (df.coalesce(num_tasks) if num_tasks < num_partitions else df), num_tasks


def _input_domains(
    spark: SparkSession, weighted: DataFrame, revision: Revision, existing_weights: Mapping[str, int], num_rows: int
) -> dict[str, float]:
    """Cube domains of the input, estimated on a sample of it when it is large (`use.qbeast.domains.
    estimation_fraction`): the estimate needs about a thousand rows per cube, not every row, and the
    sample keeps this pass a small share of the write. Domains are scaled back to the whole input."""
    buffer_capacity = _buffer_capacity(spark)
    fraction = estimation_fraction(revision.desired_cube_size, num_rows)
    source, num_partitions = one_task_per_core(weighted)
    if fraction < 1.0:
        source = source.sample(fraction=fraction, seed=_ESTIMATION_SEED)
    gcs = group_cube_size(
        max(1, int(round(revision.desired_cube_size * fraction))),
        num_partitions,
        max(1, int(round(num_rows * fraction))),
        buffer_capacity,
    )
    selected = source.select(*[source[c] for c in revision.columns], source[WEIGHT_COLUMN])
    task = _domains_task(revision, gcs, dict(existing_weights), buffer_capacity)
    if num_rows * fraction <= _DRIVER_DOMAIN_ROWS:
        table = _domains_on_driver(selected, task)
    else:
        with arrow_batches(spark, NARROW_BATCH_ROWS):
            table = selected.mapInArrow(task, "cube string, domain double").toArrow()
    domains = (
        CubeDomains(
            np.array([c.encode("ascii") for c in table.column("cube").to_pylist()], dtype="S"),
            table.column("domain").to_numpy() / fraction,
        )
        if table.num_rows
        else CubeDomains.empty()
    )
    return domains.to_dict()


def _domains_on_driver(selected: DataFrame, task: Any) -> pa.Table:
    """The domain estimation's `mapInArrow` function run on the driver over the collected rows,
    each input partition's rows on their own and in their order, so the result is the one the
    executors would give, bit for bit (`task` cuts its buffers at multiples of its capacity,
    whatever the batches).

    For a sample of up to `_DRIVER_DOMAIN_ROWS` rows this is the cheaper way: a Python UDF job has
    a fixed cost of its own (measured on the 2-core test machine: a `mapInArrow` over 10 rows took
    0.55-0.6 s, a `toArrow` of them 0.05 s; over a 100,000-row sample 0.9-1.1 s against 0.25 s to
    collect it and 0.08 s to estimate it here)."""
    part = "_qbeastPartition"
    rows = selected.withColumn(part, F.spark_partition_id()).toArrow()
    if not rows.num_rows:
        return pa.table({"cube": pa.array([], pa.string()), "domain": pa.array([], pa.float64())})
    ids = rows.column(part).to_numpy()
    data = rows.drop_columns([part]).combine_chunks()
    cuts = [0, *(np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist(), len(ids)]
    out: list[pa.RecordBatch] = []
    for a, b in zip(cuts[:-1], cuts[1:], strict=False):
        out.extend(task(iter(data.slice(a, b - a).to_batches())))
    schema = pa.schema([("cube", pa.string()), ("domain", pa.float64())])
    return pa.Table.from_batches(out, schema=schema)


def existing_index(qsnap: QbeastSnapshot, revision_id: int) -> tuple[dict[str, int], dict[str, float]]:
    """Cube maxWeights and domains of one revision of the snapshot (empty when it has no files)."""
    status = IndexStatus.from_snapshot(qsnap, revision_id)
    return dict(status.cube_weights()), dict(status.cube_domains())


def collect_stats(df: DataFrame, transformers: Sequence[Any], *, data_bytes: bool = False) -> dict[str, Any]:
    """The one aggregation over the input for the revision statistics (and the row count); with
    `data_bytes`, also the rows' estimated bytes under `DATA_BYTES_ALIAS` (see `_data_bytes`)."""
    exprs = []
    for alias, func, column in stats_aggregations(transformers):
        col = F.lit(1) if column == "*" else df[column]
        exprs.append(getattr(F, func)(col).alias(alias))
    if data_bytes:
        exprs.append(_data_bytes(df).alias(DATA_BYTES_ALIAS))
    row = df.agg(*exprs).collect()[0]
    return row.asDict()


def _data_bytes(df: DataFrame) -> Column:
    """The rows' bytes as Spark holds them in memory (an aggregate): per row, each column's
    fixed width (Spark's `defaultSize`: exact for numbers, dates and timestamps, an estimate for
    nested types) plus the actual bytes of its strings and binaries. It sizes the parts an
    unshuffled write would leave (`use.qbeast.write_shuffle`) for the price of one more sum in
    the stats pass every write makes anyway."""
    jvm_types = driver_jvm(df.sparkSession).org.apache.spark.sql.types
    fixed = 0
    variable = []
    for field in df.schema.fields:
        if isinstance(field.dataType, (T.StringType, T.BinaryType)):
            variable.append(F.coalesce(F.octet_length(df[field.name]), F.lit(0)).cast("long"))
        else:
            fixed += int(jvm_types.DataType.fromJson(field.dataType.json()).defaultSize())
    per_row = F.lit(fixed).cast("long")
    for v in variable:
        per_row = per_row + v
    return F.sum(per_row)


def _cube_counts(weighted: DataFrame, revision: Revision, cube_weights: Mapping[str, int]) -> dict[str, int]:
    """Actual rows per cube when the rows are placed with the given cube maxWeights: counted in the
    JVM where the JVM write could place these rows (`use.qbeast.jvm_write.count_in_jvm`; measured
    on a 100-file, 100,000-row compaction: 0.6-0.8 s through Python), else by a
    `mapInArrow` pass."""
    counted = count_in_jvm(weighted.sparkSession, weighted, revision, cube_weights, WEIGHT_COLUMN)
    if counted is not None:
        return counted

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = JointLookup(CubeLookup(cube_weights), CubeLookup({"": 0}))
        parts = []
        for batch in batches:
            if not batch.num_rows:
                continue
            weights = batch.column(WEIGHT_COLUMN).to_numpy(zero_copy_only=False).astype(np.int32)
            parts.append(assign_cubes(revision.transform(batch), weights, table).cubes)
        if parts:
            counts = pa.chunked_array(parts, pa.string()).value_counts()
            yield pa.RecordBatch.from_arrays(
                [counts.field("values"), counts.field("counts").cast(pa.int64())], names=["cube", "n"]
            )

    source, _ = one_task_per_core(weighted)
    selected = source.select(*[source[c] for c in revision.columns], source[WEIGHT_COLUMN])
    with arrow_batches(weighted.sparkSession, NARROW_BATCH_ROWS):
        table = selected.mapInArrow(run, "cube string, n bigint").toArrow()
    out: dict[str, int] = {}
    for cube, n in zip(table.column("cube").to_pylist(), table.column("n").to_pylist(), strict=False):
        out[cube] = out.get(cube, 0) + int(n)
    return out


def plan_index(
    spark: SparkSession,
    weighted: DataFrame,
    revision: Revision,
    num_rows: int,
    existing: QbeastSnapshot | None,
) -> IndexPlan | None:
    """The full planning of §3.2-3.5 for `weighted` (the rows with `WEIGHT_COLUMN`) in `revision`:
    domains, cube weights and rollup. `existing` is the snapshot whose index of this revision the
    rows extend (its cube weights respected), `None` to start the index afresh. `None` when the
    input has no rows after all."""
    existing_weights: dict[str, int] | None = None
    existing_domains: dict[str, float] | None = None
    if existing is not None:
        existing_weights, existing_domains = existing_index(existing, revision.revision_id)
    d = revision.dimension_count
    input_domains = _input_domains(spark, weighted, revision, existing_weights or {}, num_rows)
    if not input_domains:
        return None
    est = estimate(
        input_domains,
        revision.desired_cube_size,
        d,
        existing_weights=existing_weights,
        existing_domains=existing_domains,
    )
    return IndexPlan(est.cube_weights, rollup(est.block_sizes, revision.desired_cube_size, d), est.block_sizes)


def plan_rewrite(
    weighted: DataFrame,
    revision: Revision,
    qsnap: QbeastSnapshot,
    *,
    sample_weight: int | None = None,
    input_blocks: InputBlocks | None = None,
) -> IndexPlan | None:
    """The optimizer's plan (§6.2): the revision's existing cube maxWeights (no new estimation, the
    tree keeps its shape) and a rollup over the actual rows per cube; with `sample_weight`, cubes no
    sample below that weight reads are kept out of the files it does read. `None` for no rows.

    The rows per cube come from `input_blocks` (the input files' blocks) when they prove where every
    row goes (`use.qbeast.index_status.counts_in_place`: then the rewrite reads its input once, to
    write it), else from a pass over the rows that places each one (`_cube_counts`)."""
    status = IndexStatus.from_snapshot(qsnap, revision.revision_id)
    cube_weights = status.cube_weights()
    counts = counts_in_place(input_blocks, revision, cube_weights) if input_blocks is not None else None
    if counts is None:
        counts = _cube_counts(weighted, revision, cube_weights)
    if not counts:
        return None
    plan = rollup(
        counts,
        revision.desired_cube_size,
        revision.dimension_count,
        cube_weights=cube_weights,
        sample_weight=sample_weight,
        whole=whole_inner_cubes(input_blocks, revision.revision_id, cube_weights, status.cube_element_counts()),
    )
    return IndexPlan(cube_weights, plan, counts)


def whole_inner_cubes(
    input_blocks: InputBlocks | None, revision_id: int, cube_weights: Mapping[str, int], table_counts: Mapping[str, int]
) -> frozenset[str]:
    """The inner cubes (a maxWeight below MaxValue: full, with children) whose every block in the
    table is in a rewrite's input files (`input_blocks`; without them, none): the rewrite holds them
    as a write of the whole table would, so they keep a file of their own even when the estimate
    left them a little short of desiredCubeSize (`rollup`'s `whole`). Rolled into the parent's file,
    such a cube was read by every query through the parent: a converged table's root file held a
    depth-1 cube of 1,886 rows (cube size 2,000), 1.8x the bytes a sample of the same rows written
    at once reads. A cube only partly in the rewrite (its recent rows: a fragment) still rolls up,
    into the buffer of its ancestor's file."""
    if input_blocks is None or input_blocks.blocks.num_rows == 0:
        return frozenset()
    blocks = input_blocks.blocks.filter(pc.equal(input_blocks.blocks.column("revision_id"), revision_id))
    summed = blocks.group_by("cube_id").aggregate([("element_count", "sum")])
    return frozenset(
        c
        for c, n in zip(summed.column("cube_id").to_pylist(), summed.column("element_count_sum").to_pylist(), strict=False)
        if c and int(cube_weights.get(c, MAX_WEIGHT)) < MAX_WEIGHT and int(n) >= int(table_counts.get(c, 0))
    )
