"""The OTree write's JVM path: rows assigned to cubes and written by Spark's own parquet writer in
the JVM shim (`use.shim.OTreeFileWriter`), without crossing into Python.

Moving whole rows from the JVM to Python as Arrow costs about as much as writing them (measured on
5M cached rows: a `mapInArrow` that does nothing took 3.0-3.4 s against 3.7 s for a plain parquet
write), so the Python path (`use.qbeast.write_tasks._local_write_task`) cannot come near a plain write.
Here the driver decides everything as before (revision, cube weights, rollup plan, file names) and
hands the JVM three things: Spark expressions that transform the indexed columns into [0, 1]
(`point_columns`), the plan's cubes as a small binary table (`cube_records`), and the file naming
of the write. The shim only walks rows down that table and writes; block statistics come back per
file, and the Delta stats are read from each file's footer here, as for every other data file.

The path is taken when every transformation has a Spark expression that gives exactly what numpy
gives (linear over integers, floats, dates and timestamps, and constant columns: the same IEEE
operations in the same order), the plan's cubes fit 64-bit keys, the codec is one Spark writes as
pyarrow does, and the session has the shim. Otherwise, or with `spark.qbeast.index.jvmWrite=false`,
the Python path writes.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import functions as F
from pyspark.sql import types as T

from use.delta.datafile import DICTIONARY_SAMPLE_ROWS, dictionary_columns, local_root
from use.delta.snapshot import first_switch
from use.delta.stats import leaf_columns
from use.qbeast.cube import CubeId, symbols_per_level
from use.qbeast.transform import IdentityTransformation, LinearTransformation
from use.runtime.jvm import driver_jvm
from use.runtime.shim import shim_loaded

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from use.qbeast.revision import Revision
    from use.qbeast.rollup import RollupPlan

__all__ = [
    "JVM_WRITE_CONF",
    "JvmFile",
    "count_in_jvm",
    "cube_records",
    "jvm_write_enabled",
    "point_columns",
    "write_in_jvm",
]

JVM_WRITE_CONF = "spark.qbeast.index.jvmWrite"
# Codecs Spark's parquet writer writes as the Python path's pyarrow does (Spark's "lz4" is the
# Hadoop LZ4 framing, pyarrow's LZ4_RAW; brotli needs a codec Spark does not ship).
_JVM_CODECS = frozenset({"none", "uncompressed", "snappy", "gzip", "zstd", "lz4_raw"})
# A cube key is `depth << 57 | bits`: `depth * dimensions` bits must fit in 57.
_KEY_BITS = 57
_RECORD = np.dtype([("depth", "<i4"), ("has_weight", "<i4"), ("weight", "<i4"), ("file", "<i4"), ("bits", "<i8")])


@dataclass(frozen=True)
class JvmFile:
    """One data file a JVM write task wrote: its name (relative to the table root), size, mtime,
    rows, the data columns that hold NaN (their Delta max is left out), and its blocks as a
    `(cube, w_min, n)` table like the Python path's partials."""

    name: str
    size: int
    modification_time: int
    num_rows: int
    nan_columns: frozenset[str]
    blocks: pa.Table


def jvm_write_enabled(spark: SparkSession) -> bool:
    """`spark.qbeast.index.jvmWrite` (default true): whether writes may take the JVM path."""
    return bool(first_switch([(JVM_WRITE_CONF, spark.conf.get(JVM_WRITE_CONF, "true"))]))


def _number(column: Column, data_type: Any) -> Column | None:
    """The column in the transformation's number space as a double, as `use.qbeast.transform.
    array_to_float64` computes it; `None` for types whose numpy conversion Spark cannot match
    bit for bit (decimals, timestamps without a time zone)."""
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType)):
        return column.cast("double")
    if isinstance(data_type, T.DateType):
        return F.unix_date(column).cast("double") * F.lit(86_400_000.0)
    if isinstance(data_type, T.TimestampType):
        micros = F.unix_micros(column)
        # Floor division (numpy's floor_divide), not Spark's truncating `div`, for times before 1970.
        return ((micros - F.pmod(micros, F.lit(1000))) / F.lit(1000)).cast("long").cast("double")
    return None


