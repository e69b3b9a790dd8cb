"""DDL on the Delta log for the session catalog: describe, create/register, stage and commit
CTAS/RTAS/REPLACE, ALTER TABLE SET/UNSET TBLPROPERTIES, TRUNCATE.

The log is the truth for a table's schema, partitioning and properties (as in Delta): the JVM
catalog registers names in the metastore only after the log change here succeeded, so a refused
statement changes nothing. Properties are checked and changed as the Python API does
(`use.optimize.properties`: `use.optimization.*` through the optimizer's parser, `delta.*` through
the Delta log's rules, `qbeast.*` refused as the index's own metadata).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from use.delta.actions import remove_actions
from use.delta.columnmapping import column_mapping_mode
from use.delta.commit_options import CommitOptions
from use.delta.log import DeltaLog
from use.delta.log_cache import shared_log
from use.delta.schema import schema_from_json
from use.delta.storage import resolve_table_root
from use.delta.transaction import Transaction
from use.errors import (
    ConfigError,
    IndexColumnError,
    InvalidArgumentError,
    NotAQbeastTableError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from use.insights.lake import DELTA_PROVIDERS
from use.optimize.properties import alter_properties as alter
from use.optimize.properties import check_configuration
from use.qbeast.convert import DEFAULT_CUBE_SIZE, index_column_names
from use.qbeast.reader import stored_schema
from use.qbeast.revision import (
    COLUMN_STATS_KEY,
    COLUMNS_TO_INDEX_KEY,
    CUBE_SIZE_KEY,
    TABLE_FORMAT_KEY,
    configuration_with_revision,
    cube_size_option,
    is_qbeast,
    latest_revision_id,
    revisions_from_configuration,
    split_column_specs,
    staging_revision,
)
from use.sql.protocol import (
    AbandonRequest,
    AlterPropertiesRequest,
    AlterSchemaRequest,
    CommitStagedRequest,
    CreateReply,
    CreateRequest,
    CreateSpec,
    DescribeRequest,
    Done,
    Providers,
    ProvidersRequest,
    StageReply,
    StageRequest,
    TableDescription,
    TableReply,
    TruncateRequest,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from use.delta.snapshot import Snapshot

#: The table providers USE serves (the session catalog's Delta and Qbeast tables, which the shim
#: asks for: `providers`), and those a procedure's `<provider>.`/path`` argument may name (parquet:
#: a directory to convert).
PROVIDERS: tuple[str, ...] = tuple(sorted(DELTA_PROVIDERS))
PATH_PROVIDERS: tuple[str, ...] = (*PROVIDERS, "parquet")

# OPTIONS (...) each provider accepts, by lower-case name.
PROVIDER_OPTIONS: Mapping[str, Mapping[str, str]] = {
    "qbeast": {"columnstoindex": COLUMNS_TO_INDEX_KEY, "cubesize": CUBE_SIZE_KEY, "columnstats": COLUMN_STATS_KEY},
    "delta": {},
}


# --- tables and their logs (each root's shared DeltaLog: `use.delta.log_cache`) ----------------------------------------------------------------------


def table_root(location: str) -> str:
    """A table location (path or file: URI) as the absolute local path the log lives under."""
    return resolve_table_root(location)


def snapshot_of(location: str, version: int | None = None, timestamp_ms: int | None = None, *, by_path: bool = False) -> Snapshot:
    """The snapshot a SQL statement reads: the latest, a version, or the one current at a time.
    `by_path`: the statement names the table by its path (`delta.`/p``, `format("delta").load(p)`),
    not by a metastore entry, which changes what a missing table means."""
    root = table_root(location)
    log = shared_log(root)
    if not log.exists():
        if by_path:
            raise TableNotFoundError(
                f"no Delta table at {root}: the path holds no _delta_log with commits; check the path, or write a "
                'table there first (df.write.format("delta").save(path), or CREATE TABLE <name> USING delta LOCATION '
                "'<path>' AS SELECT ...)"
            )
        raise TableNotFoundError(
            f"no Delta table at {root}: the location holds no _delta_log with commits (the data was removed or "
            f"moved); DROP TABLE to unregister it, or register the table where it is now with CREATE TABLE ... LOCATION"
        )
    if timestamp_ms is not None:
        # Delta's time travel: a time after the last commit is refused, not read as the latest
        return log.snapshot(timestamp=int(timestamp_ms), after_latest=False)
    return log.snapshot(version=None if version is None else int(version))


def describe_table(snapshot: Snapshot, provider: str) -> TableDescription:
    """What the catalog serves for a table: the log's schema, partitioning and properties; under
    Delta column mapping also the schema its files are read with (`stored_schema`: physical names,
    field ids in mode `id`) and the mode."""
    sizes = snapshot.files.column("size")
    conf = dict(snapshot.configuration)
    mapping = snapshot.column_mapping
    return TableDescription(
        root=snapshot.table_root,
        uri=Path(snapshot.table_root).as_uri(),
        provider=provider,
        version=snapshot.version,
        schema=snapshot.metadata.schema_string,
        partition_columns=tuple(snapshot.partition_columns),
        configuration=conf,
        description=snapshot.metadata.description,
        is_qbeast=is_qbeast(conf),
        num_files=snapshot.num_files,
        size_in_bytes=int(pc.sum(sizes).as_py() or 0) if snapshot.num_files else 0,
        stored_schema=stored_schema(mapping).json() if mapping.active else None,
        column_mapping=mapping.mode if mapping.active else "none",
    )


def latest(root: str, provider: str | None) -> TableReply:
    """The table at `root` as it is now, after a change."""
    return TableReply(describe_table(shared_log(root).snapshot(), provider or "delta"))


def describe(spark: SparkSession, req: DescribeRequest, args: list[Any]) -> TableDescription:
    snap = snapshot_of(req.table.root, req.version, req.timestamp_ms, by_path=req.table.by_path)
    return describe_table(snap, req.table.provider or "delta")


def providers(spark: SparkSession, req: ProvidersRequest, args: list[Any]) -> Providers:
    return Providers(PROVIDERS, PATH_PROVIDERS)


# --- validation --------------------------------------------------------------------------------------


def check_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """The TBLPROPERTIES of a new (or replaced) table, checked as every property change is."""
    conf = {str(k): str(v) for k, v in properties.items()}
    check_configuration(conf)
    return conf


def provider_options(provider: str, options: Mapping[str, str]) -> dict[str, str]:
    """OPTIONS (...) of a CREATE statement, by their canonical names; an unknown one is an error."""
    known = PROVIDER_OPTIONS.get(provider)
    if known is None:
        raise InvalidArgumentError(f"unknown provider {provider!r}: USE serves USING delta and USING qbeast")
    out: dict[str, str] = {}
    for key, value in options.items():
        canonical = known.get(key.lower())
        if canonical is None:
            accepted = ", ".join(sorted(known.values())) or "none"
            raise InvalidArgumentError(f"unknown option {key!r} for USING {provider} (accepted: {accepted})")
        out[canonical] = str(value)
    return out


def table_settings(
    provider: str, properties: Mapping[str, str], options: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """A CREATE statement's TBLPROPERTIES and OPTIONS, with a Qbeast table's index options taken from
    either: qbeast-spark's `CREATE TABLE t (...) USING qbeast TBLPROPERTIES ('columnsToIndex'='id')`
    declares the index as its OPTIONS do, so those keys move to the options (the writer then keeps
    them as properties, in step with the revisions); `tableFormat` is the writer's own and may only
    say `delta`. Refused when both clauses give one option different values."""
    options = provider_options(provider, options)
    if provider != "qbeast":
        return {str(k): str(v) for k, v in properties.items()}, options
    known = PROVIDER_OPTIONS[provider]
    props: dict[str, str] = {}
    for key, value in properties.items():
        key, value = str(key), str(value)
        if key.lower() == TABLE_FORMAT_KEY.lower():
            if value.strip().lower() != "delta":
                raise ConfigError(
                    f"TBLPROPERTIES {key}={value!r}: a Qbeast table's format is 'delta' (its index lives in the Delta "
                    "log); omit the property"
                )
            continue
        canonical = known.get(key.lower())
        if canonical is None:
            props[key] = value
            continue
        if canonical in options and options[canonical] != value:
            raise InvalidArgumentError(
                f"{canonical} is given twice, OPTIONS ({canonical}={options[canonical]!r}) and TBLPROPERTIES "
                f"({key}={value!r}); give it once"
            )
        options[canonical] = value
    return props, options


def spark_schema_to_arrow(schema_json: str) -> pa.Schema:
    """A Spark schema (StructType JSON, the same format as Delta's schemaString) as Arrow."""
    return schema_from_json(schema_json)


def _cube_size(value: str | None) -> int:
    return int(cube_size_option(value, DEFAULT_CUBE_SIZE))  # type: ignore[arg-type]


def new_configuration(
    provider: str,
    properties: Mapping[str, str],
    options: Mapping[str, str],
    schema: pa.Schema,
    root: str,
    *,
    require_columns: bool = True,
) -> dict[str, str]:
    """The properties of a new table: the checked TBLPROPERTIES, and for a Qbeast table the staging
    revision of its indexed columns (the first write indexes them with the user's column specs,
    kept in `columnsToIndex`). `require_columns=False` checks a CTAS before its write options
    (`df.write.option("columnsToIndex", ...)`) are known."""
    conf = check_properties(properties)
    if provider != "qbeast":
        return conf

    spec = options.get(COLUMNS_TO_INDEX_KEY)
    if not spec and not require_columns:
        _cube_size(options.get(CUBE_SIZE_KEY))
        return conf
    if not spec:
        raise IndexColumnError(
            "a Qbeast table needs the columns to index: add OPTIONS ('columnsToIndex'='x,y') (and optionally 'cubeSize')"
        )
    names = index_column_names(spec, schema, f"the table at {root}")
    revision = staging_revision(root, names, _cube_size(options.get(CUBE_SIZE_KEY)), int(time.time() * 1000))
    return configuration_with_revision(
        conf, revision, extra={COLUMN_STATS_KEY: options.get(COLUMN_STATS_KEY, "")}, columns_to_index=spec
    )


def _check_partitioning(provider: str, partition_columns: list[str], schema: pa.Schema) -> None:
    if partition_columns and provider == "qbeast":
        raise InvalidArgumentError(
            "Qbeast tables cannot be partitioned (the OTree index replaces partitioning); drop PARTITIONED BY"
        )
    for c in partition_columns:
        if c not in schema.names:
            raise InvalidArgumentError(f"partition column {c!r} is not a column of the table ({', '.join(schema.names)})")


def _check_empty_location(root: str, name: str) -> None:
    if os.path.isdir(root) and os.listdir(root):
        raise InvalidArgumentError(
            f"cannot create {name} at {root}: the location is not empty and holds no Delta table; choose an empty "
            f"location (or none, for a managed table)"
        )


def _same_schema(given: pa.Schema, table: pa.Schema) -> bool:
    return [(f.name.lower(), f.type) for f in given] == [(f.name.lower(), f.type) for f in table]


def _check_registration(spec: CreateSpec, snap: Snapshot, options: Mapping[str, str]) -> None:
    """CREATE TABLE ... LOCATION of an existing table: what the statement says must match the log."""
    name, root, provider = spec.name, snap.table_root, spec.provider
    where = f"the table at {root}"
    if spec.schema:
        given = spark_schema_to_arrow(spec.schema)
        if not _same_schema(given, snap.schema):
            raise SchemaMismatchError(
                f"the columns given for {name} ({', '.join(f'{f.name} {f.type}' for f in given)}) differ from {where} "
                f"({', '.join(f'{f.name} {f.type}' for f in snap.schema)}); omit the column list to take the table's"
            )
        if list(spec.partition_columns) != list(snap.partition_columns):
            raise SchemaMismatchError(
                f"PARTITIONED BY ({', '.join(spec.partition_columns)}) differs from {where}'s partitioning "
                f"({', '.join(snap.partition_columns)}); omit it to take the table's"
            )
    for key, value in spec.properties.items():
        if snap.configuration.get(key) != value:
            raise ConfigError(
                f"TBLPROPERTIES {key}={value!r} differs from {where} ({key}={snap.configuration.get(key)!r}); omit "
                f"TBLPROPERTIES to register the table, then ALTER TABLE {name} SET TBLPROPERTIES"
            )
    qbeast = is_qbeast(snap.configuration)
    if provider == "qbeast" and not qbeast:
        raise NotAQbeastTableError(
            f"{where} is a Delta table without Qbeast metadata: register it USING delta, or convert it first "
            f"(QbeastTable.convert(spark, path, columns_to_index))"
        )
    if qbeast and options:
        revision = revisions_from_configuration(snap.configuration)[latest_revision_id(snap.configuration)]
        if COLUMNS_TO_INDEX_KEY in options:
            given_cols = [c for c, _ in split_column_specs(options[COLUMNS_TO_INDEX_KEY])]
            if given_cols != list(revision.columns):
                raise IndexColumnError(
                    f"columnsToIndex {options[COLUMNS_TO_INDEX_KEY]!r} differs from the columns {where} is indexed on "
                    f"({', '.join(revision.columns)}); omit the option to register the table"
                )
        if CUBE_SIZE_KEY in options and _cube_size(options[CUBE_SIZE_KEY]) != revision.desired_cube_size:
            raise IndexColumnError(
                f"cubeSize {options[CUBE_SIZE_KEY]} differs from {where}'s cube size ({revision.desired_cube_size}); "
                f"omit the option to register the table"
            )


# --- CREATE ------------------------------------------------------------------------------------------


def create(spark: SparkSession, req: CreateRequest, args: list[Any], commit_options: CommitOptions) -> CreateReply:
    """CREATE TABLE: register the table at LOCATION (its schema from the log), or create a new one
    (one commit)."""
    spec = req.spec
    root = table_root(spec.location)
    provider, name = spec.provider, spec.name
    properties, options = table_settings(provider, spec.properties, spec.options)
    spec = replace(spec, properties=properties, options=options)
    log = shared_log(root)
    if log.exists():
        if not spec.location_given:
            raise TableAlreadyExistsError(
                f"cannot create the managed table {name}: its location {root} already holds a Delta table; remove it, "
                f"or register it as an external table with CREATE TABLE {name} USING {provider} LOCATION '{root}'"
            )
        snap = log.snapshot()
        _check_registration(spec, snap, options)
        return CreateReply(describe_table(snap, provider), created=False)
    if not spec.schema:
        if spec.by_path:
            raise TableNotFoundError(
                f"no Delta table at {root} (no _delta_log with commits there) and no columns to create {name} with; "
                f"give the columns (CREATE TABLE {name} (id BIGINT, ...) USING {provider}) or create it from a query "
                f"(CREATE TABLE {name} USING {provider} AS SELECT ...)"
            )
        raise TableNotFoundError(
            f"no Delta table at LOCATION {root} to register as {name} (no _delta_log with commits there); give the "
            f"columns to create a new table, or point LOCATION at an existing table"
        )
    _check_empty_location(root, name)
    schema = spark_schema_to_arrow(spec.schema)
    parts = list(spec.partition_columns)
    _check_partitioning(provider, parts, schema)
    conf = new_configuration(provider, properties, options, schema, root)
    created_dir = not os.path.exists(root)
    try:
        snap = log.create(
            schema, parts, configuration=conf, description=spec.comment, managed=spec.managed, commit_options=commit_options
        )
    except BaseException:
        if created_dir:
            _remove_created(root)
        raise
    return CreateReply(describe_table(snap, provider), created=True)


def _remove_created(root: str) -> None:
    shutil.rmtree(root, ignore_errors=True)


def abandon(spark: SparkSession, req: AbandonRequest, args: list[Any]) -> Done:
    """Undo a `create` whose metastore registration failed: the new table's directory goes."""
    root = req.table.root
    log = shared_log(root)
    if log.exists() and log.snapshot().version == 0:
        _remove_created(root)
    return Done()


# --- CTAS / RTAS / REPLACE ----------------------------------------------------------------------------


def stage(spark: SparkSession, req: StageRequest, args: list[Any]) -> StageReply:
    """Check a CTAS/RTAS/REPLACE before anything is written; the checked spec comes back and is
    executed by `write.write` (with data) or `commit_staged` (without)."""
    spec = req.spec
    root = table_root(spec.location)
    provider, name = spec.provider, spec.name
    properties, options = table_settings(provider, spec.properties, spec.options)
    schema = spark_schema_to_arrow(staged_schema(spec))
    parts = list(spec.partition_columns)
    _check_partitioning(provider, parts, schema)
    log = shared_log(root)
    if spec.mode == "replace":
        if not log.exists():
            raise TableNotFoundError(f"cannot replace {name}: its location {root} holds no Delta table any more")
        options = replacement_options(provider, options, log.snapshot())
    else:
        if log.exists():
            raise TableAlreadyExistsError(
                f"cannot create {name} at {root}: the location already holds a Delta table; register it with CREATE "
                f"TABLE {name} USING {provider} LOCATION '{root}' and INSERT INTO it"
            )
        _check_empty_location(root, name)
    new_configuration(provider, properties, options, schema, root, require_columns=spec.mode == "replace")
    return StageReply(replace(spec, root=root, properties=properties, options=options))


def staged_schema(spec: CreateSpec) -> str:
    """The columns of a staged table (a CTAS/RTAS/REPLACE always gives them)."""
    if spec.schema is None:
        raise InvalidArgumentError(f"internal: {spec.name} was staged without its columns")
    return spec.schema


def staged_root(spec: CreateSpec) -> str:
    """The location of a table `stage` checked."""
    if spec.root is None:
        raise InvalidArgumentError(f"internal: {spec.name} was not staged")
    return spec.root


def write_options(provider: str, staged: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """A CTAS's table options: OPTIONS (...) of the statement, then the DataFrameWriter's options
    (`saveAsTable` passes them as write options) that the provider knows; others are the write's.
    One option given both ways with different values is refused (neither would be right to drop)."""
    known = PROVIDER_OPTIONS.get(provider, {})
    out = dict(staged)
    for key, value in given.items():
        canonical = known.get(key.lower())
        if canonical is None:
            continue
        if canonical in out and out[canonical] != str(value):
            raise InvalidArgumentError(
                f"{canonical} is given twice, as the table's ({canonical}={out[canonical]!r}, OPTIONS or TBLPROPERTIES) "
                f"and as a write option ({key}={value!r}); give it once"
            )
        out[canonical] = str(value)
    return out


def replacement_options(provider: str, options: Mapping[str, str], current: Snapshot) -> dict[str, str]:
    """A Qbeast table replaced without columnsToIndex keeps indexing the columns it had."""
    out = dict(options)
    if provider == "qbeast" and COLUMNS_TO_INDEX_KEY not in out:
        previous = current.configuration.get(COLUMNS_TO_INDEX_KEY)
        if previous:
            out[COLUMNS_TO_INDEX_KEY] = previous
    return out


def replace_metadata(current: Snapshot, spec: CreateSpec, configuration: Mapping[str, str]) -> Any:
    """The `metaData` of a replaced table: the statement's schema, partitioning, properties and
    comment, the table's identity kept (its history stays)."""
    return replace(
        current.metadata,
        schema_string=json.dumps(json.loads(staged_schema(spec)), separators=(",", ":")),
        partition_columns=tuple(spec.partition_columns),
        configuration=dict(configuration),
        description=spec.comment,
    )


def protocol_upgrade(current: Snapshot, schema: pa.Schema, configuration: Mapping[str, str]) -> Any:
    """The protocol a replaced table needs, when it is more than the one it has (None otherwise)."""
    needed = DeltaLog._protocol_for(schema, configuration)
    have = current.protocol
    if (
        needed.min_reader_version <= have.min_reader_version
        and needed.min_writer_version <= have.min_writer_version
        and set(needed.reader_features or ()) <= set(have.reader_features or ())
        and set(needed.writer_features or ()) <= set(have.writer_features or ())
    ):
        return None
    return needed


def commit_staged(spark: SparkSession, req: CommitStagedRequest, args: list[Any], commit_options: CommitOptions) -> TableReply:
    """REPLACE TABLE / CREATE OR REPLACE TABLE without a query: one commit (a new table, or the new
    metadata with every file removed)."""
    spec = req.spec
    root, provider = staged_root(spec), spec.provider
    schema = spark_schema_to_arrow(staged_schema(spec))
    conf = new_configuration(provider, spec.properties, spec.options, schema, root)
    log = shared_log(root)
    if spec.mode != "replace":
        snap = log.create(
            schema,
            list(spec.partition_columns),
            configuration=conf,
            description=spec.comment,
            managed=spec.managed,
            commit_options=commit_options,
        )
        return TableReply(describe_table(snap, provider))
    txn = replacement(log, log.snapshot(), spec, schema, conf, commit_options)
    txn.commit("REPLACE TABLE", {"isManaged": json.dumps(spec.managed), "properties": json.dumps(conf)})
    return latest(root, provider)


def replacement(
    log: DeltaLog, current: Snapshot, spec: CreateSpec, schema: pa.Schema, conf: Mapping[str, str], commit_options: CommitOptions
) -> Any:
    """The transaction that replaces a table (REPLACE, RTAS): the protocol it needs, its new
    metadata, every live file removed; the caller adds the new files and commits."""
    txn = Transaction(log, current, commit_options=commit_options)
    protocol = protocol_upgrade(current, schema, conf)
    if protocol is not None:
        txn.add(protocol)
    txn.add(replace_metadata(current, spec, conf))
    txn.read_whole_table()
    if current.num_files:
        txn.add(*remove_actions(current.files, data_change=True))
    return txn


# --- ALTER / TRUNCATE ---------------------------------------------------------------------------------


def alter_properties(spark: SparkSession, req: AlterPropertiesRequest, args: list[Any]) -> TableReply:
    """ALTER TABLE SET/UNSET TBLPROPERTIES: `use.optimize.properties.alter_properties` (one metaData
    commit, nothing when nothing changes). Keys the table lacks are skipped: Spark's catalog API
    hands a v2 catalog `RemoveProperty` changes without the statement's IF EXISTS, and Spark itself
    does not refuse a missing key, so UNSET of a missing key is a no-op as in Spark's own v2 tables.
    The comment is the table's description."""
    snap = snapshot_of(req.table.root)
    to_set = dict(req.set)
    to_unset = [k for k in req.unset if k in snap.configuration or k == "comment"]
    if "comment" in to_set or "comment" in to_unset:
        _set_description(snap, to_set.pop("comment", None))
        to_unset = [k for k in to_unset if k != "comment"]
    if to_set or to_unset:
        alter(snap.table_root, to_set, to_unset)
    return latest(snap.table_root, req.table.provider)


def check_schema_change(snap: Snapshot, schema: pa.Schema, what: str) -> None:
    """A new schema USE can commit to the table (`what` names the statement and the table): refused
    on a table with Delta column mapping (a new column needs a physical name and id USE does not
    assign yet) and when the schema needs a table feature the table's protocol does not have."""
    if column_mapping_mode(snap.protocol, snap.metadata) != "none":
        raise UnsupportedFeatureError(
            f"{what}: the table uses Delta column mapping (delta.columnMapping.mode), whose new columns need a physical "
            "name and id USE does not assign yet; add the column with Delta itself, or rewrite the table (CREATE OR "
            "REPLACE TABLE ... AS SELECT)",
            feature="columnMapping",
        )
    if protocol_upgrade(snap, schema, snap.configuration) is not None:
        raise UnsupportedFeatureError(
            f"{what}: the new schema needs a table feature its protocol does not have (e.g. TIMESTAMP_NTZ needs "
            "timestampNtz); rewrite the table with the column (CREATE OR REPLACE TABLE ... AS SELECT)"
        )


def alter_schema(spark: SparkSession, req: AlterSchemaRequest, args: list[Any]) -> TableReply:
    """ALTER TABLE ... ADD COLUMNS / ALTER COLUMN ... COMMENT: the schema Spark computed for the
    statement (`req.schema`, from the table as of `req.read_version`) committed as one metaData
    action, `ADD COLUMNS` (parameters: the columns, as Delta writes them) or `CHANGE COLUMN`. The rows
    already written read NULL for a new column (their files do not have it, and their statistics say
    nothing of it, so no file is skipped on it).

    Refused, nothing written: a table with Delta column mapping (a new column needs a physical name
    and id, which USE does not assign yet), a column type the table's protocol does not allow (e.g.
    TIMESTAMP_NTZ on a table without that feature), and a concurrent change of the table's metadata."""
    # the version Spark computed the schema from: a commit since is the transaction's to check (a
    # concurrent schema change is a conflict, an append is not)
    snap = snapshot_of(req.table.root, version=req.read_version)
    schema_string = json.dumps(json.loads(req.schema), separators=(",", ":"))
    check_schema_change(snap, spark_schema_to_arrow(schema_string), f"ALTER TABLE on {snap.table_root}")
    added = list(req.added)
    txn = Transaction(shared_log(snap.table_root), snap)
    txn.add(replace(snap.metadata, schema_string=schema_string))
    if added:
        by_name = {f["name"]: f for f in json.loads(schema_string)["fields"]}
        columns = [{"column": by_name.get(c, {"name": c})} for c in added]
        txn.commit("ADD COLUMNS", {"columns": json.dumps(columns, separators=(",", ":"))})
    else:
        txn.commit("CHANGE COLUMN", {})
    return latest(snap.table_root, req.table.provider)


def _set_description(snap: Snapshot, description: str | None) -> None:
    """COMMENT ON TABLE (or a `comment` property): the `metaData.description`, one commit."""
    if description == snap.metadata.description:
        return
    txn = Transaction(shared_log(snap.table_root), snap)
    txn.add(replace(snap.metadata, description=description))
    txn.commit("SET TBLPROPERTIES", {"properties": json.dumps({"comment": description})})


def truncate(spark: SparkSession, req: TruncateRequest, args: list[Any]) -> Done:
    """TRUNCATE TABLE: one commit removing every live file (history and metadata stay)."""
    snap = snapshot_of(req.table.root)
    if snap.num_files:
        txn = Transaction(shared_log(snap.table_root), snap)
        txn.read_whole_table()
        txn.add(*remove_actions(snap.files, data_change=True))
        txn.commit("TRUNCATE", {})
    return Done()
