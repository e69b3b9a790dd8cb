"""ZOrder and Hilbert: Delta's OPTIMIZE ZORDER BY for plain Delta tables, as a fixed point.

Delta's command rewrites every file of every selected partition, sorted by the Z-order key of the
ZORDER BY columns, each time it is run, even on a table it has just Z-ordered. These strategies
select the same work but stop once it is done, using Delta's own ZCube tags (what Databricks'
incremental Z-order and Delta's liquid clustering put on the files one clustering job wrote):

* a rewrite tags each file it writes with `ZCUBE_ID` (one id per task: the task's files are one
  ZCube), `ZCUBE_ZORDER_BY` (the key columns, JSON as Delta writes them) and `ZCUBE_ZORDER_CURVE`
  (`zorder`/`hilbert`);
* a file is clustered by the current key when its tags name the same columns and curve (a Delta
  ZCube without a curve tag is a Z-order one);
* per partition, the candidates are the files not clustered by the current key (new appends,
  files clustered by other columns or the other curve) plus the files of the partition's ZCubes
  smaller than `zorder.min-cube-size` (default 100 x `max-file-size`, Delta's minCubeSize): a ZCube
  that large is settled and new data is not merged into it again, which bounds a round's cost;
* a partition is rewritten when its candidates hold a file not clustered by the key, or two or
  more small ZCubes; all its candidates form ONE task (one ZCube), because splitting them would
  produce ZCubes that overlap each other. `task-max-bytes` therefore does not split a partition
  (Delta's ZORDER bins hold a whole partition too); `bytes-per-iter` bounds the partitions per plan.

A partition that is one ZCube of the current key (or only settled ZCubes) selects nothing, so a
second run commits nothing. With the default min-cube-size a table below 100 files' worth is kept as
one ZCube per partition, re-sorted whole whenever new files arrive: exactly what OPTIMIZE ZORDER BY
costs per round; a small min-cube-size makes rounds cost only the new data (incremental ZCubes).

The key columns (`use.optimization.zorder-by`) are checked against the table before anything is
planned: unknown column, partition column (a partition holds one value of it), a type that cannot be
ordered or has no min/max statistics, or a column outside the stats columns (Z-ordering by it could
not skip files) is a ConfigError naming the column. Qbeast tables are refused: their index already
clusters the rows, and a plain rewrite would drop its block metadata.

Score: `new_bytes / bytes + open_file_cost * (files_in - files_out) / bytes`: the share of the
task's bytes not yet clustered by the key (each assumed to save about one byte per selective read,
as for indexing staging files) plus the usual merge term.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.delta.stats import StatsConfig, is_skipping_eligible, leaf_columns, resolve_path, stats_leaves
from use.errors import ConfigError
from use.optimize.curves import HILBERT, ZORDER
from use.optimize.keys import PREFIX
from use.optimize.plan import KIND_CLUSTER, PLAIN_DELTA_REVISION, MergeTask, Plan
from use.optimize.strategies._common import output_files, partition_groups, paths_of, sizes_of, sort_files
from use.optimize.strategies.registry import register

if TYPE_CHECKING:
    from use.optimize.config import OptimizationConfig

#: AddFile tags of a ZCube, as Delta names them (AddFile.Tags.ZCUBE_*).
ZCUBE_ID_TAG = "ZCUBE_ID"
ZCUBE_ZORDER_BY_TAG = "ZCUBE_ZORDER_BY"
ZCUBE_CURVE_TAG = "ZCUBE_ZORDER_CURVE"

_KEY = PREFIX + "zorder-by"


def columns_json(columns: tuple[str, ...]) -> str:
    """The column list as Delta's JsonUtils writes it (compact JSON)."""
    return json.dumps(list(columns), separators=(",", ":"))


def zcube_tags(columns: tuple[str, ...], curve: str, zcube_id: str) -> dict[str, str]:
    """The tags a clustering rewrite puts on every file it writes (one ZCube per task)."""
    return {ZCUBE_ID_TAG: zcube_id, ZCUBE_ZORDER_BY_TAG: columns_json(columns), ZCUBE_CURVE_TAG: curve}


