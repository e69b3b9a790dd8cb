"""The planner: an ordered chain of strategies; the first one that selects work wins.

This is the guide's `selectFiles()`: strategies are tried in order and the first non-empty selection
becomes the iteration's plan, so a prioritized strategy (indexing staging files) starves the ones
after it until it runs out of work. The planner is pure: snapshot and config in, plan out.

Every strategy's selection passes through the fixed-point guard (`use.optimize.gain.guard`) before
it counts: tasks over their IO limit or whose rewrite can reduce neither files, blocks nor read cost
are dropped, so a strategy left with nothing hands over to the next one, and a table on which the
whole chain finds nothing gets an empty plan (an optimize call commits nothing).

Default chain (when neither the caller nor `use.optimization.strategies` gives one):

* Qbeast table: `UnindexedFilesSelection` first (if `optimizeUnindexedFiles.enabled` and
  `.prioritize`; last if not prioritized), then `use.optimization.type` or, by default,
  `SupersededRevisionsSelection` (when the table has older revisions the latest contains: their
  files move into it by their tags when its ranges grew from theirs by powers of two, else they
  are re-indexed into it; not when a revision is targeted), then `LeveledCompactionSelection` on the latest revision (or
  `revision-id` / `autoOptimize.revisionId`).
  With revision id 0 only `UnindexedFilesSelection` runs; with `revision-rewrite` the unindexed
  strategy is left out (the user asked to rewrite one revision).
* Plain Delta table: `use.optimization.type` when it applies to plain tables, else `BinPacking`
  then `SmallFiles`.

Explicit selections bypass the chain: `plan(files=[...])` rewrites exactly those live files (one task
per revision and partition, within `task-max-bytes`), and `plan(revision_id=n)` targets one revision.
Both are checked against the snapshot first: a path that is not a live file, or a revision the table
does not have, is an `InvalidArgumentError` that names it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from typing import Any
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.errors import ConfigError, InvalidArgumentError
from use.optimize.config import OptimizationConfig
from use.optimize.gain import guard
from use.optimize.keys import PREFIX
from use.optimize.plan import KIND_COMPACT, KIND_INDEX, MergeTask, Plan
from use.optimize.strategies import registry
from use.optimize.strategies._common import (
    chunks,
    index_score,
    io_limit,
    merge_score,
    pack_bins_all,
    paths_of,
    revision_ids_of,
    sizes_of,
    sort_files,
)
from use.optimize.strategies.superseded import contained_revisions

EXPLICIT_FILES = "ExplicitFiles"


def default_chain(snapshot: Any, config: OptimizationConfig) -> tuple[str, ...]:
    """The strategy chain used when none is configured (see the module docstring)."""
    if snapshot.is_qbeast:
        unindexed = ("UnindexedFilesSelection",) if config.optimize_unindexed_enabled else ()
        if config.target_revision_id == 0:
            return unindexed
        main = "LeveledCompactionSelection"
        if config.type is not None and registry.get_class(config.type).applies_to_qbeast:
            main = config.type
        if config.revision_rewrite:
            return (main,)
        # Older revisions contained by the latest are folded into it before the latest is compacted:
        # their rows then join its cubes once, instead of after its files were merged.
        # (Only listed when the table has such revisions, so the chain shown to users is what runs.)
        superseded = (
            ("SupersededRevisionsSelection",) if config.target_revision_id is None and contained_revisions(snapshot) else ()
        )
        if config.optimize_unindexed_prioritize:
            return (*unindexed, *superseded, main)
        return (*superseded, main, *unindexed)
    if config.type is not None and registry.get_class(config.type).applies_to_delta:
        return (config.type,)
    return ("BinPacking", "SmallFiles")


class Planner:
    """Runs a chain of registered strategies over a snapshot.

    `strategies=None` means "from the config": `use.optimization.strategies` if set, else the default
    chain for the snapshot's kind of table. Names are checked when the planner is built.
    """

    def __init__(self, strategies: Sequence[str] | None = None, config: OptimizationConfig | None = None) -> None:
        self.config = config if config is not None else OptimizationConfig()
        if strategies is not None:
            if isinstance(strategies, str):
                strategies = [s for s in strategies.split(",")]
            if not strategies:
                raise InvalidArgumentError(
                    f"the strategy chain is empty: give at least one of {', '.join(registry.names())} (or None for the default chain)"
                )
            self._explicit: tuple[str, ...] | None = tuple(registry.canonical_name(s.strip()) for s in strategies)
        else:
            self._explicit = None

    def chain(self, snapshot: Any) -> tuple[str, ...]:
        if self._explicit is not None:
            return self._explicit
        if self.config.strategies:
            return self.config.strategies
        return default_chain(snapshot, self.config)

    def plan(self, snapshot: Any, *, files: Sequence[str] | None = None, revision_id: int | None = None) -> Plan:
        config = target_config(snapshot, self.config, revision_id)
        if files is not None:
            return guard(explicit_files_plan(snapshot, files, config, revision_id=revision_id), snapshot, config)
        chain = self.chain(snapshot)
        for name in chain:
            plan = registry.get(name).select(snapshot, config)
            if plan is not None:
                plan = guard(plan, snapshot, config)
            if plan is not None and not plan.is_empty:
                return plan
        return Plan.empty(",".join(chain) or "none", snapshot.version)


def target_config(snapshot: Any, config: OptimizationConfig, revision_id: int | None = None) -> OptimizationConfig:
    """The configuration a plan of `snapshot` runs with: `revision_id` (a caller's argument) as its
    target, after checking that it, or else the configured target (`revision-id`,
    `autoOptimize.revisionId`), is a revision of the table (InvalidArgumentError for the argument,
    ConfigError for the setting). Reads only `snapshot.is_qbeast`, `.revisions` and `.table_root`,
    so a caller can check a table's settings without its files (`use.insights.check`)."""
    if revision_id is not None:
        _check_revision(snapshot, revision_id, "revision_id")
        return dataclasses.replace(config, revision_id=int(revision_id))
    if config.target_revision_id is not None:
        key = "revision-id" if config.revision_id is not None else "autoOptimize.revisionId"
        _check_revision(snapshot, config.target_revision_id, PREFIX + key)
    return config


def _check_revision(snapshot: Any, revision_id: Any, source: str) -> None:
    check_revision_id(
        revision_id, source, snapshot.revisions if snapshot.is_qbeast else None, snapshot.table_root or "(synthetic)"
    )


def check_revision_id(revision_id: Any, source: str, revisions: Collection[int] | None, where: str) -> None:
    """`revision_id` (given as `source`: an argument, or a property key) names a revision of the
    table (`revisions`: its revision ids, None for a plain Delta table at `where`); the planner checks
    it before planning, `ALTER TABLE ... SET TBLPROPERTIES` before committing the property."""
    if isinstance(revision_id, bool) or not isinstance(revision_id, (int, np.integer)):
        raise InvalidArgumentError(f"{source} must be an integer revision id, got {revision_id!r}")
    error = ConfigError if source.startswith(PREFIX) else InvalidArgumentError
    if revisions is None:
        raise error(
            f"{source}={revision_id}: the table at {where} is a plain Delta table without revisions; leave the revision unset"
        )
    known = sorted({0, *(int(r) for r in revisions)})
    if int(revision_id) not in known:
        raise error(f"{source}={revision_id}: the table has no such revision; its revisions are {known}")


def _normalize(path: str, table_root: str) -> str:
    p = path
    for prefix in ("file://", "file:"):
        if p.startswith(prefix) and not table_root.startswith(prefix):
            p = p[len(prefix) :]
    root = table_root.rstrip("/")
    if root and p.startswith(root + "/"):
        p = p[len(root) + 1 :]
    return p


def resolve_paths(snapshot: Any, paths: Sequence[str]) -> np.ndarray:
    """Rows of `snapshot.files` for `paths` (as stored in the log, absolute under the table root, or
    not URL-encoded); InvalidArgumentError naming every path that is not a live file."""
    if isinstance(paths, str):
        raise InvalidArgumentError("files must be a list of paths, not a single string")
    if not paths:
        raise InvalidArgumentError("files is empty: give at least one data file path of the table")
    stored = snapshot.files.column("path")
    wanted = [_normalize(str(p), snapshot.table_root or "") for p in paths]
    found = pc.index_in(pa.array(wanted, pa.string()), value_set=stored.combine_chunks()).to_numpy(zero_copy_only=False)
    found = np.where(np.isnan(found.astype(np.float64)), -1, found).astype(np.int64)
    missing = np.flatnonzero(found < 0)
    if missing.size:  # second chance: the caller gave decoded (or encoded) paths
        alt = [
            quote(wanted[i], safe="/=:@!$&'()*+,;~-._") if unquote(wanted[i]) == wanted[i] else unquote(wanted[i])
            for i in missing
        ]
        again = pc.index_in(pa.array(alt, pa.string()), value_set=stored.combine_chunks()).to_numpy(zero_copy_only=False)
        again = np.where(np.isnan(again.astype(np.float64)), -1, again).astype(np.int64)
        found[missing] = again
        missing = np.flatnonzero(found < 0)
    if missing.size:
        names = [str(paths[i]) for i in missing[:10]]
        more = f" and {missing.size - 10} more" if missing.size > 10 else ""
        raise InvalidArgumentError(
            f"{missing.size} of the given files are not live files of the table at version {snapshot.version}: "
            f"{', '.join(names)}{more}; list the table's files (paths relative to the table root) and retry"
        )
    return np.unique(found)


def explicit_files_plan(
    snapshot: Any, paths: Sequence[str], config: OptimizationConfig, *, revision_id: int | None = None
) -> Plan:
    """Rewrite exactly `paths`: one task per revision (qbeast's optimize(files)), per partition for
    plain files, each within its IO limit (a file larger than it alone: it was asked for). A
    one-shot plan."""
    rows = resolve_paths(snapshot, paths)
    if not snapshot.is_qbeast:
        packed = pack_bins_all(snapshot, rows, config, strategy=EXPLICIT_FILES)
        return Plan(tuple(packed), EXPLICIT_FILES, snapshot.version, one_shot=True)
    rids = revision_ids_of(snapshot)[rows]
    if revision_id is not None and np.any(rids != revision_id):
        bad = paths_of(snapshot, rows[rids != revision_id])[:10]
        raise InvalidArgumentError(f"files not in revision {revision_id}: {', '.join(bad)}")
    sizes_all = sizes_of(snapshot)
    tasks: list[MergeTask] = []
    for rid in np.unique(rids):
        sel = sort_files(snapshot, rows[rids == rid], [("modification_time", "ascending")])
        sizes = sizes_all[sel]
        kind = KIND_INDEX if rid == 0 else KIND_COMPACT
        for i, j in chunks(sizes, io_limit(kind, config)):
            nbytes, n = int(sizes[i:j].sum()), j - i
            score = index_score(nbytes, n, config) if kind == KIND_INDEX else merge_score(nbytes, n, config)
            tasks.append(
                MergeTask(EXPLICIT_FILES, int(rid), paths_of(snapshot, sel[i:j]), nbytes, n, score,
                          f"explicit selection: {n} file(s) of revision {int(rid)}", kind)
            )  # fmt: skip
    return Plan(tuple(tasks), EXPLICIT_FILES, snapshot.version, one_shot=True)


def plan(snapshot: Any, config: OptimizationConfig | None = None, **kwargs: Any) -> Plan:
    """Shorthand: `Planner(None, config).plan(snapshot, **kwargs)`."""
    return Planner(None, config).plan(snapshot, **kwargs)
