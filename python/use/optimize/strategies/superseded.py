"""SupersededRevisionsSelection: re-index the files of older revisions into the latest one.

Data that drifts (timestamps, ids, amounts) opens a new revision whenever an append reaches past the
latest revision's range. The level-wise strategies work on one revision (the latest), so the files
of the older revisions are never merged: every sample and every range query opens them on top of
the latest revision's (issue 14 §1: 62 files read by `sample(0.01)` after 60 drifting appends,
against 2 for the same data written at once).

A widened revision's space contains its predecessors' (`compute_revision_change` merges the old
range with the new), so their rows can be indexed into the latest revision with its
transformations and existing cube weights, the executor's "index" rewrite (the one staging files
take, `UnindexedFilesSelection`), without opening yet another revision. Only revisions the latest
one really contains (`Revision.contains`) are selected; one made for a changed transformer is left
alone (re-indexing it would open a new revision, and it can be rewritten on request).

Moved, not rewritten, where it can be: a revision whose ranges the latest grew from by powers of
two upward (`use.qbeast.relabel`, the revision policy of a range that keeps drifting up) has its
rows already in the latest revision's cubes, so its files become the latest revision's by their
tags alone: one "relabel" task of all such files, nothing read or written, scored above any
rewrite. A file whose stats do not rule out a row at the old maximum of a grown column (that row
would sit on a cube boundary of the new space) is re-indexed with the rest.

Selection: the other files of every contained older revision, oldest revision first, then oldest file
first, in tasks of at most the index IO limit (`batchBytes`, as for staging files: one index write
per batch keeps the latest revision less fragmented than many small ones), up to `bytes-per-iter`
per plan (at least one task). Every such task gains (`use.optimize.gain`): once re-indexed, the
files no longer sit beside the latest revision's, which every query of its space also reads.

Score (`_common` units): a move `open_file_cost * files` (per byte of nothing); a re-index
`open_file_cost * files / bytes`. A query over the table opens, per older
revision, the files holding the cubes it reaches there (at least one, the root's, for any sample);
after the rewrite those rows sit in cubes of the latest revision the query reads anyway, so the
files' open cost is what each query saves. Unlike staging files the older files are indexed, so no
full-scan term (`index_score`'s 1) is claimed.

Not selected when the config targets one revision (`revision-id`, `autoOptimize.revisionId`) or
asks for a revision rewrite: the user asked for that revision's work only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from use.delta.skipping import snapshot_files_matching
from use.display import format_bytes
from use.optimize.plan import KIND_INDEX, KIND_RELABEL, MergeTask, Plan
from use.optimize.strategies._common import chunks, io_limit, paths_of, revision_ids_of, sizes_of, sort_files
from use.optimize.strategies.registry import register
from use.qbeast.relabel import alignment

if TYPE_CHECKING:
    from use.optimize.config import OptimizationConfig


def contained_revisions(snapshot: Any) -> list[int]:
    """Ids of the indexed revisions older than the latest whose space the latest contains."""
    latest_id = int(snapshot.latest_revision_id)
    latest = snapshot.revisions.get(latest_id)
    if latest is None or latest_id <= 1:
        return []
    return sorted(int(rid) for rid, rev in snapshot.revisions.items() if 0 < int(rid) < latest_id and latest.contains(rev))


@register("SupersededRevisionsSelection", "SupersededRevisions")
class SupersededRevisionsSelection:
    name: ClassVar[str]
    applies_to_qbeast: ClassVar[bool] = True
    applies_to_delta: ClassVar[bool] = False

    def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None:
        if not snapshot.is_qbeast or config.revision_rewrite or config.target_revision_id is not None:
            return None
        older = contained_revisions(snapshot)
        if not older:
            return None
        rids = revision_ids_of(snapshot)
        idx = np.flatnonzero(np.isin(rids, np.asarray(older, dtype=np.int64))).astype(np.int64)
        if idx.size == 0:
            return None
        latest = int(snapshot.latest_revision_id)
        tasks: list[MergeTask] = []
        movable = relabelable(snapshot, idx)
        if movable.any():
            moved = idx[movable]
            revs = sorted({int(r) for r in rids[moved]})
            n = int(moved.size)
            reason = (
                f"move {n} file(s) of superseded revision(s) {', '.join(map(str, revs))} into revision {latest} "
                f"by their tags (its ranges grew from theirs by powers of two: the rows already sit in its cubes)"
            )
            # nothing is read or written: the task is worth its files' open cost whatever their size
            score: float = config.open_file_cost * n
            tasks.append(MergeTask(self.name, revs[0], paths_of(snapshot, moved), 0, n, score, reason, KIND_RELABEL))
            idx = idx[~movable]
        if idx.size == 0:
            return Plan(tuple(tasks), self.name, snapshot.version)
        # oldest revision first, then oldest file: the revision that has waited longest goes first
        idx = sort_files(snapshot, idx, [("modification_time", "ascending")])
        idx = idx[np.argsort(rids[idx], kind="stable")]
        sizes = sizes_of(snapshot)[idx]
        total = 0
        for i, j in chunks(sizes, io_limit(KIND_INDEX, config)):
            nbytes, n = int(sizes[i:j].sum()), j - i
            if tasks and total + nbytes > config.bytes_per_iter:
                break
            total += nbytes
            revs = sorted({int(r) for r in rids[idx[i:j]]})
            reason = (
                f"re-index {n} file(s) of superseded revision(s) {', '.join(map(str, revs))} into revision {latest} "
                f"(its space contains theirs), oldest first, up to batchBytes={format_bytes(config.unindexed_batch_bytes)}"
            )
            score = config.open_file_cost * n / max(1, nbytes)
            # revision_id: the (oldest) source revision, as for staging files (0); the executor
            # reports the revision the rows went to.
            tasks.append(MergeTask(self.name, revs[0], paths_of(snapshot, idx[i:j]), nbytes, n, score, reason, KIND_INDEX))
        return Plan(tuple(tasks), self.name, snapshot.version)


def relabelable(snapshot: Any, idx: np.ndarray) -> np.ndarray:
    """Which of the files at `idx` (of contained older revisions) can move into the latest
    revision by their tags (`use.qbeast.relabel`): their revision aligns with the latest and their
    stats rule out a row at the old maximum of a grown column."""
    latest = snapshot.revisions[int(snapshot.latest_revision_id)]
    rids = revision_ids_of(snapshot)[idx]
    out = np.zeros(idx.size, dtype=bool)
    for rid in np.unique(rids).tolist():
        al = alignment(snapshot.revisions[int(rid)], latest)
        if al is None:
            continue
        mine = np.flatnonzero(rids == rid)
        files = snapshot.files.take(pa.array(idx[mine], pa.int64()))
        keep = ~np.asarray(snapshot_files_matching(snapshot, files, al.edge_predicate()), dtype=bool)
        if "deletion_vector" in files.column_names:  # re-adding such a file would drop its vector
            keep &= np.asarray(files.column("deletion_vector").is_null(), dtype=bool)
        out[mine[keep]] = True
    return out
