"""The one place where optimization configuration becomes typed values.

The table-property keys of the seeds (`use.optimization.*`, see continuous-optimization.txt and
optimizing-tables-guide.txt) are the public interface; this module adds keys for the extra strategies
under the same prefix and the Spark-conf spellings (`spark.qbeast.use.*`). Everything that reads
optimization settings (planner, loop, service, CLI, SQL procedure) goes through
`OptimizationConfig.from_properties` / `ServiceConfig.from_spark_conf`, so a bad value always fails the
same way: a `ConfigError` naming the key, the value and the accepted form, before any file is touched.

Precedence (highest first): `overrides` (CLI flags, procedure arguments, Python keyword arguments),
table properties, session Spark conf `spark.qbeast.use.optimization.<key>`, the defaults below.
Table properties outside `use.optimization.*` are ignored (they belong to Delta or Qbeast); an unknown
key *inside* the prefix is an error, because a typo there would otherwise silently do nothing. So is
an unknown Spark conf key under `spark.qbeast.use.`; both errors name the closest known key.

Key reference (in short; docs/configuration.md holds `CONFIG_KEYS_MARKDOWN`, made from `CONFIG_KEYS` by
`python docs/generate.py`):

| key | accepted values | default | meaning |
|---|---|---|---|
| `use.optimization.type` | a strategy name | unset | strategy for indexed revisions (`CubeDefragmentation`, `LeveledCompaction`, ...) |
| `use.optimization.strategies` | comma-separated strategy names | unset | the whole ordered chain (replaces the default chain) |
| `use.optimization.bytes-per-iter` | integer bytes > 0 | 1000000000 | bytes rewritten per iteration (one plan) |
| `use.optimization.revision-rewrite` | true/false | false | rewrite every file of the revision, once after each change to it |
| `use.optimization.revision-id` | integer >= 0 | latest | revision to optimize |
| `use.optimization.task-max-bytes` | integer bytes > 0 | bytes-per-iter | IO limit of one merge task |
| `use.optimization.sampling-fraction` | number in (0, 1) | unset | fraction f for SamplingOverheadReduction |
| `use.optimization.max-file-size` | integer bytes > 0 | 1073741824 | bin-packing target size (Delta optimize.maxFileSize) |
| `use.optimization.min-file-size` | integer bytes > 0 | max-file-size | bin-packing candidates are smaller (Delta optimize.minFileSize) |
| `use.optimization.small-files.max-size` | integer bytes > 0 | 67108864 | a file smaller than this is small (SmallFiles) |
| `use.optimization.small-files.count-threshold` | integer >= 2 | 50 | SmallFiles acts when this many small files exist |
| `use.optimization.overlap.cluster-key` | column name | unset | key column of ClusterKeyOverlap |
| `use.optimization.overlap.depth-threshold` | integer >= 1 | 2 | ClusterKeyOverlap acts when the overlap depth exceeds this |
| `use.optimization.open-file-cost` | integer bytes >= 0 | 4194304 | read cost of opening one file, in bytes (task scores) |
| `use.optimization.zorder-by` | comma-separated column names | unset | key columns of ZOrder and Hilbert |
| `use.optimization.zorder.min-cube-size` | integer bytes > 0 | 100 x max-file-size | a ZCube this large is not re-clustered with new files |
| `use.optimization.tiering.ratio` | 0 or a number >= 1.5 | 1.5 | inner-cube consolidation merges a cube's smaller files, a larger one once they reach 1/ratio of it (0: every cube into one file) |
| `use.optimization.tiering.stagger` | a number >= 1 | 1.5 | cubes in odd positions among their siblings use tiering.ratio times this (1: the same ratio for every cube) |
| `use.optimization.tiering.max-fragments` | integer >= 1 | 3 | an inner cube over more files than this is merged whatever the tiers |
| `use.optimization.tiering.root-max-fragments` | integer >= 1 | 3 | the same for the root cube, which every sample reads |
| `use.optimization.tiering.max-wait` | a duration, or off | 1h | a fragment older than this is merged with its cube's other files, and rows waiting this long in an ancestor's file move to their cubes (Relyt's time factor) |
| `use.optimization.tiering.idle-after` | a duration, or off | 10 minutes | once no commit has changed the table's data for this long, every fragment and buffered row is treated as having waited max-wait: a quiet table reaches the layout of one write (Relyt's idle-time work) |
| `use.optimization.autoOptimize.enabled` | true/false | unset | continuous optimization of this table by the service |
| `use.optimization.autoOptimize.revisionId` | integer >= 0 | latest | revision for leveled compaction (revision-id wins if both set) |
| `use.optimization.autoOptimize.optimizeUnindexedFiles.enabled` | true/false | true | index staging (revision 0) files |
| `use.optimization.autoOptimize.optimizeUnindexedFiles.prioritize` | true/false | true | staging files before indexed revisions |
| `use.optimization.autoOptimize.optimizeUnindexedFiles.batchBytes` | integer bytes > 0 | 10000000000 | bytes of staging files indexed per task |
| `use.optimization.autoOptimize.optimizeUnindexedFiles.fromTimestamp` | epoch ms, or `YYYY-MM-DD HH:MM:SS` / `YYYY-MM-DD` (UTC) | 0 | staging files modified earlier are ignored |
| `use.gc.enabled` | true/false | false | the service vacuums the table and cleans its expired log files |
| `spark.qbeast.use.optimization-interval` | duration, e.g. `10 minutes`, `30s`, `1h` | 10 minutes | period of the service's optimization runs |
| `spark.qbeast.use.max-concurrent-optimizations` | integer >= 1 | 1 | optimization runs the service runs at once |
| `spark.qbeast.use.gc-interval` | duration | 1 hour | period of the service's GC of tables with `use.gc.enabled` |
| `spark.qbeast.use.optimization.<key>` | as `use.optimization.<key>` | | session default of a table key |
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from use.delta.stats import parse_column_list
from use.errors import CLI, PYTHON, SQL, ConfigError, InvalidArgumentError, UnknownStrategyError
from use.optimize.config_values import (
    BadValue,
    parse_bool,
    parse_count_threshold,
    parse_depth_threshold,
    parse_duration,
    parse_fraction,
    parse_max_fragments,
    parse_max_wait,
    parse_non_negative_bytes,
    parse_positive_bytes,
    parse_positive_int,
    parse_revision_id,
    parse_stagger,
    parse_tier_ratio,
    parse_timestamp_ms,
)
from use.optimize.keys import (
    ADMINS_KEY,
    ALLOWED_ROOTS_KEY,
    GC_ENABLED_KEY,
    GC_INTERVAL_KEY,
    INTERVAL_KEY,
    MAX_CONCURRENT_KEY,
    PREFIX,
    SESSION_USER_KEY,
    SPARK_OPT_PREFIX,
    SPARK_PREFIX,
)
from use.optimize.strategies import registry

DEFAULT_BYTES_PER_ITER = 1_000_000_000
DEFAULT_BATCH_BYTES = 10_000_000_000
DEFAULT_MAX_FILE_SIZE = 1024**3  # Delta spark.databricks.delta.optimize.maxFileSize
DEFAULT_SMALL_FILE_SIZE = 64 * 1024**2  # Delta autoCompact.minFileSize (maxFileSize / 2)
DEFAULT_SMALL_FILE_COUNT = 50  # Delta autoCompact.minNumFiles
DEFAULT_OVERLAP_DEPTH = 2  # Relyt's example table (max depth 3) is optimized with the defaults
DEFAULT_OPEN_FILE_COST = 4 * 1024**2  # Spark spark.sql.files.openCostInBytes
DEFAULT_INTERVAL_SECONDS = 600.0
DEFAULT_GC_INTERVAL_SECONDS = 3600.0
DEFAULT_MAX_CONCURRENT = 1
DEFAULT_MIN_CUBE_FILES = 100  # Delta's clustering minCubeSize: 100 x optimize.maxFileSize
DEFAULT_TIERING_RATIO = 1.5  # a larger file joins a merge once the smaller add up to 1/1.5 of it (docs/benchmarks.md)
# cubes in odd positions among their siblings use this multiple of the ratio, so a query across
# siblings does not find them all waiting on a fragment at once (staggered tiers: docs/optimization.md)
DEFAULT_TIERING_STAGGER = 1.5  # 1.5 and 2.25 (docs/benchmarks.md: measured from 1 to 2; 1.45-1.6 rewrote least at k = 10)
DEFAULT_TIERING_MAX_FRAGMENTS = 3
# Relyt's time factor: after an hour, waiting rows and fragments are merged whatever the tiers, so a
# table that has gone quiet reaches the layout of one write on its own (docs/optimization.md: size tiers)
DEFAULT_TIERING_MAX_WAIT_S = 3600.0
DEFAULT_TIERING_IDLE_AFTER_S = 600.0
DEFAULT_TIERING_ROOT_MAX_FRAGMENTS = 3  # the root: its file plus two tiers of new appends


# --- column and strategy values (the generic forms are in use.optimize.config_values) -------


def _column(value: Any) -> str:
    text = str(value).strip()
    if not text or "," in text:
        raise BadValue("one column name, e.g. event_time (nested fields as a.b)")
    return text


def _column_list(value: Any) -> tuple[str, ...]:
    form = "comma-separated column names, e.g. a,b (nested fields as a.b, `odd.name` for a name with dots)"
    if isinstance(value, str):
        names = parse_column_list(value, key=PREFIX + "zorder-by", drop_empty=False)
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        names = tuple(v.strip() for v in value)
    else:
        raise BadValue(form)
    if not names or any(not n for n in names):
        raise BadValue(form)
    if len({n.lower() for n in names}) != len(names):
        raise BadValue("distinct " + form)
    return names


def _strategy(value: Any) -> str:
    return registry.canonical_name(str(value).strip())


def _strategy_list(value: Any) -> tuple[str, ...]:
    items = [str(v).strip() for v in (value.split(",") if isinstance(value, str) else value)]
    if not items or any(not s for s in items):
        raise BadValue("a comma-separated list of strategy names, e.g. UnindexedFilesSelection,LeveledCompaction")
    names = tuple(registry.canonical_name(s) for s in items)
    if len(set(names)) != len(names):
        raise BadValue("a comma-separated list of distinct strategy names")
    return names


# --- the key table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeySpec:
    """One documented key: its table-property name, config field, parser and documentation."""

    key: str  # without the `use.optimization.` prefix
    field: str
    parse: Callable[[Any], Any]
    accepted: str
    default: str
    meaning: str

    @property
    def full_key(self) -> str:
        return PREFIX + self.key


_U = "autoOptimize.optimizeUnindexedFiles."
CONFIG_KEYS: tuple[KeySpec, ...] = (
    KeySpec("type", "type", _strategy, "a strategy name", "unset",
            "strategy for indexed revisions (CubeDefragmentation, LeveledCompaction, ...); plain Delta tables use it when it applies to them"),
    KeySpec("strategies", "strategies", _strategy_list, "comma-separated strategy names", "unset",
            "the whole ordered strategy chain; the first strategy that selects work wins"),
    KeySpec("bytes-per-iter", "bytes_per_iter", parse_positive_bytes, "integer bytes > 0", str(DEFAULT_BYTES_PER_ITER),
            "bytes rewritten per iteration (one plan)"),
    KeySpec("revision-rewrite", "revision_rewrite", parse_bool, "true/false", "false",
            "rewrite every file of the revision, once after each change to it (one-shot: a rewritten revision is not rewritten again)"),
    KeySpec("revision-id", "revision_id", parse_revision_id, "integer >= 0", "latest",
            "revision to optimize (0 = only the staging files)"),
    KeySpec("task-max-bytes", "task_max_bytes", parse_positive_bytes, "integer bytes > 0", "bytes-per-iter",
            "IO limit of one merge task (Relyt's task IO limitation)"),
    KeySpec("sampling-fraction", "sampling_fraction", parse_fraction, "number in (0, 1)", "unset",
            "sample fraction f whose overhead SamplingOverheadReduction removes (required by it)"),
    KeySpec("max-file-size", "max_file_size", parse_positive_bytes, "integer bytes > 0", str(DEFAULT_MAX_FILE_SIZE),
            "bin-packing target file size (Delta optimize.maxFileSize)"),
    KeySpec("min-file-size", "min_file_size", parse_positive_bytes, "integer bytes > 0", "max-file-size",
            "files smaller than this are bin-packing candidates (Delta optimize.minFileSize)"),
    KeySpec("small-files.max-size", "small_files_max_size", parse_positive_bytes, "integer bytes > 0", str(DEFAULT_SMALL_FILE_SIZE),
            "a file smaller than this counts as small (SmallFiles)"),
    KeySpec("small-files.count-threshold", "small_files_count_threshold", parse_count_threshold, "integer >= 2", str(DEFAULT_SMALL_FILE_COUNT),
            "SmallFiles acts when the table has at least this many small files"),
    KeySpec("overlap.cluster-key", "overlap_cluster_key", _column, "a column name", "unset",
            "key column whose min/max overlap ClusterKeyOverlap reduces (required by it)"),
    KeySpec("overlap.depth-threshold", "overlap_depth_threshold", parse_depth_threshold, "integer >= 1", str(DEFAULT_OVERLAP_DEPTH),
            "ClusterKeyOverlap acts when the overlap depth exceeds this"),
    KeySpec("open-file-cost", "open_file_cost", parse_non_negative_bytes, "integer bytes >= 0", str(DEFAULT_OPEN_FILE_COST),
            "read cost of opening one file, in bytes, used by the task scores (Spark's openCostInBytes)"),
    KeySpec("zorder-by", "zorder_by", _column_list, "comma-separated column names", "unset",
            "key columns of the ZOrder and Hilbert strategies (Delta's ZORDER BY columns; required by them)"),
    KeySpec("zorder.min-cube-size", "zorder_min_cube_size", parse_positive_bytes, "integer bytes > 0", "100 x max-file-size",
            "a ZCube (the files one ZOrder/Hilbert task wrote) of at least this size is left alone; smaller ones are re-clustered with new files (Delta's minCubeSize)"),
    KeySpec("tiering.ratio", "tiering_ratio", parse_tier_ratio, "0 or a number >= 1.5", str(DEFAULT_TIERING_RATIO),
            "inner-cube consolidation merges a cube's smaller files together and takes a larger file in only when they add up to 1/ratio of it (a larger file joins once the merge reads at least 1/ratio of its bytes in new rows, so a merge reads at most 1 + ratio bytes per new byte: a smaller ratio rewrites less and leaves more rows in smaller files, up to max-fragments; a cube's rows in a file of one of its ancestors count as no fragment); 0 merges every fragmented inner cube into one file each time"),
    KeySpec("tiering.stagger", "tiering_stagger", parse_stagger, "a number >= 1", str(DEFAULT_TIERING_STAGGER),
            "the cubes in odd positions among their siblings (taking their parent's upper half along an odd number of the indexed columns) use tiering.ratio times this: sibling cubes alternate between two ratios, so that a range query across siblings, which rows arriving evenly would otherwise find all waiting on a fragment at the same round, finds about half of them so; 1 gives every cube tiering.ratio"),
    KeySpec("tiering.max-fragments", "tiering_max_fragments", parse_max_fragments, "integer >= 1", str(DEFAULT_TIERING_MAX_FRAGMENTS),
            "an inner cube spread over more files than this (besides its ancestors' files) is merged whatever the tiers (the root: root-max-fragments)"),
    KeySpec("tiering.root-max-fragments", "tiering_root_max_fragments", parse_max_fragments, "integer >= 1", str(DEFAULT_TIERING_ROOT_MAX_FRAGMENTS),
            "the same bound for the root cube, which every sample and query reads (read cost weighted by depth)"),
    KeySpec("tiering.max-wait", "tiering_max_wait", parse_max_wait, "a duration, e.g. '30 minutes', or off", "1h",
            "a file of a fragmented inner cube older than this is merged with the cube's other files whatever the tiers, and a file that has waited this long holding rows of full deeper cubes (the buffer in an ancestor's file) is merged with those cubes' files, so a table that has gone quiet reaches the layout of one write (Relyt's time factor)"),
    KeySpec("tiering.idle-after", "tiering_idle_after", parse_max_wait, "a duration, e.g. '10 minutes', or off", "10 minutes",
            "once no commit has changed the table's data for this long (appends, deletes, updates; OPTIMIZE, VACUUM and property changes do not count), every file is treated as having waited tiering.max-wait: fragments merge with their cubes' files and buffered rows move down to their cubes, so a table that has gone quiet reaches the layout of one write within one optimization rather than max-wait after its last rewrite (Relyt's idle-time work)"),
    KeySpec("autoOptimize.enabled", "auto_optimize_enabled", parse_bool, "true/false", "unset",
            "continuous optimization of this table by the service"),
    KeySpec("autoOptimize.revisionId", "auto_optimize_revision_id", parse_revision_id, "integer >= 0", "latest",
            "revision for leveled compaction; revision-id wins when both are set"),
    KeySpec(_U + "enabled", "optimize_unindexed_enabled", parse_bool, "true/false", "true",
            "index the staging (revision 0) files into the latest revision"),
    KeySpec(_U + "prioritize", "optimize_unindexed_prioritize", parse_bool, "true/false", "true",
            "select staging files before optimizing indexed revisions"),
    KeySpec(_U + "batchBytes", "unindexed_batch_bytes", parse_positive_bytes, "integer bytes > 0", str(DEFAULT_BATCH_BYTES),
            "bytes of staging files indexed per iteration"),
    KeySpec(_U + "fromTimestamp", "unindexed_from_timestamp", parse_timestamp_ms, "epoch ms or 'YYYY-MM-DD HH:MM:SS' (UTC)", "0",
            "staging files modified before this time are not indexed"),
)  # fmt: skip

_BY_KEY = {spec.key.lower(): spec for spec in CONFIG_KEYS}
_BY_FIELD = {spec.field: spec for spec in CONFIG_KEYS}


def _markdown() -> str:
    rows = ["| key | accepted values | default | meaning |", "|---|---|---|---|"]
    rows += [f"| `{s.full_key}` | {s.accepted} | {s.default} | {s.meaning} |" for s in CONFIG_KEYS]
    rows.append(f"| `{GC_ENABLED_KEY}` | true/false | false | the service vacuums the table and cleans its expired log files |")
    rows.append(
        f"| `{INTERVAL_KEY}` | duration, e.g. `10 minutes`, `30s`, `1h` | 10 minutes | period of the service's optimization runs |"
    )
    rows.append(
        f"| `{MAX_CONCURRENT_KEY}` | integer >= 1 | {DEFAULT_MAX_CONCURRENT} | optimization runs the service runs at once |"
    )
    rows.append(f"| `{GC_INTERVAL_KEY}` | duration | 1 hour | period of the service's GC of tables with `{GC_ENABLED_KEY}` |")
    rows.append(
        f"| `{ALLOWED_ROOTS_KEY}` | comma-separated directories or URIs | unset (anywhere); `use serve`: its data dir and "
        "warehouse, plus `--allowed-root` | every path a SQL statement reads or writes must lie under one; a SQL session "
        "cannot change it |"
    )
    rows.append(
        f"| `{ADMINS_KEY}` | comma-separated user names | unset (no check); `use serve`: `--admin`, else the process "
        "owner without `--auth`, else nobody | the users who may run VACUUM with `force => true` |"
    )
    rows.append(
        f"| `{SESSION_USER_KEY}` | set by `use serve` | | the JDBC user of a SQL session; USE's commits record it as "
        "`commitInfo.userName` |"
    )
    rows.append(f"| `{SPARK_OPT_PREFIX}<key>` | as `{PREFIX}<key>` | | session default of a table key |")
    return "\n".join(rows)


#: The key reference as a markdown table (docs/configuration.md holds it: `python docs/generate.py`).
CONFIG_KEYS_MARKDOWN: str = _markdown()


def _error(key: str, value: Any, accepted: str, hints: Mapping[str, str] | None = None) -> ConfigError:
    return ConfigError(f"bad value {str(value)!r} for {key}: expected {accepted}", hints=hints)


def _parse(spec: KeySpec, label: str, raw: Any, hints: Mapping[str, str] | None = None) -> Any:
    """`raw` as `spec`'s typed value; a bad one is a ConfigError naming it `label` (the key, or the
    argument that gave it) with `hints`."""
    try:
        return spec.parse(raw)
    except UnknownStrategyError as e:
        raise UnknownStrategyError(f"bad value {str(raw)!r} for {label}: {e}", hints=hints) from None
    except BadValue as e:
        raise _error(label, raw, str(e), hints) from None


@dataclass(frozen=True)
class Argument:
    """A keyword argument of optimize() that sets a configuration key. The Python API and the SQL
    procedure share its `name` (`bytes_per_iter`: `optimize(bytes_per_iter=...)`, `CALL
    ...optimize(bytes_per_iter => ...)`), the command line spells it `flag`; an error about its
    value names it so and says, per surface, how to pass a good one (`hints`)."""

    name: str
    key: str  # the key it sets, without the `use.optimization.` prefix
    flag: str
    example: str  # a good value, as the command line takes it
    quoted: bool  # the value is text: quoted in Python and SQL
    unset: str | None = None  # what leaving it out gives, e.g. "the table's strategy chain"

    def hints(self) -> dict[str, str]:
        py, sql = (repr(self.example), f"'{self.example}'") if self.quoted else (self.example, self.example)
        tail = {s: "" for s in (PYTHON, CLI, SQL)}
        if self.unset:
            tail = {PYTHON: f", or None for {self.unset}", CLI: f", or leave it out for {self.unset}",
                    SQL: f", or leave it out for {self.unset}"}  # fmt: skip
        return {
            PYTHON: f"pass {self.name}={py}{tail[PYTHON]}",
            CLI: f"pass {self.flag} {self.example}{tail[CLI]}",
            SQL: f"pass {self.name} => {sql}{tail[SQL]}",
        }


#: optimize()'s keyword arguments that set configuration keys (`OptimizationConfig.from_properties`'s
#: `arguments`), by name.
ARGUMENTS: Mapping[str, Argument] = {
    a.name: a
    for a in (
        Argument("bytes_per_iter", "bytes-per-iter", "--bytes-per-iter", "5000000", False,
                 f"the table's {PREFIX}bytes-per-iter"),
        Argument("strategy", "strategies", "--strategy", "BinPacking", True, "the table's strategy chain"),
        Argument("zorder_by", "zorder-by", "--zorder-by", "a,b", True),
    )
}  # fmt: skip


def _needs(source: str | Argument, strategy: str, key: str, what: str, example: str, quoted: bool = True) -> ConfigError:
    """`strategy`, selected by `source` (a key, or the `strategy` argument), needs `key`, which is
    unset: the fix, per surface, is to pass it (when an argument sets it) or set it."""
    spec = _BY_KEY[key.lower()]
    by = next((a for a in ARGUMENTS.values() if a.key == key), None)
    label = source.name if isinstance(source, Argument) else source
    value = repr(example) if quoted else example
    python = f"pass {by.name}={value}" if by else f"pass {spec.field}={value} to optimize()"
    hints = {
        PYTHON: f"{python}, or set the table property with set_properties({{'{spec.full_key}': '{example}'}})",
        CLI: (f"pass {by.flag} {example}, or " if by else "")
        + f"set the table property with use properties --table-location PATH --set {spec.full_key}={example}",
        SQL: (f"pass {by.name} => '{example}', or " if by else "")
        + f"set the table property with ALTER TABLE <table> SET TBLPROPERTIES ('{spec.full_key}'='{example}'), "
        f"or this session's default with SET `{SPARK_OPT_PREFIX}{spec.key}`={example}",
    }
    return ConfigError(f"{label} selects {strategy}, which needs {spec.full_key} ({what}, e.g. {example})", hints=hints)


def did_you_mean(key: str, known: list[str]) -> str:
    """ "; did you mean 'x'?" for the known key closest to a misspelt one ("" if none is close):
    a typo in a long key is easier to see next to the right spelling than in a list of keys.

    Keys are compared after the namespace they all share (up to its last dot): the shared
    `spark.qbeast.use.optimization.` made 'bogus' look like 'type'."""
    lowered = [k.lower() for k in known]
    stem = os.path.commonprefix(lowered) if len(lowered) > 1 else ""
    stem = stem[: stem.rfind(".") + 1]
    by_tail = {k[len(stem) :]: orig for k, orig in zip(lowered, known, strict=False)}
    lk = key.lower()
    tail = lk[len(stem) :] if lk.startswith(stem) else lk
    close = difflib.get_close_matches(tail, list(by_tail), n=1, cutoff=0.8)
    return f"; did you mean {by_tail[close[0]]!r}?" if close else ""


def _unknown_key(key: str, prefix: str) -> ConfigError:
    known = [prefix + s.key for s in CONFIG_KEYS]
    return ConfigError(f"unknown optimization key {key!r}{did_you_mean(key, known)}; known keys: {', '.join(known)}")


def _override_spec(key: str) -> KeySpec:
    """The key an override names: a full key (`use.optimization.bytes-per-iter`), a key without the
    prefix (`bytes-per-iter`) or a field name (`bytes_per_iter`); ConfigError for any other."""
    short = key[len(PREFIX) :] if key.startswith(PREFIX) else key
    spec = _BY_KEY.get(short.lower()) or _BY_FIELD.get(short)
    if spec is None:
        raise _unknown_key(key, PREFIX)
    return spec


def parse_override(key: Any, raw: Any) -> Any:
    """One `use.optimization.*` setting given to a single run (`from_properties`'s `overrides`), as
    its typed value: ConfigError naming the key for an unknown key or a bad value. Checked when an
    optimization is asked for (`use.optimize.request`), before the table is read."""
    if not isinstance(key, str) or not key:
        raise ConfigError(f"an optimization setting must be named by its key (e.g. 'bytes-per-iter'), got {key!r}")
    return _parse(_override_spec(key), key, raw)


def parse_argument(name: str, raw: Any, surface: str = PYTHON) -> Any:
    """The typed value of optimize()'s argument `name` (`ARGUMENTS`: bytes_per_iter, strategy,
    zorder_by), read as the key it sets. A bad value is a ConfigError (UnknownStrategyError for a
    strategy) naming the argument as the caller's surface spells it (the flag on the command line,
    the keyword elsewhere), with each surface's way to pass a good one."""
    argument = ARGUMENTS[name]
    label = argument.flag if surface == CLI else argument.name
    return _parse(_BY_KEY[argument.key], label, raw, argument.hints())


