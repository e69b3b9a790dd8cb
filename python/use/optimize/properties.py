"""Setting and unsetting table properties: one metaData commit, every value checked first.

Python (`QbeastTable.set_properties`, `DeltaTable.set_properties`, `unset_properties`) and the
command line (`use properties --set k=v --unset k`) both come here, so a bad value fails the same way
on both: `use.optimization.*` keys through the one optimization config parser
(`OptimizationConfig.from_properties`, the same check the optimizer runs), `delta.*` keys through the
Delta log's own rules (`use.delta.snapshot.validate_configuration`), and `qbeast.*` keys are refused
because they are the index's own metadata (revisions, written by the writer). The whole resulting
configuration is checked before the commit, so nothing is changed when any value is bad; a call
that changes nothing commits nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from use.errors import CLI, PYTHON, ConfigError, InvalidArgumentError

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
    from use.delta import DeltaLog

    return dict(sorted(DeltaLog.for_path(path).snapshot().metadata.configuration.items()))


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise InvalidArgumentError(f"a table property key must be a non-empty string, got {key!r}")
    if key.startswith(QBEAST_PREFIX):
        raise ConfigError(
            f"table property {key!r} is Qbeast index metadata, written by the Qbeast writer; it cannot be set or "
            "unset by hand (write or convert the table to change its index)"
        )
    return key


def check_configuration(conf: Mapping[str, str], previous: Mapping[str, str] | None = None) -> None:
    """Check a table's whole new configuration: `use.optimization.*` with the optimizer's own parser,
    `delta.*` with the Delta log's rules, no hand-made `qbeast.*` key (judged against `previous`)."""
    from use.delta.snapshot import validate_configuration
    from use.optimize.config import OptimizationConfig

    old = previous or {}
    for k, v in conf.items():
        if old.get(k) != v:
            _check_key(k)
    OptimizationConfig.from_properties(conf)
    validate_configuration(dict(conf), dict(old))


def alter_properties(
    path: str, set_values: Mapping[str, Any] | None = None, unset_keys: Iterable[str] | None = None
) -> int | None:
    """Set `set_values` and remove `unset_keys` in one metaData commit; the new version, or None when
    nothing changes. Unsetting a key the table does not have is an error naming the keys it has."""
    from use.delta import DeltaLog

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
    check_configuration(conf, current)
    from dataclasses import replace

    txn = log.start_transaction()
    txn.add(replace(snap.metadata, configuration=conf))
    if new:
        params = {"properties": json.dumps(new, sort_keys=True)}
        if gone:
            params["removedProperties"] = json.dumps(sorted(gone))
        return txn.commit("SET TBLPROPERTIES", params)
    return txn.commit("UNSET TBLPROPERTIES", {"properties": json.dumps(sorted(gone)), "ifExists": "false"})