def _quote(part: str) -> str:
    return f"`{part.replace('`', '``')}`" if any(c in part for c in ".`, ") else part


def resolve_key_columns(snapshot: Any, names: tuple[str, ...]) -> tuple[str, ...]:
    """The key columns as Spark parses them (backticks around names with dots), checked against the
    table's schema, partition columns and stats columns; ConfigError naming the first bad one."""
    schema: pa.Schema = snapshot.schema
    parts = tuple(getattr(snapshot, "partition_columns", ()) or ())
    stats = StatsConfig.from_configuration(snapshot.configuration)
    with_stats = {leaf.path for leaf in stats_leaves(
        schema, num_indexed_cols=stats.num_indexed_cols, columns=stats.columns, partition_columns=parts)}  # fmt: skip
    types = {leaf.path: leaf.type for leaf in leaf_columns(schema)}
    out: list[str] = []
    for name in names:
        path = resolve_path(schema, name)
        if path is None:
            raise ConfigError(f"{_KEY} names {name!r}, which is not a column of the table (columns: {', '.join(schema.names)})")
        if path[0] in parts:
            raise ConfigError(
                f"{_KEY} names {name!r}, a partition column of the table: every file of a partition holds one value "
                "of it, so clustering by it changes nothing; cluster by data columns"
            )
        leaf = types.get(path)
        if leaf is None:
            raise ConfigError(f"{_KEY} names {name!r}, a struct: name one of its fields, e.g. {name}.<field>")
        if not is_skipping_eligible(leaf):
            raise ConfigError(
                f"{_KEY} names {name!r} of type {leaf}, which cannot be ordered by min/max statistics; "
                "cluster by number, decimal, date, timestamp or string columns"
            )
        if path not in with_stats:
            raise ConfigError(
                f"{_KEY} names {name!r}, which has no min/max statistics in this table (only the first "
                f"{stats.num_indexed_cols} columns get them, delta.dataSkippingNumIndexedCols, or those in "
                "delta.dataSkippingStatsColumns): clustering by it could not skip files; add it to the stats columns first"
            )
        canonical = ".".join(_quote(p) for p in path)
        if canonical in out:
            raise ConfigError(f"{_KEY} names column {name!r} twice")
        out.append(canonical)
    return tuple(out)


def _tag(files: pa.Table, key: str) -> pa.Array:
    if files.num_rows == 0 or "tags" not in files.column_names:
        return pa.nulls(files.num_rows, pa.string())
    tags = files.column("tags").combine_chunks()
    return pc.map_lookup(tags, pa.scalar(key, pa.string()), "first")


def _same_columns(values: pa.Array, columns: tuple[str, ...]) -> np.ndarray:
    """Per file: its ZCUBE_ZORDER_BY tag lists exactly `columns` (parsed once per distinct value)."""
    enc = pc.dictionary_encode(values)
    matches = []
    for text in enc.dictionary.to_pylist():
        try:
            matches.append(tuple(json.loads(text)) == columns)
        except (TypeError, ValueError):
            matches.append(False)
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    table = np.asarray(matches + [False], dtype=bool)  # code -1 (no tag) -> the trailing False
    clustered: np.ndarray = table[codes]
    return clustered