#: The service's own Spark conf keys (besides `spark.qbeast.use.optimization.<key>`).
SERVICE_KEYS: tuple[str, ...] = (
    INTERVAL_KEY,
    MAX_CONCURRENT_KEY,
    GC_INTERVAL_KEY,
    ALLOWED_ROOTS_KEY,
    ADMINS_KEY,
    SESSION_USER_KEY,
)


def _check_service_keys(conf: Mapping[str, str]) -> None:
    """Refuse a `spark.qbeast.use.*` key that is neither a service key nor a table-key default:
    a typo there (`optimisation-interval`) would otherwise leave the default silently in force."""
    for key in conf:
        if key.startswith(SPARK_PREFIX) and not key.startswith(SPARK_OPT_PREFIX) and key not in SERVICE_KEYS:
            raise ConfigError(
                f"unknown key {key!r}{did_you_mean(key, list(SERVICE_KEYS))}; the {SPARK_PREFIX}* keys are "
                f"{', '.join(SERVICE_KEYS)} and {SPARK_OPT_PREFIX}<key> (the session default of a table key "
                f"{PREFIX}<key>)"
            )


@dataclass(frozen=True)
class OptimizationConfig:
    """Typed optimization settings of one table (see the module docstring for every key).

    Fields left `None` mean "unset" and resolve through the properties below, so that a
    `dataclasses.replace` of one field never leaves a stale derived value behind.
    """

    type: str | None = None
    strategies: tuple[str, ...] | None = None
    bytes_per_iter: int = DEFAULT_BYTES_PER_ITER
    revision_rewrite: bool = False
    revision_id: int | None = None
    task_max_bytes: int | None = None
    sampling_fraction: float | None = None
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    min_file_size: int | None = None
    small_files_max_size: int = DEFAULT_SMALL_FILE_SIZE
    small_files_count_threshold: int = DEFAULT_SMALL_FILE_COUNT
    overlap_cluster_key: str | None = None
    overlap_depth_threshold: int = DEFAULT_OVERLAP_DEPTH
    open_file_cost: int = DEFAULT_OPEN_FILE_COST
    zorder_by: tuple[str, ...] | None = None
    zorder_min_cube_size: int | None = None
    auto_optimize_enabled: bool | None = None
    auto_optimize_revision_id: int | None = None
    optimize_unindexed_enabled: bool = True
    optimize_unindexed_prioritize: bool = True
    unindexed_batch_bytes: int = DEFAULT_BATCH_BYTES
    unindexed_from_timestamp: int = 0
    tiering_ratio: float = DEFAULT_TIERING_RATIO
    tiering_stagger: float = DEFAULT_TIERING_STAGGER
    tiering_max_fragments: int = DEFAULT_TIERING_MAX_FRAGMENTS
    tiering_root_max_fragments: int = DEFAULT_TIERING_ROOT_MAX_FRAGMENTS
    tiering_max_wait: float | None = DEFAULT_TIERING_MAX_WAIT_S
    tiering_idle_after: float | None = DEFAULT_TIERING_IDLE_AFTER_S
    #: The planning time (epoch ms) for time-aware rules (`tiering.max-wait`); not a table property:
    #: the optimize loop sets it from the clock, so strategies stay pure functions of their inputs.
    now_ms: int | None = None
    #: When a commit last changed the table's data (epoch ms; `tiering.idle-after`); not a table
    #: property: the optimize loop reads it from the log's history, None when unknown.
    last_data_change_ms: int | None = None

    # --- resolved values ------------------------------------------------------------------------

    @property
    def target_revision_id(self) -> int | None:
        """The revision to optimize: revision-id, else autoOptimize.revisionId, else None (latest)."""
        return self.revision_id if self.revision_id is not None else self.auto_optimize_revision_id

    @property
    def quiet(self) -> bool:
        """Has no commit changed the table's data for `tiering.idle-after` (as of `now_ms`)?"""
        if self.tiering_idle_after is None or self.now_ms is None or self.last_data_change_ms is None:
            return False
        return int(self.now_ms) - int(self.last_data_change_ms) >= int(self.tiering_idle_after * 1000)

    @property
    def tiering_wait_ms(self) -> int | None:
        """How long a file must have waited for the time factor, in ms: `tiering.max-wait`, or 0 once
        the table is `quiet` (every file has waited enough); None when no time-aware rule applies."""
        if self.now_ms is None:
            return None
        if self.quiet:
            return 0
        return None if self.tiering_max_wait is None else int(self.tiering_max_wait * 1000)

    @property
    def task_limit(self) -> int:
        """The IO limit of one merge task (task-max-bytes, defaulting to bytes-per-iter)."""
        return self.task_max_bytes if self.task_max_bytes is not None else self.bytes_per_iter

    @property
    def min_file_size_limit(self) -> int:
        """Bin-packing candidate threshold (min-file-size, defaulting to max-file-size like Delta)."""
        return self.min_file_size if self.min_file_size is not None else self.max_file_size

    @property
    def min_cube_size_limit(self) -> int:
        """ZCube size from which ZOrder/Hilbert leave a ZCube alone (default 100 x max-file-size)."""
        if self.zorder_min_cube_size is not None:
            return self.zorder_min_cube_size
        return DEFAULT_MIN_CUBE_FILES * self.max_file_size

    @property
    def continuous(self) -> bool:
        """The seeds' rule for a continuously optimized table: `use.optimization.type` is set or
        `use.optimization.autoOptimize.enabled` is true (the service schedules it; a manual trigger
        on it is ignored)."""
        return self.type is not None or self.auto_optimize_enabled is True

    # --- parsing --------------------------------------------------------------------------------

    @classmethod
    def from_properties(
        cls,
        props: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
        *,
        spark_conf: Mapping[str, str] | None = None,
        arguments: Mapping[str, Any] | None = None,
    ) -> OptimizationConfig:
        """Parse table properties (+ session Spark conf defaults + explicit overrides + arguments).

        `overrides` keys may be full keys (`use.optimization.bytes-per-iter`), keys without the
        prefix (`bytes-per-iter`) or field names (`bytes_per_iter`); values may be strings or already
        typed (int, bool, float). A `None` override value means "not given" and is skipped.
        `arguments` are optimize()'s own keyword arguments by name (`ARGUMENTS`: `bytes_per_iter`,
        `strategy`, `zorder_by`; None: not given), winning over everything: an error about one
        names the argument and says, per surface (Python, CLI, SQL), how to pass a good value.
        """
        values: dict[str, Any] = {}
        sources: dict[str, str | Argument] = {}  # field -> the key (or argument) the value came from

        def put(spec: KeySpec, key: str, raw: Any, argument: Argument | None = None) -> None:
            values[spec.field] = _parse(spec, key, raw, argument.hints() if argument is not None else None)
            sources[spec.field] = argument or key

        for key, raw in (spark_conf or {}).items():
            if key.startswith(SPARK_OPT_PREFIX):
                spec = _BY_KEY.get(key[len(SPARK_OPT_PREFIX) :].lower())
                if spec is None:
                    raise _unknown_key(key, SPARK_OPT_PREFIX)
                put(spec, key, raw)
        for key, raw in (props or {}).items():
            if key.startswith(PREFIX):
                spec = _BY_KEY.get(key[len(PREFIX) :].lower())
                if spec is None:
                    raise _unknown_key(key, PREFIX)
                put(spec, key, raw)
        for key, raw in (overrides or {}).items():
            if raw is None:
                continue
            put(_override_spec(key), key, raw)
        for name, raw in (arguments or {}).items():
            if raw is None:
                continue
            argument = ARGUMENTS.get(name)
            if argument is None:
                raise InvalidArgumentError(
                    f"{name!r} is not an optimize() argument that sets a key; they are {', '.join(ARGUMENTS)}"
                )
            put(_BY_KEY[argument.key], argument.name, raw, argument)

        config = cls(**values)
        chain = set(config.strategies or ()) | ({config.type} if config.type else set())

        def source(strategy: str) -> str | Argument:
            return sources.get("type" if config.type == strategy else "strategies") or PREFIX + "type"

        if "SamplingOverheadReduction" in chain and config.sampling_fraction is None:
            raise _needs(source("SamplingOverheadReduction"), "SamplingOverheadReduction", "sampling-fraction",
                         "a number strictly between 0 and 1: the sample fraction whose overhead to remove", "0.1", False)  # fmt: skip
        if "ClusterKeyOverlap" in chain and config.overlap_cluster_key is None:
            raise _needs(source("ClusterKeyOverlap"), "ClusterKeyOverlap", "overlap.cluster-key",
                         "the column whose overlap to reduce", "event_time")  # fmt: skip
        for curve in ("ZOrder", "Hilbert"):
            if curve in chain and config.zorder_by is None:
                raise _needs(source(curve), curve, "zorder-by", "the columns to cluster by", "a,b")
        return config

    def to_properties(self) -> dict[str, str]:
        """The explicitly set values as table properties (round-trips through from_properties)."""
        out: dict[str, str] = {}
        defaults = OptimizationConfig()
        for f in fields(self):
            value = getattr(self, f.name)
            if value == getattr(defaults, f.name) or f.name not in _BY_FIELD:
                continue  # defaults, and inputs that are not table properties (now_ms, last_data_change_ms)
            spec = _BY_FIELD[f.name]
            if spec.parse is parse_max_wait:
                text = "off" if value is None else f"{value:g}s"
            elif isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, tuple):
                text = ",".join(value)
            else:
                text = str(value)
            out[spec.full_key] = text
        return out


