"""Setting and unsetting table properties: one metaData commit, every value checked first.

Python (`QbeastTable.set_properties`, `DeltaTable.set_properties`, `unset_properties`) and the
command line (`use properties --set k=v --unset k`) and SQL (`ALTER TABLE ... SET TBLPROPERTIES`,
the TBLPROPERTIES of a CREATE) all come here, so a bad value fails the same way everywhere:
`use.optimization.*` keys through the one optimization config parser
(`OptimizationConfig.from_properties`, the same check the optimizer runs), the other `use.*` keys
(`use.gc.enabled`, `use.qbeast.revisionMargin`) through the parsers their users call, and an unknown
`use.*` key is refused (a typo such as `use.gc.enable` would otherwise be silently ignored);
`delta.*` keys go through the Delta log's own rules (`use.delta.snapshot.validate_configuration`);
`qbeast.*` keys and the Qbeast format's own keys (`columnsToIndex`, `cubeSize`, `columnStats`,
`tableFormat`) are refused because the writer keeps them (set by hand they made every later append
fail). Values that name parts of the table (a revision, columns) are checked against the table when
it is known. The whole resulting configuration is checked before the commit, so nothing is changed
when any value is bad; a call that changes nothing commits nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from use.delta import DeltaLog
from use.delta.snapshot import protocol_with_change_data_feed, validate_configuration
from use.errors import CLI, PYTHON, ConfigError, InvalidArgumentError
from use.optimize.config import OptimizationConfig, did_you_mean, gc_enabled
from use.optimize.keys import GC_ENABLED_KEY, PREFIX
from use.optimize.planner import check_revision_id
from use.optimize.strategies.overlap import resolve_cluster_key
from use.optimize.strategies.zorder import resolve_key_columns
from use.qbeast.revision import (
    COLUMN_STATS_KEY,
    COLUMNS_TO_INDEX_KEY,
    CUBE_SIZE_KEY,
    TABLE_FORMAT_KEY,
    is_qbeast,
    revisions_from_configuration,
)
from use.qbeast.revision_change import REVISION_MARGIN_PROPERTY, parse_revision_margin

#: Keys the Qbeast format owns (revisions and their bookkeeping): never set or unset by hand.
QBEAST_PREFIX = "qbeast."

__all__ = ["table_properties", "alter_properties", "check_configuration", "property_text", "parse_assignment"]


def property_text(value: Any) -> str:
    """A property value as Delta stores it: strings as they are, booleans `true`/`false`, numbers as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    raise InvalidArgumentError(f"a table property value must be a string, number or boolean, got {value!r}")


def parse_assignment(text: str) -> tuple[str, str]:
    """`key=value` (a command-line `--set`) -> (key, value)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise InvalidArgumentError(f"--set takes key=value, e.g. --set use.optimization.bytes-per-iter=100000000; got {text!r}")
    return key.strip(), value.strip()


def table_properties(path: str) -> dict[str, str]:
    """The table's properties (`metaData.configuration`), sorted by key."""
    return dict(sorted(DeltaLog.for_path(path).snapshot().metadata.configuration.items()))


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise InvalidArgumentError(f"a table property key must be a non-empty string, got {key!r}")
    if key.startswith(QBEAST_PREFIX):
        raise ConfigError(
            f"table property {key!r} is Qbeast index metadata, written by the Qbeast writer; it cannot be set or "
            "unset by hand (write or convert the table to change its index)"
        )
    if key.lower() in _INDEX_OPTION_KEYS:
        raise ConfigError(
            f"table property {key!r} is an option of the Qbeast index, which the Qbeast writer keeps in sync with the "
            "table's revisions; it cannot be set or unset by hand. Give it as a write option instead: OPTIONS (...) of "
            "CREATE TABLE ... USING qbeast, or .option(...) of an overwrite (df.write.format('qbeast').mode('overwrite')"
            ".option('columnsToIndex', 'a,b')), which re-indexes the table"
        )
    return key


def _index_option_keys() -> frozenset[str]:
    return frozenset(k.lower() for k in (COLUMNS_TO_INDEX_KEY, CUBE_SIZE_KEY, COLUMN_STATS_KEY, TABLE_FORMAT_KEY))


_INDEX_OPTION_KEYS = _index_option_keys()
USE_PREFIX = "use."


def _other_use_keys() -> dict[str, Any]:
    """The `use.*` table properties outside `use.optimization.*`, each with the parser its user runs."""
    return {
        GC_ENABLED_KEY: lambda conf: gc_enabled(conf),
        REVISION_MARGIN_PROPERTY: lambda conf: parse_revision_margin(conf[REVISION_MARGIN_PROPERTY], REVISION_MARGIN_PROPERTY),
    }


