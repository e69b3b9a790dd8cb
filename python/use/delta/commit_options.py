"""How a statement's commits are made, passed explicitly to every function that commits.

A statement (a SQL write, a DELETE, a `DeltaTable.write`) may commit through several paths (a new
table's first commit, a transaction, the Qbeast writer's commit); each takes the statement's
`CommitOptions` as an argument, so what a commit carries never depends on who called whom:
Delta's `commitInfo.userMetadata` (the `userMetadata` writer option or the session's
`spark.databricks.delta.commitInfo.userMetadata`), the default properties of a table it creates
(the session's `spark.databricks.delta.properties.defaults.*`), and a recorder of the commits made,
from which the statement's post-commit hooks (Delta's auto compaction) learn what it committed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["NO_COMMIT_OPTIONS", "CommitOptions", "CommitRecorder", "CommittedWrite"]


@dataclass(frozen=True)
class CommittedWrite:
    """A commit a statement made: what a post-commit hook needs (Delta's auto compaction: the table,
    and the partitions the commit added data to; one empty tuple of values for an unpartitioned
    table)."""

    table_root: str
    version: int
    operation: str
    added_partitions: tuple[tuple[tuple[str, str | None], ...], ...]


class CommitRecorder:
    """The commits one statement made, in order (whatever path of the writer made them)."""

    def __init__(self) -> None:
        self.commits: list[CommittedWrite] = []

    def record(self, commit: CommittedWrite) -> None:
        self.commits.append(commit)


@dataclass(frozen=True)
class CommitOptions:
    """What every commit of one statement carries: `user_metadata` (unless a commit gives its own),
    `table_defaults` (the properties a table it creates takes where its own do not set them), and
    `recorder` (None: the commits are not recorded), and `user_name`, the user the statement runs for
    (`commitInfo.userName`: a JDBC session's user in `use serve`)."""

    user_metadata: str | None = None
    table_defaults: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    recorder: CommitRecorder | None = None
    user_name: str | None = None


#: Commits that carry nothing of a statement (an optimization's, a conversion's, the Python API's own).
NO_COMMIT_OPTIONS = CommitOptions()