def zorder_strategy(strategy: Any, zorder_by: Any, files: Any = None) -> Any:
    """The strategy optimize() runs when given `zorder_by` (the Python API, the CLI and CALL all
    take it): the columns alone ask for Delta's OPTIMIZE ... ZORDER BY, so the chain becomes
    `ZOrder`; with a strategy (e.g. `Hilbert`) the columns are that strategy's key. The columns are
    parsed as the `zorder-by` argument (`ARGUMENTS`). An explicit `files` list cannot be combined
    with them (InvalidArgumentError).
    """
    if zorder_by is None:
        return strategy
    if files is not None:
        raise InvalidArgumentError(
            "zorder_by and files cannot be combined: an explicit file list is bin-packed as it is; "
            "Z-ordering selects the files of each partition itself (give zorder_by alone)"
        )
    return "ZOrder" if strategy is None else strategy


def is_continuous(props: Mapping[str, str] | None) -> bool:
    """Does the table ask for continuous optimization (`OptimizationConfig.continuous`: its
    `use.optimization.type` set or `autoOptimize.enabled=true`), by its own properties alone.

    A session default (`spark.qbeast.use.optimization.type`) is a default for the runs that
    session starts, not a request that every table be optimized: the service schedules tables by
    their properties, so `metastore_summary.auto_optimize` and the manual trigger's "continuously
    optimized" check read the same. ConfigError for an invalid property."""
    return OptimizationConfig.from_properties(props or {}).continuous