def _check_use_keys(conf: Mapping[str, str], changed: Iterable[str]) -> None:
    """The changed `use.*` keys outside `use.optimization.*` (which the optimization parser owns):
    each known one parsed as its user parses it, an unknown one refused with the known ones."""
    others = _other_use_keys()
    for key in sorted(changed):
        if not key.startswith(USE_PREFIX) or key.startswith(PREFIX) or key not in conf:
            continue
        check = others.get(key)
        if check is None:
            raise ConfigError(
                f"unknown table property {key!r}{did_you_mean(key, sorted(others))}; the use.* properties are "
                f"{', '.join(sorted(others))} and the {PREFIX}* keys (docs/configuration.md); fix the key, or unset it"
            )
        check(conf)


def _check_against_table(conf: Mapping[str, str], config: OptimizationConfig, changed: Iterable[str], snapshot: Any) -> None:
    """Changed values that name parts of the table: a revision it has, columns of its schema (with
    the checks the planner and the strategies run, `check_revision_id`, `resolve_key_columns`,
    `resolve_cluster_key`); checking here keeps a bad value out of the table, where it made every
    later optimization (and the service's runs) fail. `config` is `conf` parsed."""
    changed = set(changed)
    revisions = revisions_from_configuration(conf) if is_qbeast(conf) else None
    for key, value in (("revision-id", config.revision_id), ("autoOptimize.revisionId", config.auto_optimize_revision_id)):
        if PREFIX + key in changed and value is not None:
            check_revision_id(value, PREFIX + key, revisions, snapshot.table_root)
    if PREFIX + "zorder-by" in changed and config.zorder_by:
        resolve_key_columns(snapshot, config.zorder_by)
    if PREFIX + "overlap.cluster-key" in changed and config.overlap_cluster_key:
        resolve_cluster_key(snapshot.schema, config.overlap_cluster_key)


def check_configuration(conf: Mapping[str, str], previous: Mapping[str, str] | None = None, snapshot: Any = None) -> None:
    """Check a table's whole new configuration: `use.optimization.*` with the optimizer's own parser,
    the other `use.*` keys with theirs, `delta.*` with the Delta log's rules, no hand-made `qbeast.*`
    or index-option key (judged against `previous`); with the table's `snapshot`, the changed values
    that name its revisions or columns."""
    old = previous or {}
    changed = [k for k, v in conf.items() if old.get(k) != v]
    for k in changed:
        _check_key(k)
    config = OptimizationConfig.from_properties(conf)
    _check_use_keys(conf, changed)
    validate_configuration(dict(conf), dict(old))
    if snapshot is not None:
        _check_against_table(conf, config, changed, snapshot)


def alter_properties(
    path: str, set_values: Mapping[str, Any] | None = None, unset_keys: Iterable[str] | None = None
) -> int | None:
    """Set `set_values` and remove `unset_keys` in one metaData commit; the new version, or None when
    nothing changes. Unsetting a key the table does not have is an error naming the keys it has."""
    if set_values is not None and not isinstance(set_values, Mapping):
        raise InvalidArgumentError(f"properties to set must be a mapping of key -> value, got {type(set_values).__name__}")
    if isinstance(unset_keys, str):
        raise InvalidArgumentError(f"keys to unset must be a list of keys, not the single string {unset_keys!r}")
    new = {_check_key(k): property_text(v) for k, v in (set_values or {}).items()}
    gone = [_check_key(k) for k in (unset_keys or ())]
    both = sorted(set(new) & set(gone))
    if both:
        raise InvalidArgumentError(f"{', '.join(both)} cannot be both set and unset in one call")
    if not new and not gone:
        raise InvalidArgumentError(
            "nothing to change: give properties to set or keys to unset",
            hints={
                PYTHON: "e.g. set_properties({'use.optimization.bytes-per-iter': 100_000_000})",
                CLI: "e.g. --set use.optimization.bytes-per-iter=100000000 or --unset KEY (no flags lists them)",
            },
        )
    log = DeltaLog.for_path(path)
    snap = log.snapshot()
    current = dict(snap.metadata.configuration)
    missing = [k for k in gone if k not in current]
    if missing:
        have = ", ".join(sorted(current)) or "none"
        raise ConfigError(f"cannot unset {', '.join(missing)}: the table at {path} has no such property (it has: {have})")
    conf = {k: v for k, v in current.items() if k not in gone}
    conf.update(new)
    if conf == current:
        return None
    check_configuration(conf, current, snap)

    txn = log.start_transaction()
    txn.add(replace(snap.metadata, configuration=conf))
    if conf.get("delta.enableChangeDataFeed", "false").strip().lower() == "true":
        upgraded = protocol_with_change_data_feed(snap.protocol)  # as Delta upgrades it when the feed is turned on
        if upgraded is not None:
            txn.add(upgraded)
    if new:
        params = {"properties": json.dumps(new, sort_keys=True)}
        if gone:
            params["removedProperties"] = json.dumps(sorted(gone))
        return txn.commit("SET TBLPROPERTIES", params)
    return txn.commit("UNSET TBLPROPERTIES", {"properties": json.dumps(sorted(gone)), "ifExists": "false"})
