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

Selection: the files of every contained older revision, oldest revision first, then oldest file
first, in tasks of at most the index IO limit (`batchBytes`, as for staging files: one index write
per batch keeps the latest revision less fragmented than many small ones), up to `bytes-per-iter`
per plan (at least one task). Every such task gains (`use.optimize.gain`): once re-indexed, the
files no longer sit beside the latest revision's, which every query of its space also reads.

Score (`_common` units): `open_file_cost * files / bytes`. A query over the table opens, per older
revision, the files holding the cubes it reaches there (at least one, the root's, for any sample);
after the rewrite those rows sit in cubes of the latest revision the query reads anyway, so the
files' open cost is what each query saves. Unlike staging files the older files are indexed, so no
full-scan term (`index_score`'s 1) is claimed.

Not selected when the config targets one revision (`revision-id`, `autoOptimize.revisionId`) or
asks for a revision rewrite: the user asked for that revision's work only.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from use.display import format_bytes
from use.optimize.config import OptimizationConfig
from use.optimize.plan import KIND_INDEX, MergeTask, Plan
from use.optimize.strategies._common import chunks, io_limit, paths_of, revision_ids_of, sizes_of, sort_files
from use.optimize.strategies.registry import register


def contained_revisions(snapshot: Any) -> list[int]:
    """Ids of the indexed revisions older than the latest whose space the latest contains."""
    latest_id = int(snapshot.latest_revision_id)
    latest = snapshot.revisions.get(latest_id)
    if latest is None or latest_id <= 1:
        return []
    return sorted(
        int(rid) for rid, rev in snapshot.revisions.items() if 0 < int(rid) < latest_id and latest.contains(rev)
    )


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
        # oldest revision first, then oldest file: the revision that has waited longest goes first
        idx = sort_files(snapshot, idx, [("modification_time", "ascending")])
        idx = idx[np.argsort(rids[idx], kind="stable")]
        sizes = sizes_of(snapshot)[idx]
        latest = int(snapshot.latest_revision_id)
        tasks: list[MergeTask] = []
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