class _CurveClustering:
    """ZOrder and Hilbert differ only in their curve (see the module docstring)."""

    name: ClassVar[str]
    curve: ClassVar[str]
    applies_to_qbeast: ClassVar[bool] = False  # the index already clusters a Qbeast table
    applies_to_delta: ClassVar[bool] = True

    def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None:
        if config.zorder_by is None:
            raise ConfigError(f"{self.name} needs {_KEY}: set it to the columns to cluster by, e.g. a,b")
        if snapshot.is_qbeast:
            raise ConfigError(
                f"{self.name} rewrites plain Delta tables; {snapshot.table_root or 'this table'} is a Qbeast table, whose "
                "index already clusters its rows (a plain rewrite would drop the index): optimize it with the default chain"
            )
        columns = resolve_key_columns(snapshot, config.zorder_by)
        files: pa.Table = snapshot.files
        n = files.num_rows
        if n == 0:
            return None
        zid = _tag(files, ZCUBE_ID_TAG)
        curve_tag = _tag(files, ZCUBE_CURVE_TAG)
        same_curve = pc.equal(curve_tag, self.curve)
        if self.curve == ZORDER:  # Delta writes no curve tag for its Z-order ZCubes
            same_curve = pc.or_kleene(same_curve, pc.is_null(curve_tag))
        clustered = (
            np.asarray(pc.is_valid(zid).to_numpy(zero_copy_only=False), dtype=bool)
            & np.asarray(same_curve.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
            & _same_columns(_tag(files, ZCUBE_ZORDER_BY_TAG), columns)
        )
        idx = np.arange(n, dtype=np.int64)
        gids, groups = partition_groups(snapshot, idx)
        sizes = sizes_of(snapshot)
        # ZCubes of the current key, per partition: code = (partition, ZCUBE_ID).
        zenc = pc.dictionary_encode(zid)
        zcodes = zenc.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        _, codes = np.unique(gids * (len(zenc.dictionary) + 1) + zcodes, return_inverse=True)
        codes = np.where(clustered, codes.reshape(-1), -1)
        ncodes = int(codes.max()) + 1 if n else 0
        cube_bytes = np.bincount(codes[clustered], weights=sizes[clustered], minlength=ncodes)
        small = np.zeros(n, dtype=bool)
        small[clustered] = cube_bytes[codes[clustered]] < config.min_cube_size_limit
        new = ~clustered
        candidate = new | small
        ngroups = len(groups)
        new_files = np.bincount(gids[new], minlength=ngroups)
        cube_owner = np.full(ncodes, -1, dtype=np.int64)
        cube_owner[codes[small]] = gids[small]
        small_cubes = np.bincount(cube_owner[cube_owner >= 0], minlength=ngroups)
        selected = (new_files > 0) | (small_cubes >= 2)
        if not selected.any():
            return None
        nbytes = np.bincount(gids[candidate], weights=sizes[candidate], minlength=ngroups).astype(np.int64)
        nfiles = np.bincount(gids[candidate], minlength=ngroups)
        new_bytes = np.bincount(gids[new], weights=sizes[new], minlength=ngroups)
        n_out = np.maximum(1, -(-nbytes // max(1, config.max_file_size)))
        scores = (new_bytes + config.open_file_cost * np.maximum(0, nfiles - n_out)) / np.maximum(1, nbytes)
        order = [int(g) for g in np.argsort(-scores, kind="stable") if selected[g]]
        label = ",".join(columns)
        # The candidates grouped by partition once, so each task slices its files out of them.
        by_group = idx[candidate][np.argsort(gids[candidate], kind="stable")]
        ends = np.cumsum(nfiles)
        tasks: list[MergeTask] = []
        total = 0
        for g in order:
            if tasks and total + int(nbytes[g]) > config.bytes_per_iter:
                break
            rows = sort_files(snapshot, by_group[ends[g] - nfiles[g] : ends[g]], [])
            k = int(rows.size)
            reason = (
                f"{self.curve} by {label}: {int(new_files[g])} file(s) not clustered by this key, "
                f"{k - int(new_files[g])} file(s) of {int(small_cubes[g])} ZCube(s) under {config.min_cube_size_limit} bytes "
                f"-> ~{output_files(int(nbytes[g]), config.max_file_size)} file(s)"
            )
            tasks.append(
                MergeTask(self.name, PLAIN_DELTA_REVISION, paths_of(snapshot, rows), int(nbytes[g]), k,
                          float(scores[g]), reason, KIND_CLUSTER, groups[g], cluster_by=columns, curve=self.curve)
            )  # fmt: skip
            total += int(nbytes[g])
        return Plan(tuple(tasks), self.name, snapshot.version)


@register("ZOrder", "ZOrderBy", "Z-Order")
class ZOrder(_CurveClustering):
    name: ClassVar[str]
    curve: ClassVar[str] = ZORDER


@register("Hilbert", "HilbertCurve")
class Hilbert(_CurveClustering):
    name: ClassVar[str]
    curve: ClassVar[str] = HILBERT
