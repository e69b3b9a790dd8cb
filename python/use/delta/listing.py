"""The files of a Delta log directory: which commits and which (complete) checkpoints exist.

Listing is its own step because every reader starts from it and the writer's conflict checks need
it again after a lost race; it reads names only, never file contents.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from use.delta.storage import FileInfo, LocalLogStore
from use.errors import CorruptLogError, TableNotFoundError

LOG_DIR_NAME = "_delta_log"

_COMMIT_RE = re.compile(r"^(\d{20})\.json$")
_CLASSIC_CP_RE = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTI_CP_RE = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_UUID_CP_RE = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$")


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


# --- listing --------------------------------------------------------------------------------------


_DEFAULT_STORE = LocalLogStore()


@dataclass(frozen=True)
class CommitFile:
    """One commit file of a listing.

    Its size and modification time are read on first use (one stat, then kept), not while listing:
    loading a snapshot needs them for the few commits after its checkpoint, not for the whole log.
    """

    version: int
    path: str
    store: LocalLogStore | None = field(default=None, repr=False, compare=False)

    def info(self) -> FileInfo | None:
        """Size and modification time, or None if the file was deleted (log cleanup) after listing."""
        if "_info" not in self.__dict__:
            object.__setattr__(self, "_info", (self.store or _DEFAULT_STORE).file_info(self.path))
        info: FileInfo | None = self.__dict__["_info"]
        return info

    def _required_info(self) -> FileInfo:
        info = self.info()
        if info is None:
            raise FileNotFoundError(f"commit file {self.path} was deleted after the log was listed")
        return info

    @property
    def size(self) -> int:
        return self._required_info().size

    @property
    def modification_time(self) -> int:
        """ms since epoch."""
        return self._required_info().modification_time


@dataclass(frozen=True)
class CheckpointFiles:
    """One checkpoint version: its part files (in part order), or the parts it is missing."""

    version: int
    paths: tuple[str, ...]
    missing: tuple[str, ...] = ()
    store: LocalLogStore | None = field(default=None, repr=False, compare=False)

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def size(self) -> int:
        """Bytes of the parts present (stats them: nothing on the load path needs it)."""
        store = self.store or _DEFAULT_STORE
        infos = (store.file_info(p) for p in self.paths if p not in self.missing)
        return sum(i.size for i in infos if i is not None)


@dataclass(frozen=True)
class LogListing:
    """What `_delta_log` holds: commits by version and checkpoints by version (names only: the
    commit files are stat'ed lazily, see `CommitFile`)."""

    log_dir: str
    commits: Mapping[int, CommitFile]
    checkpoints: Mapping[int, CheckpointFiles]

    @property
    def is_empty(self) -> bool:
        return not self.commits and not self.checkpoints

    @property
    def latest_version(self) -> int:
        versions = list(self.commits) + [v for v, c in self.checkpoints.items() if c.complete]
        if not versions:
            raise TableNotFoundError(f"no Delta table at {os.path.dirname(self.log_dir)}: {self.log_dir} has no commits")
        return max(versions)

    def commit_timestamps(self, start: int | None = None, end: int | None = None) -> dict[int, int]:
        """Commit time (ms) per version: file modification times, made strictly increasing as Delta does.

        Covers the commits in [start, end] (default: the whole log), one stat each, and makes the
        times increasing within that range only (as Delta's history manager does for the range it
        searches). Commits deleted since the listing (log cleanup) are left out.
        """
        out: dict[int, int] = {}
        prev = -1
        for v in sorted(self.commits):
            if (start is not None and v < start) or (end is not None and v > end):
                continue
            info = self.commits[v].info()
            if info is None:
                continue
            ts = info.modification_time
            if ts <= prev:
                ts = prev + 1
            out[v] = ts
            prev = ts
        return out

    def commit_timestamp(self, version: int) -> int | None:
        """Commit time of `version` for a snapshot: like `commit_timestamps`, but made increasing
        only from the newest complete checkpoint at or below `version` on (the commits a snapshot
        load reads anyway), so a load stats a handful of files instead of the whole log.

        Equal to the whole-log value whenever the commits from that checkpoint on were written at
        least a millisecond after every earlier commit (the normal case); with clock skew or
        several commits in one millisecond right at the checkpoint it can be a few ms lower.
        None if the commit file is not in the log.
        """
        if version not in self.commits:
            return None
        start = max((v for v, c in self.checkpoints.items() if v <= version and c.complete), default=None)
        return self.commit_timestamps(start, version).get(version)

    def available_versions_text(self) -> str:
        """A human sentence saying which versions can be read."""
        try:
            lo = self.earliest_reconstructable_version()
            hi = self.latest_version
        except (CorruptLogError, TableNotFoundError):
            return "no version can be reconstructed"
        return f"available versions are {lo} to {hi}"

    def earliest_reconstructable_version(self) -> int:
        latest = self.latest_version
        starts = sorted([v for v, c in self.checkpoints.items() if c.complete] + ([0] if 0 in self.commits else []))
        for start in starts:
            if all(v in self.commits for v in range(start + 1, latest + 1)):
                return start
        raise CorruptLogError(f"no complete checkpoint or contiguous run of commits leads to version {latest} in {self.log_dir}")


def list_log(store: LocalLogStore, log_dir: str) -> LogListing:
    """The log's commits and checkpoints, from file names alone (no file is stat'ed here)."""
    commits: dict[int, CommitFile] = {}
    parts: dict[int, dict[int, set[int]]] = {}
    classic: dict[int, str] = {}
    uuid_named: dict[int, str] = {}
    for name in store.list_names(log_dir):
        m = _COMMIT_RE.match(name)
        if m:
            v = int(m.group(1))
            commits[v] = CommitFile(v, os.path.join(log_dir, name), store)
            continue
        m = _CLASSIC_CP_RE.match(name)
        if m:
            classic[int(m.group(1))] = name
            continue
        m = _UUID_CP_RE.match(name)
        if m:
            # Racing writers may leave several for one version; any is valid, so pick one deterministically.
            v = int(m.group(1))
            if v not in uuid_named or name < uuid_named[v]:
                uuid_named[v] = name
            continue
        m = _MULTI_CP_RE.match(name)
        if m:
            parts.setdefault(int(m.group(1)), {}).setdefault(int(m.group(3)), set()).add(int(m.group(2)))
    checkpoints: dict[int, CheckpointFiles] = {}
    # A UUID-named (V2-spec) checkpoint is the primary one of a v2Checkpoint table; a classic one of
    # the same version is its copy for older readers. Either is complete by construction.
    for v, name in {**classic, **uuid_named}.items():
        checkpoints[v] = CheckpointFiles(v, (os.path.join(log_dir, name),), (), store)
    for v, by_total in parts.items():
        if v in checkpoints:
            continue  # a classic or UUID-named checkpoint of the same version is complete by construction
        best: CheckpointFiles | None = None
        for total, got in sorted(by_total.items()):
            names = tuple(f"{v:020d}.checkpoint.{i:010d}.{total:010d}.parquet" for i in range(1, total + 1))
            missing = tuple(os.path.join(log_dir, n) for i, n in enumerate(names, 1) if i not in got)
            cand = CheckpointFiles(v, tuple(os.path.join(log_dir, n) for n in names), missing, store)
            if best is None or (cand.complete and not best.complete):
                best = cand
        assert best is not None
        checkpoints[v] = best
    return LogListing(log_dir, commits, checkpoints)
