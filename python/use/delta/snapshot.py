"""Snapshot: the table as of one version (protocol, metadata, live files, tombstones), plus the rules
for which protocols and table properties this implementation can read and write.

Refusing is part of correctness: a reader that ignores a feature it does not implement (deletion
vectors, column mapping) returns wrong rows silently, and a writer that ignores one corrupts the
table for everyone. So every feature is checked by name, and unknown ones are refused.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from use.delta.actions import Metadata, Protocol
from use.delta.columnmapping import ColumnMapping, column_mapping_mode
from use.delta.schema import schema_from_json
from use.delta.state import LogState
from use.delta.typewidening import FEATURES as TYPE_WIDENING_FEATURES
from use.delta.typewidening import check_type_changes
from use.errors import ConfigError, UnsupportedFeatureError, UseError

# --- features ---------------------------------------------------------------------------------------

READER_FEATURES_SUPPORTED = frozenset(
    {
        "timestampNtz",
        "vacuumProtocolCheck",
        "columnMapping",
        "v2Checkpoint",
        "typeWidening",
        "typeWidening-preview",
        "deletionVectors",
    }
)
"""Reader features we can read: column mapping in every mode (`use.delta.columnmapping`), V2
checkpoints with sidecars (`use.delta.checkpoint`), widened column types (`use.delta.typewidening`),
deletion vectors (`use.delta.deletion_vectors`: every read drops the rows they delete)."""

READ_ONLY_READER_FEATURES = frozenset(
    {"columnMapping", "v2Checkpoint", "typeWidening", "typeWidening-preview", "deletionVectors"}
)
"""Reader features USE reads but does not write: a write to such a table is refused by name
(column mapping only when its mode is `name` or `id`)."""

WRITER_FEATURES_WRITABLE = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "allowColumnDefaults",
        "identityColumns",
        "timestampNtz",
        "domainMetadata",
        "vacuumProtocolCheck",
        "columnMapping",
    }
)
"""Writer features we can honour when writing, provided they are not *active* in a way we cannot
enforce (declared invariants, constraints, generated or identity columns: see `check_write_support`).
Every other writer feature makes the table read-only for USE."""


def check_read_support(protocol: Protocol, metadata: Metadata, table: str) -> None:
    """UnsupportedFeatureError naming the feature if this table cannot be read correctly."""
    if protocol.min_reader_version > 3:
        raise UnsupportedFeatureError(
            f"table {table} needs Delta reader version {protocol.min_reader_version}; USE reads up to 3"
        )
    if protocol.min_reader_version == 3:
        for f in protocol.reader_features or ():
            if f not in READER_FEATURES_SUPPORTED:
                raise UnsupportedFeatureError(
                    f"table {table} uses the Delta reader feature {f!r}, which USE does not support", feature=f
                )
    if column_mapping_mode(protocol, metadata) != "none" or any(
        f in (protocol.reader_features or ()) for f in TYPE_WIDENING_FEATURES
    ):
        # Both need the schema: a mapped schema must name every column's physical name (and id),
        # a widened one may only record type changes the protocol allows.
        schema = schema_from_json(metadata.schema_string)
        ColumnMapping.of(protocol, metadata, schema)
        check_type_changes(protocol, schema, table)


def _schema_metadata_keys(schema_string: str) -> set[str]:
    keys: set[str] = set()

    def walk(t: Any) -> None:
        if isinstance(t, dict):
            if t.get("type") == "struct":
                for f in t.get("fields", []):
                    keys.update((f.get("metadata") or {}).keys())
                    walk(f.get("type"))
            elif t.get("type") == "array":
                walk(t.get("elementType"))
            elif t.get("type") == "map":
                walk(t.get("keyType"))
                walk(t.get("valueType"))

    try:
        walk(json.loads(schema_string))
    except ValueError:
        pass
    return keys


def change_data_feed_active(protocol: Protocol, metadata: Metadata) -> bool:
    """Must writers record the row changes of this table (Delta's change data feed)? When the
    property is on and the protocol makes writers respect it (writer 4 to 6, or 7 with the
    `changeDataFeed` feature), as the protocol's "Writer Requirements for AddCDCFile" say."""
    if metadata.configuration.get("delta.enableChangeDataFeed", "false").strip().lower() != "true":
        return False
    if protocol.min_writer_version == 7:
        return "changeDataFeed" in (protocol.writer_features or ())
    return protocol.min_writer_version >= 4


def protocol_with_change_data_feed(protocol: Protocol) -> Protocol | None:
    """The protocol a table needs once `delta.enableChangeDataFeed` is set (None: it has it), as
    Delta upgrades it: writer version 4, or the `changeDataFeed` writer feature on a table-features
    protocol."""
    if protocol.min_writer_version == 7:
        features = tuple(protocol.writer_features or ())
        return (
            None
            if "changeDataFeed" in features
            else dataclasses.replace(protocol, writer_features=features + ("changeDataFeed",))
        )
    return None if protocol.min_writer_version >= 4 else dataclasses.replace(protocol, min_writer_version=4)


def check_write_support(protocol: Protocol, metadata: Metadata, table: str) -> None:
    """UnsupportedFeatureError naming the feature if we cannot honour it when writing to this table."""
    check_read_support(protocol, metadata, table)
    mode = column_mapping_mode(protocol, metadata)
    if mode != "none":
        raise UnsupportedFeatureError(
            f"table {table} uses column mapping (delta.columnMapping.mode={mode}): USE reads it (by physical names) but "
            "does not write it; write with an engine that supports column mapping (delta-spark, delta-rs)",
            feature="columnMapping",
        )
    for f in protocol.reader_features or ():
        if f in READ_ONLY_READER_FEATURES and f != "columnMapping":
            raise UnsupportedFeatureError(
                f"table {table} uses the Delta feature {f!r}: USE reads it but does not write it; write with an engine "
                "that supports it (delta-spark, delta-rs)",
                feature=f,
            )
    if protocol.min_writer_version > 7:
        raise UnsupportedFeatureError(
            f"table {table} needs Delta writer version {protocol.min_writer_version}; USE writes up to 7"
        )
    if protocol.min_writer_version == 7:
        for f in protocol.writer_features or ():
            if f not in WRITER_FEATURES_WRITABLE:
                raise UnsupportedFeatureError(
                    f"table {table} uses the Delta writer feature {f!r}, which USE cannot honour: USE can read this "
                    "table but not write to it; write with an engine that supports the feature (delta-spark, delta-rs)",
                    feature=f,
                )
    wf = set(protocol.writer_features or ()) if protocol.min_writer_version == 7 else None

    def supported(feature: str, legacy_version: int) -> bool:
        return feature in wf if wf is not None else protocol.min_writer_version >= legacy_version

    keys = _schema_metadata_keys(metadata.schema_string)
    if supported("invariants", 2) and "delta.invariants" in keys:
        raise UnsupportedFeatureError(
            f"table {table} declares column invariants (feature 'invariants'), which USE cannot enforce",
            feature="invariants",
        )
    constraints = sorted(k for k in metadata.configuration if k.startswith("delta.constraints."))
    if supported("checkConstraints", 3) and constraints:
        raise UnsupportedFeatureError(
            f"table {table} declares CHECK constraints ({', '.join(constraints)}; feature 'checkConstraints'), which USE "
            "can read but not enforce on write",
            feature="checkConstraints",
        )
    if supported("generatedColumns", 4) and "delta.generationExpression" in keys:
        raise UnsupportedFeatureError(
            f"table {table} has generated columns (feature 'generatedColumns'), which USE cannot write",
            feature="generatedColumns",
        )
    if supported("identityColumns", 6) and any(k.startswith("delta.identity.") for k in keys):
        raise UnsupportedFeatureError(
            f"table {table} has identity columns (feature 'identityColumns'), which USE cannot write", feature="identityColumns"
        )
    if wf is not None and "allowColumnDefaults" in wf and "CURRENT_DEFAULT" in keys:
        raise UnsupportedFeatureError(
            f"table {table} has column defaults (feature 'allowColumnDefaults'), which USE cannot write",
            feature="allowColumnDefaults",
        )
    if metadata.configuration.get("delta.checkpoint.writeStatsAsStruct", "false").lower() == "true":
        raise UnsupportedFeatureError(
            f"table {table} sets delta.checkpoint.writeStatsAsStruct=true, which USE's checkpoint writer does not honour"
        )


# --- table properties -------------------------------------------------------------------------------

_US_PER_DAY = 86_400_000_000
_INTERVAL_UNITS_US = {
    "microsecond": 1,
    "millisecond": 1000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": _US_PER_DAY,
    "week": 7 * _US_PER_DAY,
}
_INTERVAL_CALENDAR_UNITS = ("month", "year")
_INTERVAL_TERM_RE = re.compile(r"([+-]?)\s*(\d+(?:\.\d*)?|\.\d+)\s+([a-z]+?)s?(?:\s+|$)", re.ASCII)
_INTERVAL_PREFIX_RE = re.compile(r"interval(?:\s+|$)", re.ASCII)
_INT64_MAX = 2**63 - 1
_INTERVAL_EXAMPLES = "e.g. 'interval 30 days', 'interval 1 day 12 hours' or '2 weeks'"


def parse_interval_ms(key: str, value: str) -> int:
    """A Delta duration property (CalendarInterval syntax) -> milliseconds.

    Accepts what Delta accepts for these properties: an optional `interval` prefix, then one or
    more `<number> <unit>` terms (`interval 1 day 2 hours`, `2 weeks`), units singular or plural
    and in any case, from microseconds to weeks; an optional sign per term; a fraction only on
    seconds (`1.5 seconds`). Months and years are refused, as Delta refuses them here, because
    their length varies and a retention period must be a fixed span. The total must not be
    negative. Sub-millisecond remainders are truncated.
    """

    def bad(reason: str) -> ConfigError:
        return ConfigError(
            f"table property {key}={value!r} is not a valid interval: {reason}; use {_INTERVAL_EXAMPLES} "
            f"(units: {', '.join(u + 's' for u in _INTERVAL_UNITS_US)})"
        )

    if not isinstance(value, str):
        raise bad(f"expected a string, got {type(value).__name__}")
    text = value.strip().lower()
    if not text:
        raise bad("it is empty")
    pos = 0
    m = _INTERVAL_PREFIX_RE.match(text)
    if m:
        pos = m.end()
    total_us = 0
    terms = 0
    while pos < len(text):
        m = _INTERVAL_TERM_RE.match(text, pos)
        if not m:
            rest = text[pos:].split()
            raise bad(f"cannot read {' '.join(rest[:2])!r} as '<number> <unit>'")
        sign, number, unit = m.groups()
        if unit in _INTERVAL_CALENDAR_UNITS:
            raise bad(
                f"{unit}s are not allowed here (Delta refuses months and years for durations: their length "
                "varies); write days instead, 'interval 365 days' for a year"
            )
        if unit not in _INTERVAL_UNITS_US:
            raise bad(f"unknown unit {m.group(0).split()[-1]!r}")
        whole, point, frac = number.partition(".")
        if point and unit != "second":
            raise bad(f"only seconds may have a fraction, got {m.group(0).strip()!r}")
        if len(frac) > 9:
            raise bad(f"{number!r} has more than nanosecond precision")
        us = int(whole or "0") * _INTERVAL_UNITS_US[unit] + int((frac + "000000")[:6])
        total_us += -us if sign == "-" else us
        terms += 1
        pos = m.end()
    if terms == 0:
        raise bad("it has no '<number> <unit>' term")
    if total_us < 0:
        raise bad("the duration is negative")
    if total_us > _INT64_MAX:
        raise bad("the duration is too long")
    return total_us // 1000


def _bool_prop(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise ConfigError(f"table property {key}={value!r} must be 'true' or 'false'")
    return v == "true"


def _positive_int_prop(key: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n <= 0:
        raise ConfigError(f"table property {key}={value!r} must be a positive integer")
    return n


DEFAULT_CHECKPOINT_INTERVAL = 10
DEFAULT_LOG_RETENTION_MS = 30 * 86_400_000
DEFAULT_DELETED_FILE_RETENTION_MS = 7 * 86_400_000


@dataclass(frozen=True)
class TableConfig:
    """The Delta table properties this implementation acts on, parsed once."""

    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL
    log_retention_ms: int = DEFAULT_LOG_RETENTION_MS
    deleted_file_retention_ms: int = DEFAULT_DELETED_FILE_RETENTION_MS
    enable_expired_log_cleanup: bool = True
    append_only: bool = False
    #: Delta's auto compaction (`delta.autoOptimize.autoCompact`, or the legacy `delta.autoOptimize`
    #: when true): None when the table does not say; the session's setting wins over it
    #: (`use.optimize.auto_compact`).
    auto_compact: bool | None = None
    #: `delta.compatibility.symlinkFormatManifest.enabled`: every commit rewrites the manifests of
    #: the partitions it touched (`use.delta.manifest`)
    symlink_manifest: bool = False

    @classmethod
    def from_configuration(cls, conf: Mapping[str, str]) -> TableConfig:
        kw: dict[str, Any] = {}
        if "delta.checkpointInterval" in conf:
            kw["checkpoint_interval"] = _positive_int_prop("delta.checkpointInterval", conf["delta.checkpointInterval"])
        if "delta.logRetentionDuration" in conf:
            kw["log_retention_ms"] = parse_interval_ms("delta.logRetentionDuration", conf["delta.logRetentionDuration"])
        if "delta.deletedFileRetentionDuration" in conf:
            kw["deleted_file_retention_ms"] = parse_interval_ms(
                "delta.deletedFileRetentionDuration", conf["delta.deletedFileRetentionDuration"]
            )
        if "delta.enableExpiredLogCleanup" in conf:
            kw["enable_expired_log_cleanup"] = _bool_prop("delta.enableExpiredLogCleanup", conf["delta.enableExpiredLogCleanup"])
        if "delta.appendOnly" in conf:
            kw["append_only"] = _bool_prop("delta.appendOnly", conf["delta.appendOnly"])
        if SYMLINK_MANIFEST_PROPERTY in conf:
            kw["symlink_manifest"] = _bool_prop(SYMLINK_MANIFEST_PROPERTY, conf[SYMLINK_MANIFEST_PROPERTY])
        legacy = _bool_prop(LEGACY_AUTO_OPTIMIZE, conf[LEGACY_AUTO_OPTIMIZE]) if LEGACY_AUTO_OPTIMIZE in conf else None
        if AUTO_COMPACT_PROPERTY in conf:
            kw["auto_compact"] = auto_compact_value(f"table property {AUTO_COMPACT_PROPERTY}", conf[AUTO_COMPACT_PROPERTY])
        if legacy:  # Delta: the legacy flag, when true, wins over the newer property
            kw["auto_compact"] = True
        return cls(**kw)


AUTO_COMPACT_PROPERTY = "delta.autoOptimize.autoCompact"
SYMLINK_MANIFEST_PROPERTY = "delta.compatibility.symlinkFormatManifest.enabled"
LEGACY_AUTO_OPTIMIZE = "delta.autoOptimize"


def auto_compact_value(what: str, value: str) -> bool:
    """An auto compaction setting (the table property, or Spark's `spark.databricks.delta.autoCompact.enabled`):
    Delta's `true`/`false`, and Databricks' `auto`/`legacy` (tables written there carry them; both
    mean on), any case. ConfigError naming `what` otherwise."""
    v = value.strip().lower()
    if v not in ("true", "false", "auto", "legacy"):
        raise ConfigError(f"{what}={value!r} must be 'true' or 'false' (Databricks' 'auto' and 'legacy' also mean true)")
    return v != "false"


def first_switch(sources: Sequence[tuple[str, object]]) -> bool | None:
    """The first of `(name, raw value)` pairs that is set (not None), as a boolean switch (true/false in
    any case): how a Spark setting that wins over a table property is read (None when none is set).
    A value other than true/false is a ConfigError naming it."""
    for name, raw in sources:
        if raw is None:
            continue
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(f"{name} must be true or false, got {raw!r}")
        return text == "true"
    return None


# Delta's table properties: accepted at create time (and by ALTER TABLE ... SET TBLPROPERTIES),
# acted upon or, for those with no meaning in USE, kept for other engines (docs/delta.md, "Table
# properties"); the ones USE cannot honour are refused by `_refusal` saying why. Anything else under
# `delta.` is refused as unknown (as Spark does), because a misspelt property silently does nothing.
KNOWN_DELTA_PROPERTIES = frozenset(
    {
        "delta.enableTypeWidening",
        "delta.checkpointPolicy",
        "delta.enableIcebergCompatV1",
        "delta.enableIcebergCompatV2",
        "delta.enableIcebergCompatV3",
        "delta.universalFormat.enabledFormats",
        "delta.appendOnly",
        "delta.checkpointInterval",
        "delta.logRetentionDuration",
        "delta.deletedFileRetentionDuration",
        "delta.enableExpiredLogCleanup",
        "delta.dataSkippingNumIndexedCols",
        "delta.dataSkippingStatsColumns",
        "delta.checkpoint.writeStatsAsJson",
        "delta.checkpoint.writeStatsAsStruct",
        "delta.targetFileSize",
        "delta.tuneFileSizesForRewrites",
        "delta.autoOptimize",
        "delta.autoOptimize.autoCompact",
        "delta.autoOptimize.optimizeWrite",
        "delta.enableChangeDataFeed",
        "delta.columnMapping.mode",
        "delta.enableDeletionVectors",
        "delta.enableRowTracking",
        "delta.enableInCommitTimestamps",
        "delta.isolationLevel",
        "delta.randomizeFilePrefixes",
        "delta.randomPrefixLength",
        "delta.setTransactionRetentionDuration",
        "delta.compatibility.symlinkFormatManifest.enabled",
        "delta.parquet.compression.codec",
        "delta.minReaderVersion",
        "delta.minWriterVersion",
    }
)

#: Delta's session settings holding default properties of new tables (`<prefix><key>` -> `delta.<key>`).
PROPERTY_DEFAULTS_PREFIX = "spark.databricks.delta.properties.defaults."
_NOT_DEFAULTED = frozenset({"delta.minReaderVersion", "delta.minWriterVersion"})


def property_defaults(settings: Mapping[str, str]) -> dict[str, str]:
    """The table properties a new table takes from Delta's session settings
    `spark.databricks.delta.properties.defaults.<key>` (e.g. `...defaults.enableChangeDataFeed`):
    `delta.<key>` for the Delta properties this implementation knows, as Delta copies only its
    registered ones (protocol versions excepted: USE chooses the protocol from the features used);
    each value checked, a bad one refused naming the setting."""
    out: dict[str, str] = {}
    for key, value in settings.items():
        if not key.startswith(PROPERTY_DEFAULTS_PREFIX):
            continue
        prop = "delta." + key[len(PROPERTY_DEFAULTS_PREFIX) :]
        if prop not in KNOWN_DELTA_PROPERTIES or prop in _NOT_DEFAULTED:
            continue
        try:
            validate_configuration({prop: str(value)})
        except (ConfigError, UnsupportedFeatureError) as exc:
            raise ConfigError(
                f"the session's default property of new tables {key}={value!r} cannot be applied: {exc}; "
                f"UNSET or RESET {key}, or set {prop} when creating the table"
            ) from None
        out[prop] = str(value)
    return out


_UNSUPPORTED_WHEN_TRUE = {
    "delta.enableDeletionVectors": "deletionVectors",
    "delta.enableRowTracking": "rowTracking",
    "delta.enableInCommitTimestamps": "inCommitTimestamp",
    "delta.checkpoint.writeStatsAsStruct": "checkpoint stats as struct",
}

#: Delta's isolation levels a table may name (`delta.isolationLevel`); USE checks conflicts at the
#: level named, WriteSerializable when none is (docs/delta.md, "Table properties").
_ISOLATION_LEVELS = ("serializable", "writeserializable")

#: Delta's boolean properties that nothing else parses: a value other than true/false is refused.
_BOOLEAN_PROPERTIES = frozenset(
    {*_UNSUPPORTED_WHEN_TRUE, "delta.enableTypeWidening", "delta.enableIcebergCompatV1", "delta.enableIcebergCompatV2",
     "delta.enableIcebergCompatV3", "delta.randomizeFilePrefixes", "delta.tuneFileSizesForRewrites"}
)  # fmt: skip

#: The table feature prefix of Delta's `delta.feature.<name>=supported` (adds `<name>` to the protocol).
FEATURE_PROPERTY_PREFIX = "delta.feature."


def _refusal(key: str, value: str) -> UseError | None:
    """Why USE refuses a real Delta table property with this value (None: it takes it): the
    feature it turns on, which USE does not write, or a value Delta itself does not accept. Named
    precisely, so that a real property is never answered "check its spelling"."""
    v = value.strip().lower()
    if key in _BOOLEAN_PROPERTIES and v not in ("true", "false"):
        return ConfigError(f"table property {key}={value!r} must be 'true' or 'false'")
    if key == "delta.setTransactionRetentionDuration":
        try:
            parse_interval_ms(key, value)
        except ConfigError as exc:
            return exc
    if key in _UNSUPPORTED_WHEN_TRUE and v == "true":
        return UnsupportedFeatureError(
            f"table property {key}=true needs the feature {_UNSUPPORTED_WHEN_TRUE[key]!r}, which USE does not support",
            feature=_UNSUPPORTED_WHEN_TRUE[key],
        )
    if key == "delta.enableTypeWidening" and v == "true":
        return UnsupportedFeatureError(
            f"table property {key}=true: USE reads tables whose column types were widened (feature typeWidening) but "
            "does not widen a column's type itself (ALTER COLUMN ... TYPE is not supported yet), so it does not enable "
            "type widening; widen the column with delta-spark, or rewrite the table with the wider type "
            "(CREATE OR REPLACE TABLE ... AS SELECT CAST(...))",
            feature="typeWidening",
        )
    if key.startswith("delta.enableIcebergCompatV") and v == "true":
        feature = "icebergCompat" + key[len("delta.enableIcebergCompat") :]
        return UnsupportedFeatureError(
            f"table property {key}=true: Iceberg compatibility (UniForm, feature {feature}) has writers keep Iceberg "
            "metadata beside the Delta log, which USE does not write; leave it unset, or write the table with delta-spark",
            feature=feature,
        )
    if key == "delta.universalFormat.enabledFormats" and v:
        return UnsupportedFeatureError(
            f"table property {key}={value!r}: UniForm (Iceberg/Hudi metadata kept beside the Delta log by every "
            "writer) is not supported by USE; leave it unset, or write the table with delta-spark"
        )
    if key == "delta.checkpointPolicy":
        if v == "v2":
            return UnsupportedFeatureError(
                f"table property {key}=v2 needs V2 checkpoints (feature v2Checkpoint), which USE reads but does not "
                "write (its checkpoints are classic); leave it 'classic'",
                feature="v2Checkpoint",
            )
        if v != "classic":
            return ConfigError(f"table property {key}={value!r} must be 'classic' or 'v2' (Delta's checkpoint policies)")
    if key == "delta.isolationLevel" and v not in _ISOLATION_LEVELS:
        return ConfigError(
            f"table property {key}={value!r} must be 'Serializable' or 'WriteSerializable' (Delta's isolation levels)"
        )
    if key.startswith(FEATURE_PROPERTY_PREFIX):
        name = key[len(FEATURE_PROPERTY_PREFIX) :]
        return UnsupportedFeatureError(
            f"table property {key}={value!r} asks to add the table feature {name!r} to the protocol, which USE does not "
            "do by property: it upgrades the protocol itself for the features a table uses (timestampNtz for a "
            "TIMESTAMP_NTZ column, changeDataFeed for delta.enableChangeDataFeed=true, ...); leave it unset, or add the "
            "feature with delta-spark",
            feature=name,
        )
    return None


def validate_configuration(configuration: Mapping[str, str], previous: Mapping[str, str] | None = None) -> dict[str, str]:
    """Check table properties being set; with `previous`, only keys that are new or changed are judged
    (a table written by another engine may carry properties we do not know and leave alone)."""
    conf: dict[str, str] = {}
    for k, v in (configuration or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ConfigError(f"table properties must map str -> str, got {k!r}: {v!r}")
        conf[k] = v
    old = previous or {}
    for k, v in conf.items():
        if old.get(k) == v:
            continue
        if k.startswith("delta.constraints."):
            raise UnsupportedFeatureError(
                f"table property {k}: CHECK constraints (feature 'checkConstraints') cannot be enforced by USE"
            )
        refusal = _refusal(k, v)
        if refusal is not None:
            raise refusal
        if k.startswith("delta.") and k not in KNOWN_DELTA_PROPERTIES:
            raise ConfigError(
                f"unknown Delta table property {k!r}; check its spelling (known: {', '.join(sorted(KNOWN_DELTA_PROPERTIES))})"
            )
    mode = conf.get("delta.columnMapping.mode", "none").lower()
    if mode != "none" and old.get("delta.columnMapping.mode") != conf.get("delta.columnMapping.mode"):
        raise UnsupportedFeatureError(
            f"delta.columnMapping.mode={mode!r}: USE reads column-mapped tables but cannot create or enable column "
            "mapping (only 'none'); use delta-spark or delta-rs for that",
            feature="columnMapping",
        )
    manifests = conf.get(SYMLINK_MANIFEST_PROPERTY, "false").strip().lower() == "true"
    if manifests and mode != "none" and old.get(SYMLINK_MANIFEST_PROPERTY) != conf.get(SYMLINK_MANIFEST_PROPERTY):
        raise UnsupportedFeatureError(
            f"{SYMLINK_MANIFEST_PROPERTY}=true on a table with column mapping (mode {mode!r}): symlink format manifests "
            "cannot describe it (their readers would see the physical column names), as in Delta; leave it unset",
            feature="columnMapping",
        )
    for k in ("delta.minReaderVersion", "delta.minWriterVersion"):
        if k in conf and old.get(k) != conf[k]:
            raise ConfigError(f"table property {k} is not settable here; USE chooses the protocol from the features used")
    TableConfig.from_configuration(conf)
    return conf


# --- snapshot -----------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Snapshot:
    """An immutable view of the table at `version`.

    `files` is an Arrow table with one row per live file (`FILES_SCHEMA`); `tombstones` holds the
    removes still inside `delta.deletedFileRetentionDuration` as of when the snapshot was built.
    """

    table_root: str
    version: int
    timestamp: int
    _state: LogState = field(repr=False)
    _built_at: int = field(default_factory=lambda: int(time.time() * 1000), repr=False)

    @property
    def protocol(self) -> Protocol:
        return self._state.protocol

    @property
    def metadata(self) -> Metadata:
        return self._state.metadata

    @property
    def files(self) -> pa.Table:
        return self._state.files

    @property
    def schema(self) -> pa.Schema:
        cached = self.__dict__.get("_schema_cache")
        if cached is None:
            cached = schema_from_json(self.metadata.schema_string)
            object.__setattr__(self, "_schema_cache", cached)
        return cached

    @property
    def column_mapping(self) -> ColumnMapping:
        """Logical vs physical column names of this version (identity unless the mode is name or id)."""
        cached = self.__dict__.get("_column_mapping_cache")
        if cached is None:
            cached = ColumnMapping.of(self.protocol, self.metadata, self.schema)
            object.__setattr__(self, "_column_mapping_cache", cached)
        return cached

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return self.metadata.partition_columns

    @property
    def configuration(self) -> Mapping[str, str]:
        return self.metadata.configuration

    @property
    def config(self) -> TableConfig:
        return TableConfig.from_configuration(self.metadata.configuration)

    @property
    def num_files(self) -> int:
        return int(self._state.files.num_rows)

    @property
    def all_tombstones(self) -> pa.Table:
        """Every remove still recorded in the state, expired or not."""
        return self._state.tombstones

    @property
    def min_file_retention_timestamp(self) -> int:
        return self._built_at - self.config.deleted_file_retention_ms

    @property
    def tombstones(self) -> pa.Table:
        t = self._state.tombstones
        if t.num_rows == 0:
            return t
        ts = t.column("deletion_timestamp")
        return t.filter(pc.fill_null(pc.greater(ts, self.min_file_retention_timestamp), False))

    def app_transaction_version(self, app_id: str) -> int | None:
        entry = self._state.txns.get(app_id)
        return None if entry is None else entry[0]

    def has_app_transaction(self, app_id: str | None, version: int | None) -> bool:
        """Has `app_id` committed `version` (or a later one)? An idempotent write then writes nothing;
        False without an app id (a write that is not idempotent)."""
        if app_id is None or version is None:
            return False
        done = self.app_transaction_version(app_id)
        return done is not None and done >= int(version)

    @property
    def app_transactions(self) -> Mapping[str, int]:
        return {k: v[0] for k, v in self._state.txns.items()}

    @property
    def domain_metadata(self) -> Mapping[str, str]:
        return {k: str(v.get("configuration", "")) for k, v in self._state.domains.items()}

    @property
    def state(self) -> LogState:
        """The replayed log state (for the log and checkpoint machinery)."""
        return self._state

    def __repr__(self) -> str:
        return f"Snapshot(table_root={self.table_root!r}, version={self.version}, files={self.num_files})"
