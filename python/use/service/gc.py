"""The GC task: vacuum and expired-log cleanup of a table with `use.gc.enabled=true`.

Both follow the table's own retention properties, as Delta does: data files no longer referenced
are deleted once older than `delta.deletedFileRetentionDuration` (default one week; the vacuum's
retention check stays on), and log files older than `delta.logRetentionDuration` are cleaned when
`delta.enableExpiredLogCleanup` is on. Files written by an optimization task that was killed before
it committed (kill -9 of the server) are such unreferenced files: GC removes them after the
retention, never sooner, because until then they cannot be told apart from a commit in flight.

A vacuum commits VACUUM START/END; when nothing is old enough to delete the vacuum is skipped, so a
table checked every GC interval does not collect two empty commits each time. No Spark: listing and
deleting files is metadata work.
"""

from __future__ import annotations

from use.delta.vacuum import vacuum, vacuum_candidates
from use.service.records import GcRecord
from use.service.sources import delta_log

__all__ = ["collect_garbage"]


def collect_garbage(location: str, now: float) -> GcRecord:
    """Vacuum the table at `location` and clean its expired log files; raises on failure (the
    service records it and retries with backoff)."""
    log = delta_log(location)
    config = log.snapshot().config
    candidates, _, _, _ = vacuum_candidates(log, config.deleted_file_retention_ms)
    files = nbytes = 0
    if candidates:
        result = vacuum(log)  # the table's retention, with the retention check
        files, nbytes = len(result.files), int(result.bytes)
    logs = log.cleanup_expired_logs(config.log_retention_ms) if config.enable_expired_log_cleanup else []
    return GcRecord(now, files, nbytes, len(logs))