def gc_enabled(props: Mapping[str, str] | None) -> bool:
    """The table property `use.gc.enabled` (default false); ConfigError for a value that is not
    true/false, so a typo does not silently leave a table without GC."""
    raw = (props or {}).get(GC_ENABLED_KEY)
    if raw is None:
        return False
    try:
        return parse_bool(raw)
    except BadValue as e:
        raise _error(GC_ENABLED_KEY, raw, str(e)) from None


def _conf_value(conf: Mapping[str, str], key: str, parse: Callable[[Any], Any], default: Any) -> Any:
    if key not in conf:
        return default
    try:
        return parse(conf[key])
    except BadValue as e:
        raise _error(key, conf[key], str(e)) from None


@dataclass(frozen=True)
class ServiceConfig:
    """Session-level (Spark conf) settings of the continuous-optimization service."""

    optimization_interval_s: float = DEFAULT_INTERVAL_SECONDS
    max_concurrent_optimizations: int = DEFAULT_MAX_CONCURRENT
    gc_interval_s: float = DEFAULT_GC_INTERVAL_SECONDS

    @classmethod
    def from_spark_conf(cls, conf: Mapping[str, str] | None) -> ServiceConfig:
        """Parse `spark.qbeast.use.optimization-interval`, `.max-concurrent-optimizations` and
        `.gc-interval`; `spark.qbeast.use.optimization.*` keys are validated too (they are table-key
        defaults, see `OptimizationConfig.from_properties`), and any other `spark.qbeast.use.*` key
        is refused as unknown."""
        conf = conf or {}
        _check_service_keys(conf)
        OptimizationConfig.from_properties({}, spark_conf=conf)  # validates the session defaults
        return cls(
            optimization_interval_s=_conf_value(conf, INTERVAL_KEY, parse_duration, DEFAULT_INTERVAL_SECONDS),
            max_concurrent_optimizations=_conf_value(conf, MAX_CONCURRENT_KEY, parse_positive_int, DEFAULT_MAX_CONCURRENT),
            gc_interval_s=_conf_value(conf, GC_INTERVAL_KEY, parse_duration, DEFAULT_GC_INTERVAL_SECONDS),
        )
