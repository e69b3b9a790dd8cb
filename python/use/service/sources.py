"""Table sources over storage: tables found by location, properties read from each Delta log.

`LocationSource` is the source the service has before the metastore is wired in: a list of table
paths and/or directories holding tables (a warehouse: `<dir>/<table>` and `<dir>/<db>.db/<table>`).
Properties come from each log's `metaData.configuration`, the truth for table properties (as in
Delta: SQL, delta-rs and the Python API all commit them there). `DeltaLog` objects are kept per
location so an unchanged log is not replayed again at every refresh.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence

from use.delta import DeltaLog
from use.delta.listing import LOG_DIR_NAME
from use.delta.log_cache import forget, shared_log
from use.delta.storage import resolve_table_root
from use.errors import InvalidArgumentError
from use.service.registry import TableInfo

__all__ = ["LocationSource", "delta_log", "forget_log", "read_table"]

_log = logging.getLogger("use.service.sources")

# A warehouse nests tables at most this deep (<dir>/<db>.db/<table>); deeper directories are data.
_MAX_DEPTH = 2


def delta_log(location: str) -> DeltaLog:
    """The service's `DeltaLog` of a table: the process's shared one (`use.delta.log_cache`), so its
    snapshot cache serves the refresh, the plan checks, GC and SQL queries alike."""
    return shared_log(location)


def forget_log(location: str) -> None:
    """Release the cached log (and its snapshot) of a table the service no longer knows."""
    forget(location)


def read_table(location: str, name: str | None = None) -> TableInfo | None:
    """The table at `location` with its properties; None when there is no table (no commits).

    A log that cannot be read gives a TableInfo with `error` set (type and message), never an
    exception: one corrupt table must not hide the others.
    """
    log = delta_log(location)
    try:
        if not log.exists():
            return None
        snap = log.snapshot()
    except Exception as exc:  # noqa: BLE001 - recorded on the table, see docstring
        return TableInfo(location, name or location, {}, None, f"{type(exc).__name__}: {exc}")
    return TableInfo(location, name or location, dict(snap.configuration), snap.version)


def _is_table(path: str) -> bool:
    return os.path.isdir(os.path.join(path, LOG_DIR_NAME))


class LocationSource:
    """Tables at given paths and under given directories (each refresh lists them again).

    A path that is not (or no longer) a table is simply not listed; a directory that does not exist
    lists nothing. Names are the locations (the SQL `use_catalog.path.`<location>`` form).
    """

    def __init__(self, paths: Sequence[str | os.PathLike[str]] = (), directories: Sequence[str | os.PathLike[str]] = ()) -> None:
        if isinstance(paths, (str, os.PathLike)) or isinstance(directories, (str, os.PathLike)):
            raise InvalidArgumentError("paths and directories must be lists of paths, not a single path")
        self.paths = tuple(resolve_table_root(p) for p in paths)
        self.directories = tuple(resolve_table_root(d) for d in directories)

    def locations(self) -> list[str]:
        found = [p for p in self.paths if _is_table(p)]
        for d in self.directories:
            found.extend(_tables_under(d, 0))
        return list(dict.fromkeys(found))  # de-duplicated, order kept

    def list_tables(self) -> Iterable[TableInfo]:
        out = []
        for loc in self.locations():
            info = read_table(loc)
            if info is not None:
                out.append(info)
        return out


def _tables_under(directory: str, depth: int) -> list[str]:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        _log.warning("cannot list %s: %s", directory, exc)
        return []
    out: list[str] = []
    for e in entries:
        if e.name.startswith((".", "_")) or not e.is_dir(follow_symlinks=False):
            continue
        if _is_table(e.path):
            out.append(e.path)
        elif depth + 1 < _MAX_DEPTH:
            out.extend(_tables_under(e.path, depth + 1))
    return out