def point_columns(df: DataFrame, revision: Revision) -> list[Column] | None:
    """Spark expressions giving, per row, the revision's transformed coordinates exactly as
    `revision.transform` gives them in numpy; `None` when some transformation has none."""
    out: list[Column] = []
    for name, transformation in zip(revision.columns, revision.transformations, strict=False):
        if isinstance(transformation, IdentityTransformation):
            out.append(F.lit(0.0))
            continue
        if not isinstance(transformation, LinearTransformation):
            return None
        number = _number(df[name], df.schema[name].dataType)
        if number is None:
            return None
        scale = F.lit(float(transformation._scale))
        # (v - min) * scale, nulls as the transformation's null value, NaN -> 0, clamped to [0, 1].
        t = (F.coalesce(number, F.lit(float(transformation.null_value))) - F.lit(float(transformation.min_number))) * scale
        out.append(F.when(F.isnan(t), F.lit(0.0)).otherwise(F.least(F.greatest(t, F.lit(0.0)), F.lit(1.0))))
    return out


def cube_records(revision: Revision, cube_weights: Mapping[str, int], plan: RollupPlan | None) -> tuple[bytes, int] | None:
    """The plan's cubes as the shim's binary table, and the deepest level a row walk may reach
    (one below the deepest weighted cube, as `use.qbeast.estimate.assign_cubes`); `None` when a
    cube key does not fit 64 bits. Without a plan (a walk that only counts) no cube has a file."""
    d = revision.dimension_count
    spl = symbols_per_level(d)
    files = {c: plan.file_of_group[g] for c, g in plan.group_of.items()} if plan is not None else {}
    max_depth = max([0, *(len(c) // spl for c in cube_weights)]) + 1
    if max_depth * d > _KEY_BITS:
        return None
    cubes = sorted(set(cube_weights) | set(files))
    records = np.zeros(len(cubes), dtype=_RECORD)
    for i, cube in enumerate(cubes):
        cid = CubeId.from_string(d, cube)
        weight = cube_weights.get(cube)
        records[i] = (cid.depth, weight is not None, 0 if weight is None else int(weight), files.get(cube, -1), cid.bits)
    return records.tobytes(), max_depth


def _walk_inputs(
    spark: SparkSession, df: DataFrame, revision: Revision, cube_weights: Mapping[str, int], plan: RollupPlan | None
) -> tuple[list[Column], bytes, int] | None:
    """What the shim's row walk needs: the coordinate expressions, the cube table and the deepest
    level (`point_columns`, `cube_records`); `None` when the JVM path cannot take these rows."""
    if not jvm_write_enabled(spark) or not shim_loaded(spark):
        return None
    points = point_columns(df, revision)
    table = cube_records(revision, cube_weights, plan)
    if points is None or table is None:
        return None
    return points, table[0], table[1]


def _cube_of_key(dimensions: int, depth: int, bits: int) -> str:
    return CubeId(dimensions, depth, bits).to_string()


def count_in_jvm(
    spark: SparkSession, weighted: DataFrame, revision: Revision, cube_weights: Mapping[str, int], weight_column: str
) -> dict[str, int] | None:
    """Rows per cube of `weighted` (with `weight_column`) placed with `cube_weights`, counted in the
    JVM by the walk the JVM write makes (`OTreeFileWriter.countCubes`): only the indexed columns are
    read and no row crosses into Python. `None`, before anything runs, when the JVM path cannot
    take these rows (see module doc; the codec does not matter here)."""
    walk = _walk_inputs(spark, weighted, revision, cube_weights, None)
    if walk is None:
        return None
    points, records, max_depth = walk
    rows = weighted.select(weighted[weight_column], *points)
    shim = driver_jvm(spark).use.shim.OTreeFileWriter
    d = revision.dimension_count
    out: dict[str, int] = {}
    for line in shim.countCubes(rows._jdf, d, records, max_depth):
        for entry in str(line).split(";") if str(line) else ():
            depth, bits, n = (int(v) for v in entry.split(","))
            cube = _cube_of_key(d, depth, bits)
            out[cube] = out.get(cube, 0) + n
    return out


def _plain_columns(source: DataFrame, names: Sequence[str], sample_files: Sequence[str] = ()) -> list[str]:
    """The data columns Spark's writer should not dictionary-encode, judged as the Python path
    judges a file by its first batch (`use.delta.datafile.dictionary_columns`), here on the first
    rows of the input: read from `sample_files` (local parquet files holding the input's columns
    under their names, as a rewrite's input files do) on the driver, else taken by one small Spark
    job. Nested schemas keep parquet's default for every column."""
    rows = 5 * DICTIONARY_SAMPLE_ROWS
    sample = _first_rows(sample_files, names, rows) if sample_files else None
    if sample is None:
        # One task reading the first rows: a limit over many partitions collects through a shuffle
        # that runs a task on every partition (measured on 1M cached rows in 8 partitions: 0.37 s
        # against 0.09 s, best of 8).
        sample = source.select(*[source[c] for c in names]).coalesce(1).limit(rows).toArrow()
    keep = dictionary_columns(sample)
    return [] if keep is True else [n for n in names if n not in set(keep)]


def _first_rows(files: Sequence[str], names: Sequence[str], rows: int) -> pa.Table | None:
    """Up to `rows` first rows of `names` from the files, in order; `None` when a file lacks one of
    the columns (then Spark samples). Files may differ in nullability (writers mark a column
    `not null` or not), so each file's rows are a table of their own, unified when concatenated."""
    tables: list[pa.Table] = []
    taken = 0
    for path in files:
        reader = pq.ParquetFile(path)
        if not set(names) <= set(reader.schema_arrow.names):
            return None
        batches = []
        for batch in reader.iter_batches(batch_size=rows - taken, columns=list(names)):
            batches.append(batch)
            taken += batch.num_rows
            if taken >= rows:
                break
        if batches:
            tables.append(pa.Table.from_batches(batches))
        if taken >= rows:
            break
    return pa.concat_tables(tables, promote_options="default") if tables else None


def _float_leaves_nested(data_schema: pa.Schema) -> frozenset[str]:
    """Float leaves inside structs: the shim checks top-level columns for NaN only, so these are
    taken to hold NaN (no Delta max: a missing bound is always safe)."""
    return frozenset(leaf.name for leaf in leaf_columns(data_schema) if len(leaf.path) > 1 and pa.types.is_floating(leaf.type))


def _parse_line(line: str, data_names: Sequence[str], nested_floats: frozenset[str], dimensions: int) -> JvmFile:
    name, size, mtime, rows, nans, blocks = line.split("\t")
    cubes: list[str] = []
    w_min: list[int] = []
    counts: list[int] = []
    for block in blocks.split(";") if blocks else ():
        depth, bits, n, lo = (int(v) for v in block.split(","))
        cubes.append(_cube_of_key(dimensions, depth, bits))
        w_min.append(lo)
        counts.append(n)
    return JvmFile(
        name=name,
        size=int(size),
        modification_time=int(mtime),
        num_rows=int(rows),
        nan_columns=frozenset(data_names[int(i)] for i in nans.split(",") if i) | nested_floats,
        blocks=pa.table(
            {"cube": pa.array(cubes, pa.string()), "w_min": pa.array(w_min, pa.int32()), "n": pa.array(counts, pa.int64())}
        ),
    )


def write_in_jvm(
    spark: SparkSession,
    source: DataFrame,
    revision: Revision,
    cube_weights: Mapping[str, int],
    plan: RollupPlan,
    *,
    table_root: str,
    data_schema: pa.Schema,
    weight_column: str,
    write_id: uuid.UUID,
    codec: str,
    task_of_file: Sequence[int] | np.ndarray | None = None,
    sample_files: Sequence[str] = (),
) -> list[JvmFile] | None:
    """Write `source`'s rows (the data columns and `weight_column`) into the plan's files in the
    JVM; `None`, before anything runs, when this write cannot take the JVM path (see module doc).

    Without `task_of_file` each task writes its own part of each file its rows fall into. With it
    (one write task per file of the plan) the rows are shuffled by file first, and task
    `task_of_file[f]` writes file `f` whole. Either way task t's file f is named
    `use.qbeast.write_tasks._task_file_name(write_id, f, t)`. `sample_files` judge the dictionary
    columns (`_plain_columns`)."""
    walk = None if codec not in _JVM_CODECS else _walk_inputs(spark, source, revision, cube_weights, plan)
    if walk is None:
        return None
    points, records, max_depth = walk
    names = list(data_schema.names)
    rows = source.select(*[source[c] for c in names], source[weight_column], *points)
    shim = driver_jvm(spark).use.shim.OTreeFileWriter
    root_uri = Path(os.path.abspath(local_root(table_root))).as_uri()
    plain = _plain_columns(source, names, sample_files)
    if task_of_file is None:
        lines = shim.write(
            rows._jdf,
            len(names),
            revision.dimension_count,
            records,
            max_depth,
            plan.num_files,
            root_uri,
            str(write_id),
            codec,
            plain,
        )
    else:
        # As little-endian int32 bytes: py4j passes bytes as one Java byte[], a list element by element.
        tasks = np.asarray(task_of_file, dtype="<i4").tobytes()
        lines = shim.writeShuffled(
            rows._jdf,
            len(names),
            revision.dimension_count,
            records,
            max_depth,
            tasks,
            root_uri,
            str(write_id),
            codec,
            plain,
        )
    nested = _float_leaves_nested(data_schema)
    return [_parse_line(str(line), names, nested, revision.dimension_count) for line in lines]
