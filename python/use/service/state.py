"""The service's own state in the data dir: one small JSON file, written atomically, read at start.

Most of what the service knows is rebuilt from the tables at every start: which tables exist and
their properties come from the Delta logs (and later the metastore), so a lost file only loses
history. What no log holds is kept here: when each table's next run is due, failure counts and
backoff, the last run, errors and manual-trigger decisions, a queued manual request (the SQL
statement that asked for it changed no property), and the run that was in progress, which is how
a restart after kill -9 knows to resume it.

The file is replaced atomically (write a temporary file in the same directory, fsync, rename,
fsync the directory), so a crash leaves the previous version or the new one, never a torn file. A
file that cannot be read anyway (edited by hand, another format version) is moved aside with a
warning and the service starts from the tables alone.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from use.service.records import Estimate, GcRecord, LayoutFigures, Progress, Run, RunRecord, TableState

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["STATE_FILE", "FORMAT", "save_states", "load_states", "state_to_dict", "state_from_dict"]

_log = logging.getLogger("use.service.state")

STATE_FILE = "optimization-service.json"
FORMAT = 1

_NESTED: dict[str, type[DataclassInstance]] = {
    "last_run": RunRecord,
    "last_gc": GcRecord,
    "layout": LayoutFigures,
    "estimate": Estimate,
}
_SETTINGS = ("properties", "manual")


def state_to_dict(state: TableState) -> dict[str, Any]:
    """A TableState as JSON-ready values (the plan estimate is not kept: it is redone after a start)."""
    d = asdict(state)
    d.pop("estimate", None)
    for key in _SETTINGS:
        if d[key] is not None:
            d[key] = {k: v for k, v in d[key]}
    if d["run"] is not None:
        d["run"]["settings"] = {k: v for k, v in d["run"]["settings"]}
    return d


_Record = TypeVar("_Record", bound="DataclassInstance")


def _build(cls: type[_Record], d: dict[str, Any]) -> _Record:
    names = {f.name for f in fields(cls)}
    values = {k: v for k, v in d.items() if k in names}
    if "progress" in values and isinstance(values["progress"], dict):
        values["progress"] = _build(Progress, values["progress"])
    return cls(**values)


def state_from_dict(d: dict[str, Any]) -> TableState:
    values = dict(d)
    for key in _SETTINGS:
        if values.get(key) is not None:
            values[key] = tuple(sorted((str(k), str(v)) for k, v in values[key].items()))
    for key, cls in _NESTED.items():
        if values.get(key) is not None:
            values[key] = _build(cls, values[key])
    if values.get("run") is not None:
        run = dict(values["run"])
        run["settings"] = tuple(sorted((str(k), str(v)) for k, v in (run.get("settings") or {}).items()))
        values["run"] = _build(Run, run)
    return _build(TableState, values)


def encode(states: list[TableState] | tuple[TableState, ...]) -> str:
    """The file's content for `states` (deterministic, so unchanged state is not written again)."""
    return json.dumps({"format": FORMAT, "tables": [state_to_dict(s) for s in states]}, sort_keys=True, indent=1)


def save_states(path: str | os.PathLike[str], content: str) -> None:
    """Atomically replace the file at `path` with `content` (see the module docstring)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load_states(path: str | os.PathLike[str]) -> list[TableState]:
    """The saved states; [] if there is no file, or if it cannot be read (then it is moved aside)."""
    target = Path(path)
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"unknown format {data.get('format') if isinstance(data, dict) else type(data).__name__!r}")
        return [state_from_dict(d) for d in data["tables"]]
    except (ValueError, KeyError, TypeError) as exc:
        aside = target.with_name(f"{target.name}.unreadable-{int(time.time())}")
        os.replace(target, aside)
        _log.warning(
            "the service state file %s cannot be read (%s); moved to %s, starting from the tables alone "
            "(schedules come back from the table properties; failure counts and queued manual runs are lost)",
            target,
            exc,
            aside,
        )
        return []
