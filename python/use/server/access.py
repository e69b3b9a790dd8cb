"""Confined file access: the rule that decides whether a statement may touch a path.

`use serve` sets `spark.qbeast.use.allowedRoots` (default: its data directory and warehouse, widened
with `--allowed-root`); the shim's check (`use.sql.UseAccess` in jvm-shim, run on every analysed plan
of every session and on every CALL) refuses a statement that reads or writes a path outside every
root. This module is the rule's reference, which the Scala function mirrors and which both sides are
tested on with the same cases (tests/unit/test_access.py, tests/spark/test_access_rule.py):

- a path is a local path (`/x`, `file:/x`, `file:///x`, relative to the working directory) or a URI
  of another file system (`s3a://bucket/x`);
- a local path is resolved as the operating system would open it (`os.path.realpath`: symlinks
  followed, `..` applied after them, a part that does not exist yet kept as written), so neither a
  symlink nor `..` leads out of a root;
- another URI is normalised lexically (`..` and `.` applied) and compared with roots of the same
  scheme and authority;
- a path is allowed when it is a root or lies under one.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from use.optimize.keys import ADMINS_KEY, ALLOWED_ROOTS_KEY, SESSION_USER_KEY

__all__ = ["PROTECTED_KEYS", "is_allowed", "normalize", "parse_roots"]

#: Settings a SQL session may not change while confinement is on: they widen it or its checks, or
#: say who the session's user is (`UseAccess.ProtectedKeys` in the shim).
PROTECTED_KEYS = (
    ALLOWED_ROOTS_KEY,
    ADMINS_KEY,
    SESSION_USER_KEY,
    "spark.sql.legacy.allowNonEmptyLocationInCTAS",
    "spark.databricks.delta.retentionDurationCheck.enabled",
)


def normalize(path: str) -> str:
    """`path` as the rule compares it: a resolved absolute local path, or a normalised URI."""
    text = path.strip()
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme in ("", "file"):
        local = unquote(parts.path) if scheme == "file" else text
        return os.path.realpath(local or "/")
    body = posixpath.normpath(unquote(parts.path) or "/")
    return f"{scheme}://{parts.netloc}{'' if body == '/' else body}"


def is_allowed(path: str, roots: Iterable[str]) -> bool:
    """Whether `path` is one of `roots` or lies under one."""
    target = normalize(path)
    for root in roots:
        base = normalize(root)
        if target == base or target.startswith(base.rstrip("/") + "/"):
            return True
    return False


def parse_roots(value: str) -> list[str]:
    """The roots of `spark.qbeast.use.allowedRoots`: comma-separated, blanks dropped."""
    return [r.strip() for r in value.split(",") if r.strip()]
