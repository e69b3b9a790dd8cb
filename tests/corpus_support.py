"""The shared corpus of foreign Delta tables (`shared/data/delta-tables.tar.gz`, README beside it):
167 tables written by delta-rs, delta-spark (golden tables), delta-kernel and Spark, with their data
and deletion vector files where their repositories keep them. Tests extract what they need into a
temporary directory; the archive is test input only, never copied into the project.

The archive is found at `$USE_SHARED_DATA/delta-tables.tar.gz`, else in `shared/data/` beside the
repository or beside one of its parent directories (CI checks `../shared` out beside the clone; a
git worktree of it sits deeper).
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Iterable
from pathlib import Path

ARCHIVE_NAME = "delta-tables.tar.gz"
REPO = Path(__file__).resolve().parent.parent

#: the tables of the archive with deletion vectors and their data files
DV_TABLES = (
    "drs/table-with-dv-small",
    "drs/table_with_deletion_logs",
    "drs/cdf-table-with-cdc-and-dvs",
    "kernel/basic-dv-no-checkpoint",
    "golden/log-replay-dv-key-cases",
    "golden/dv-partitioned-with-checkpoint",
    "golden/dv-with-columnmapping",
)


def corpus_archive() -> Path | None:
    """The archive, or None where this machine has none."""
    given = os.environ.get("USE_SHARED_DATA")
    if given:
        path = Path(given) / ARCHIVE_NAME
        return path if path.is_file() else None
    for parent in REPO.parents:
        path = parent / "shared" / "data" / ARCHIVE_NAME
        if path.is_file():
            return path
    return None


def missing_reason() -> str:
    return f"no {ARCHIVE_NAME} in $USE_SHARED_DATA or in shared/data beside {REPO} or its parents"


def extract(dest: str | os.PathLike[str], tables: Iterable[str] | None = None) -> list[str]:
    """Extract the archive's tables (all, or those named as `drs/...`) under `dest`; returns the
    table names extracted (`<source>/<table>`), sorted. The caller skips when `corpus_archive()` is None."""
    archive = corpus_archive()
    assert archive is not None, missing_reason()
    wanted = None if tables is None else tuple(f"tables/{t}/" for t in tables)
    names: set[str] = set()
    with tarfile.open(archive) as tar:
        members = []
        for m in tar.getmembers():
            if not m.name.startswith("tables/") or (wanted is not None and not m.name.startswith(wanted)):
                continue
            members.append(m)
            table = table_of(m.name)
            if table is not None:
                names.add(table)
        tar.extractall(dest, members=members, filter="data")
    return sorted(names)


def table_of(member: str) -> str | None:
    """The table (`<source>/<table>`, which may hold slashes) whose log an archive member belongs to."""
    head, sep, _ = member.partition("/_delta_log")
    return head[len("tables/") :] if sep and head.startswith("tables/") else None


def table_path(dest: str | os.PathLike[str], table: str) -> str:
    return os.path.join(os.fspath(dest), "tables", table)
