"""Optimistic concurrency: Delta's conflict rules, rebasing, retries, and real threads racing."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from use.delta import AddFile, DeltaLog, Protocol, Transaction
from use.delta.actions import remove_actions
from use.delta.storage import LocalLogStore
from use.errors import (
    CommitRetriesExceededError,
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentModificationError,
    ConcurrentTransactionError,
    MetadataChangedError,
    ProtocolChangedError,
    StaleTransactionError,
)

SCHEMA = pa.schema([("id", pa.int64())])


def new_file(root: str, ids: list[int], data_change: bool = True) -> AddFile:
    rel = f"part-{uuid.uuid4().hex}.parquet"
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), os.path.join(root, rel))
    return AddFile(
        rel, os.path.getsize(os.path.join(root, rel)), int(time.time() * 1000), data_change, {}, f'{{"numRecords":{len(ids)}}}'
    )


def live_ids(log: DeltaLog) -> list[int]:
    snap = log.snapshot()
    out: list[int] = []
    for p in snap.files.column("path").to_pylist():
        out.extend(pq.read_table(os.path.join(snap.table_root, p)).column("id").to_pylist())
    return sorted(out)


@pytest.fixture
def log(table_path) -> DeltaLog:
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA)
    for ids in ([1, 2], [3, 4], [5, 6]):
        txn = log.start_transaction()
        txn.add(new_file(table_path, ids))
        txn.commit("WRITE")
    return log


def file_rows(log: DeltaLog, *indices: int) -> pa.Table:
    files = log.snapshot().files.sort_by("path")
    return files.take(pa.array(indices))


def rewrite(txn: Transaction, files: pa.Table) -> None:
    """A compaction: the same rows in one new file, all actions dataChange=false."""
    ids: list[int] = []
    for p in files.column("path").to_pylist():
        ids.extend(pq.read_table(os.path.join(txn.snapshot.table_root, p)).column("id").to_pylist())
    txn.add(*remove_actions(files, data_change=False), new_file(txn.snapshot.table_root, ids, data_change=False))


def blind_append(log: DeltaLog, ids: list[int]) -> int:
    txn = log.start_transaction()
    txn.add(new_file(log.table_root, ids))
    return txn.commit("WRITE", {"mode": "Append"})


def delete_files(log: DeltaLog, files: pa.Table) -> int:
    txn = log.start_transaction()
    txn.add(*remove_actions(files, data_change=True))
    return txn.commit("DELETE")


def listing(log: DeltaLog) -> list[str]:
    return sorted(os.listdir(log.log_dir))


# --- rules, one winning commit at a time --------------------------------------------------------------


def test_rewrite_rebases_over_blind_append(log):
    txn = log.start_transaction()
    rewrite(txn, file_rows(log, 0, 1))
    assert txn.isolation_level == "SnapshotIsolation"
    assert blind_append(log, [7]) == 4
    assert txn.commit("OPTIMIZE") == 5
    assert txn.attempts == 2
    assert live_ids(log) == [1, 2, 3, 4, 5, 6, 7]
    assert log.history(1)[0].commit_info["readVersion"] == 3


def test_blind_appends_never_conflict(log):
    a, b = log.start_transaction(), log.start_transaction()
    a.add(new_file(log.table_root, [10]))
    b.add(new_file(log.table_root, [11]))
    assert a.commit("WRITE") == 4
    assert b.commit("WRITE") == 5
    assert live_ids(log)[-2:] == [10, 11]


def test_rewrite_vs_concurrent_delete_is_delete_delete(log):
    victim = file_rows(log, 0)
    txn = log.start_transaction()
    rewrite(txn, victim)
    delete_files(log, victim)
    before = listing(log)
    with pytest.raises(ConcurrentDeleteDeleteError, match=victim.column("path")[0].as_py()):
        txn.commit("OPTIMIZE")
    assert listing(log) == before


def test_rewrite_vs_concurrent_rewrite_of_other_files(log):
    a, b = log.start_transaction(), log.start_transaction()
    rewrite(a, file_rows(log, 0))
    rewrite(b, file_rows(log, 1))
    a.commit("OPTIMIZE")
    b.commit("OPTIMIZE")
    assert live_ids(log) == [1, 2, 3, 4, 5, 6]


def test_read_files_vs_concurrent_remove(log):
    f = file_rows(log, 2)
    txn = log.start_transaction()
    txn.read_files(f.column("path"))
    txn.add(new_file(log.table_root, [99]))
    delete_files(log, f)
    with pytest.raises(ConcurrentDeleteReadError, match="read by this transaction"):
        txn.commit("MERGE")


def test_overwrite_vs_blind_append_commits(log):
    snap = log.snapshot()
    txn = log.start_transaction()
    txn.read_whole_table()
    txn.add(*remove_actions(snap.files, data_change=True), new_file(log.table_root, [0]))
    blind_append(log, [8])
    assert txn.commit("WRITE", {"mode": "Overwrite"}) == 5
    assert live_ids(log) == [0, 8]


def test_read_whole_table_vs_non_blind_add(log):
    txn = log.start_transaction()
    txn.read_whole_table()
    txn.add(new_file(log.table_root, [0]))
    other = log.start_transaction()
    other.read_whole_table()  # not a blind append: its adds depend on what it read
    other.add(new_file(log.table_root, [8]))
    other.commit("MERGE")
    with pytest.raises(ConcurrentAppendError, match="should have read"):
        txn.commit("MERGE")


def test_read_whole_table_vs_delta_rs_append(log):
    # delta-rs does not write isBlindAppend, so its appends count as non-blind data adds.
    txn = log.start_transaction()
    txn.read_whole_table()
    txn.add(new_file(log.table_root, [0]))
    write_deltalake(log.table_root, pa.table({"id": pa.array([42], pa.int64())}), mode="append")
    with pytest.raises(ConcurrentAppendError):
        txn.commit("MERGE")
    # ... while a blind append of ours is rebased over it.
    txn = log.start_transaction()
    txn.add(new_file(log.table_root, [43]))
    write_deltalake(log.table_root, pa.table({"id": pa.array([44], pa.int64())}), mode="append")
    v = txn.commit("WRITE")
    assert v == DeltaTable(log.table_root).version()
    assert 43 in live_ids(log) and 44 in live_ids(log)


def test_read_whole_table_vs_rewrite(log):
    txn = log.start_transaction()
    txn.read_whole_table()
    txn.add(new_file(log.table_root, [0]))
    other = log.start_transaction()
    rewrite(other, file_rows(log, 0))
    other.commit("OPTIMIZE")
    with pytest.raises(ConcurrentDeleteReadError):
        txn.commit("UPDATE")


def test_metadata_change_conflicts(log):
    txn = log.start_transaction()
    txn.add(new_file(log.table_root, [0]))
    m = log.snapshot().metadata
    other = log.start_transaction()
    other.add(type(m)(m.id, m.schema_string, m.partition_columns, {"k": "v"}, created_time=m.created_time))
    other.commit("SET TBLPROPERTIES")
    with pytest.raises(MetadataChangedError):
        txn.commit("WRITE")


def test_a_tolerated_metadata_change_is_rebased_and_others_still_conflict(log):
    """A Qbeast index revision added concurrently (`adds_revisions_only`) does not fail an append
    that tolerates it; another property, a changed revision, or a transaction that changes the
    metadata itself still conflict."""
    from dataclasses import replace

    from use.qbeast.revision import adds_revisions_only

    def set_conf(conf: dict) -> None:
        m = log.snapshot().metadata
        other = log.start_transaction()
        other.add(replace(m, configuration={**m.configuration, **conf}))
        other.commit("OPTIMIZE")

    set_conf({"qbeast.revision.1": "r1", "qbeast.lastRevisionID": "1"})
    txn = log.start_transaction().tolerate_metadata_change(adds_revisions_only)
    txn.add(new_file(log.table_root, [7]))
    set_conf({"qbeast.revision.2": "r2", "qbeast.lastRevisionID": "2", "columnsToIndex": "id"})
    txn.commit("WRITE")  # rebased: its files' revision is still defined
    assert live_ids(log)[-1] == 7 and log.snapshot().configuration["qbeast.lastRevisionID"] == "2"

    for change in ({"qbeast.revision.1": "redefined"}, {"k": "v"}):
        txn = log.start_transaction().tolerate_metadata_change(adds_revisions_only)
        txn.add(new_file(log.table_root, [8]))
        set_conf(change)
        with pytest.raises(MetadataChangedError):
            txn.commit("WRITE")
    txn = log.start_transaction().tolerate_metadata_change(adds_revisions_only)
    m = log.snapshot().metadata
    txn.add(replace(m, configuration={**m.configuration, "mine": "1"}))
    set_conf({"qbeast.revision.3": "r3"})
    with pytest.raises(MetadataChangedError):
        txn.commit("SET TBLPROPERTIES")


def test_adds_revisions_only_compares_schema_partitioning_and_properties(log):
    from dataclasses import replace

    from use.qbeast.revision import adds_revisions_only

    m = log.snapshot().metadata
    base = replace(m, configuration={"qbeast.revision.1": "r1", "qbeast.lastRevisionID": "1", "k": "v"})
    added = replace(base, configuration={**base.configuration, "qbeast.revision.2": "r2", "qbeast.lastRevisionID": "2"})
    assert adds_revisions_only(base, added) and adds_revisions_only(base, base)
    assert not adds_revisions_only(base, replace(added, configuration={**added.configuration, "qbeast.revision.1": "x"}))
    assert not adds_revisions_only(base, replace(added, configuration={"qbeast.revision.2": "r2"}))  # k and revision 1 gone
    assert not adds_revisions_only(base, replace(added, schema_string=m.schema_string.replace("id", "other")))
    assert not adds_revisions_only(base, replace(added, partition_columns=("id",)))


def test_protocol_upgrade_by_the_winner_alone_is_rebased(log):
    # Delta's rule: a winning protocol change fails us only if we change the protocol too (or it
    # drops a feature, or we cannot write under it).
    txn = log.start_transaction()
    txn.add(new_file(log.table_root, [0]))
    other = log.start_transaction()
    other.add(Protocol(1, 3))
    assert other.commit("UPGRADE PROTOCOL") == 4
    assert txn.commit("WRITE") == 5
    assert log.snapshot().protocol == Protocol(1, 3) and 0 in live_ids(log)


def test_protocol_changed_by_both_sides_conflicts(log):
    txn = log.start_transaction()
    txn.add(Protocol(1, 4), new_file(log.table_root, [0]))
    other = log.start_transaction()
    other.add(Protocol(1, 3))
    other.commit("UPGRADE PROTOCOL")
    before = listing(log)
    with pytest.raises(ProtocolChangedError, match="changed concurrently in version 4"):
        txn.commit("WRITE")
    assert listing(log) == before and log.snapshot().protocol == Protocol(1, 3)


@pytest.mark.parametrize(
    "winner, match",
    [
        # another engine drops a feature the transaction read the table with
        ({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly", "invariants"]}, "removes the feature"),
        # ... or adds one USE cannot write
        (
            {
                "minReaderVersion": 1,
                "minWriterVersion": 7,
                "writerFeatures": ["appendOnly", "invariants", "changeDataFeed", "rowTracking", "domainMetadata"],
            },
            "rowTracking",
        ),
    ],
)
def test_winning_protocol_that_drops_or_adds_an_unwritable_feature_conflicts(table_path, winner, match):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, configuration={"delta.enableChangeDataFeed": "true"})
    other = log.start_transaction()
    other.add(Protocol(1, 7, None, ("appendOnly", "invariants", "changeDataFeed")))
    other.commit("UPGRADE PROTOCOL")
    txn = log.start_transaction()
    txn.add(new_file(log.table_root, [0]))
    with open(os.path.join(log.log_dir, f"{2:020d}.json"), "w") as fh:
        fh.write(json.dumps({"commitInfo": {"operation": "ALTER TABLE"}}) + "\n" + json.dumps({"protocol": winner}) + "\n")
    before = listing(log)
    with pytest.raises(ProtocolChangedError, match=match):
        txn.commit("WRITE")
    assert listing(log) == before


def test_protocol_features_include_those_legacy_versions_imply():
    assert Protocol(1, 1).features == frozenset()
    assert Protocol(1, 2).features == {"appendOnly", "invariants"}
    assert Protocol(1, 4).features == {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"}
    assert "columnMapping" not in Protocol(1, 6).features and "columnMapping" in Protocol(2, 5).features
    assert Protocol(1, 7, None, ("appendOnly",)).features == {"appendOnly"}  # named features imply nothing more
    assert Protocol(3, 7, ("timestampNtz",), ("timestampNtz", "domainMetadata")).features == {"timestampNtz", "domainMetadata"}


def test_winner_moving_to_named_features_without_dropping_one_is_rebased(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA)  # Protocol(1, 2)
    txn = log.start_transaction()
    txn.add(new_file(log.table_root, [0]))
    other = log.start_transaction()
    other.add(Protocol(1, 7, None, ("appendOnly", "invariants", "domainMetadata")))
    other.commit("UPGRADE PROTOCOL")
    assert txn.commit("WRITE") == 2
    assert live_ids(log) == [0]


def test_app_transaction_keeps_a_rewrite_serializable(log):
    # Delta downgrades to SnapshotIsolation only when every action is a file action without a data
    # change: a txn (SetTransaction) keeps the default level, so a concurrent non-blind append of
    # data the rewrite read is a conflict, not a silent rebase.
    txn = log.start_transaction()
    rewrite(txn, file_rows(log, 0, 1))
    txn.read_whole_table()
    assert txn.isolation_level == "SnapshotIsolation"
    txn.set_app_transaction("compactor", 1)
    assert txn.isolation_level == "WriteSerializable"
    other = log.start_transaction()
    other.read_whole_table()
    other.add(new_file(log.table_root, [8]))
    other.commit("MERGE")
    before = listing(log)
    with pytest.raises(ConcurrentAppendError, match="should have read"):
        txn.commit("OPTIMIZE")
    assert listing(log) == before


# --- log cleanup under a stale transaction -------------------------------------------------------------


def clean_up_to_checkpoint(log: DeltaLog) -> None:
    """Checkpoint the latest version and delete every older commit, as expired-log cleanup does."""
    log.checkpoint()
    deleted = log.cleanup_expired_logs(0, now_ms=int(time.time() * 1000) + 2 * 86_400_000)
    assert f"{0:020d}.json" in deleted


def test_stale_transaction_after_log_cleanup_commits_nothing(log):
    stale = log.start_transaction()  # reads version 3
    stale.add(new_file(log.table_root, [0]))
    for i in range(4, 9):
        blind_append(log, [i * 10])
    clean_up_to_checkpoint(log)  # commits 0..7 are gone; version 4 is a vacant name now
    before, files = listing(log), live_ids(log)
    with pytest.raises(StaleTransactionError, match=r"version 3 of .* no longer in the log .*read version 3"):
        stale.commit("WRITE")
    assert listing(log) == before and live_ids(log) == files
    assert DeltaLog.for_path(log.table_root).snapshot().version == 8


class CleanupDuringCommit(LocalLogStore):
    """The local store, with log cleanup running once at a chosen moment of a commit: just before
    its put-if-absent ("put"), or right after it loses a race ("lost", between its failed put and
    its look at the winners)."""

    def __init__(self, when: str, cleanup) -> None:
        self.when, self.cleanup = when, cleanup

    def _run(self) -> None:
        if self.cleanup is not None:
            self.cleanup, cleanup = None, self.cleanup
            cleanup()

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if self.when == "put":
            self._run()
        done = super().put_if_absent(path, data)
        if not done and self.when == "lost":
            self._run()
        return done


def test_cleanup_between_check_and_put_leaves_no_commit(log):
    # The transaction saw its read version in the log, then cleanup emptied the next version's name
    # before its put: the commit is written, found stranded below the checkpoint, and taken back.
    other = DeltaLog.for_path(log.table_root)
    racer = DeltaLog(log.table_root, CleanupDuringCommit("put", lambda: clean_up_to_checkpoint(other)))
    stale = racer.start_transaction()  # reads version 3
    stale.add(new_file(log.table_root, [0]))
    for i in range(4, 9):
        blind_append(other, [i * 10])
    before_ids = live_ids(other)
    with pytest.raises(StaleTransactionError, match="version 3 of .* no longer in the log"):
        stale.commit("WRITE")
    assert sorted(os.listdir(log.log_dir)) == [f"{8:020d}.checkpoint.parquet", f"{8:020d}.json", "_last_checkpoint"]
    assert live_ids(other) == before_ids


def test_retry_never_skips_cleaned_up_winners(log):
    other = DeltaLog.for_path(log.table_root)
    racer = DeltaLog(log.table_root, CleanupDuringCommit("lost", lambda: clean_up_to_checkpoint(other)))
    stale = racer.start_transaction()  # reads version 3
    read = file_rows(racer, 0)
    stale.read_files(read.column("path"))
    stale.add(new_file(log.table_root, [0]))
    delete_files(other, read)  # version 4: removes the file the transaction read (a conflict)
    for i in range(5, 9):
        blind_append(other, [i * 10])
    before_ids = live_ids(other)
    with pytest.raises(StaleTransactionError, match="version 4 of .* no longer in the log"):
        stale.commit("MERGE")
    assert live_ids(other) == before_ids and other.snapshot().version == 8


def test_same_app_id_conflicts(log):
    a, b = log.start_transaction(), log.start_transaction()
    for t, v in ((a, 1), (b, 2)):
        t.set_app_transaction("stream", v)
        t.add(new_file(log.table_root, [v]))
    b.commit("STREAMING UPDATE")
    with pytest.raises(ConcurrentTransactionError, match="stream"):
        a.commit("STREAMING UPDATE")
    assert log.snapshot().app_transaction_version("stream") == 2


def test_retries_exhausted(log):
    txn = log.start_transaction(max_retries=0)
    txn.add(new_file(log.table_root, [0]))
    blind_append(log, [1])
    before = listing(log)
    with pytest.raises(CommitRetriesExceededError, match="gave up"):
        txn.commit("WRITE")
    assert listing(log) == before


def test_errors_are_concurrent_modification_errors():
    for cls in (
        ConcurrentAppendError,
        ConcurrentDeleteReadError,
        ConcurrentDeleteDeleteError,
        MetadataChangedError,
        ProtocolChangedError,
        ConcurrentTransactionError,
        CommitRetriesExceededError,
        StaleTransactionError,
    ):
        assert issubclass(cls, ConcurrentModificationError)


# --- threads ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shared_log", [False, True])
def test_threads_appending_while_compacting(table_path, shared_log):
    setup = DeltaLog.for_path(table_path)
    setup.create(SCHEMA, configuration={"delta.checkpointInterval": "7"})
    seed = list(range(1000, 1008))
    for i in range(0, len(seed), 2):
        blind_append(setup, seed[i : i + 2])
    n_threads, per_thread = 4, 8
    barrier = threading.Barrier(n_threads + 1)
    errors: list[BaseException] = []
    compactions: Counter[str] = Counter()

    def appender(t: int) -> None:
        # either one log object shared by all writers (a service) or one each (like separate processes)
        log = setup if shared_log else DeltaLog.for_path(table_path)
        barrier.wait()
        try:
            for k in range(per_thread):
                blind_append(log, [t * 100 + k])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def compactor() -> None:
        log = DeltaLog.for_path(table_path)
        barrier.wait()
        for _ in range(4):
            txn = log.start_transaction()
            files = txn.snapshot.files.sort_by("path")
            if files.num_rows < 2:
                continue
            rewrite(txn, files.slice(0, 2))
            try:
                txn.commit("OPTIMIZE")
                compactions["ok"] += 1
            except ConcurrentModificationError as exc:
                compactions[type(exc).__name__] += 1

    threads = [threading.Thread(target=appender, args=(t,)) for t in range(n_threads)]
    threads.append(threading.Thread(target=compactor))
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors
    # Blind appends never make a compaction fail; the only writer of removes is the compactor itself.
    assert compactions["ok"] == 4, compactions
    log = DeltaLog.for_path(table_path)
    expected = sorted(seed + [t * 100 + k for t in range(n_threads) for k in range(per_thread)])
    assert live_ids(log) == expected
    snap = log.snapshot()
    assert snap.version == 4 + n_threads * per_thread + 4  # create + 4 seeds = v0..v4
    # The concurrent history still replays the same through our checkpoints and through delta-rs.
    assert sorted(DeltaTable(table_path).to_pyarrow_table().column("id").to_pylist()) == expected
    assert any(n.endswith(".checkpoint.parquet") for n in os.listdir(log.log_dir))
    versions = sorted(int(n[:20]) for n in os.listdir(log.log_dir) if n.endswith(".json"))
    assert versions == list(range(snap.version + 1))
    blind = [h for h in log.history() if h.operation == "WRITE"]
    assert all(h.commit_info["isBlindAppend"] for h in blind)


def test_threads_racing_deletes_of_the_same_file(log):
    victim = file_rows(log, 0)
    results: list[str] = []
    barrier = threading.Barrier(3)

    def deleter() -> None:
        mine = DeltaLog.for_path(log.table_root)
        txn = mine.start_transaction()
        txn.add(*remove_actions(victim, data_change=True))
        barrier.wait()
        try:
            txn.commit("DELETE")
            results.append("ok")
        except ConcurrentDeleteDeleteError:
            results.append("conflict")

    threads = [threading.Thread(target=deleter) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert sorted(results) == ["conflict", "conflict", "ok"]
    assert log.snapshot().version == 4
    assert pc.sum(pc.equal(log.snapshot().files.column("path"), victim.column("path")[0])).as_py() in (None, 0)


def _process_appender(path: str, worker: int, count: int) -> list[int]:
    log = DeltaLog.for_path(path)
    return [blind_append(log, [worker * 1000 + k]) for k in range(count)]


def test_processes_appending(table_path):
    import concurrent.futures
    import multiprocessing

    DeltaLog.for_path(table_path).create(SCHEMA)
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        futures = [pool.submit(_process_appender, table_path, w, 6) for w in range(2)]
        versions = sorted(v for f in futures for v in f.result(timeout=120))
    assert versions == list(range(1, 13))  # every commit got its own version, none lost
    assert live_ids(DeltaLog.for_path(table_path)) == sorted(w * 1000 + k for w in range(2) for k in range(6))


def test_threads_compacting_while_deleting(table_path):
    """A compactor and a deleter race over the same files: only delete-delete conflicts, no row lost or kept twice."""
    setup = DeltaLog.for_path(table_path)
    setup.create(SCHEMA, configuration={"delta.checkpointInterval": "5"})
    for i in range(12):
        blind_append(setup, [i * 10, i * 10 + 1])
    ids_of = {}
    for p in setup.snapshot().files.column("path").to_pylist():
        ids_of[p] = pq.read_table(os.path.join(table_path, p)).column("id").to_pylist()
    barrier = threading.Barrier(3)
    outcomes: Counter[str] = Counter()
    deleted_ids: list[int] = []
    lock = threading.Lock()

    def compactor() -> None:
        log = DeltaLog.for_path(table_path)
        barrier.wait()
        for _ in range(5):
            txn = log.start_transaction()
            files = txn.snapshot.files.sort_by("path")
            if files.num_rows < 2:
                return
            rewrite(txn, files.slice(0, 3))
            try:
                txn.commit("OPTIMIZE")
                with lock:
                    outcomes["compact ok"] += 1
            except ConcurrentModificationError as exc:
                with lock:
                    outcomes[f"compact {type(exc).__name__}"] += 1

    def deleter() -> None:
        log = DeltaLog.for_path(table_path)
        barrier.wait()
        for path in sorted(ids_of)[::2]:
            txn = log.start_transaction()
            victim = txn.snapshot.files.filter(pc.equal(txn.snapshot.files.column("path"), path))
            if victim.num_rows == 0:
                continue  # already compacted away
            txn.add(*remove_actions(victim, data_change=True))
            try:
                txn.commit("DELETE")
                with lock:
                    outcomes["delete ok"] += 1
                    deleted_ids.extend(ids_of[path])
            except ConcurrentModificationError as exc:
                with lock:
                    outcomes[f"delete {type(exc).__name__}"] += 1

    def appender() -> None:
        log = DeltaLog.for_path(table_path)
        barrier.wait()
        for k in range(6):
            blind_append(log, [5000 + k])

    threads = [threading.Thread(target=f) for f in (compactor, deleter, appender)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert set(outcomes) <= {
        "compact ok",
        "delete ok",
        "compact ConcurrentDeleteDeleteError",
        "delete ConcurrentDeleteDeleteError",
    }, outcomes
    expected = sorted([i for ids in ids_of.values() for i in ids if i not in deleted_ids] + [5000 + k for k in range(6)])
    assert live_ids(DeltaLog.for_path(table_path)) == expected
    assert sorted(DeltaTable(table_path).to_pyarrow_table().column("id").to_pylist()) == expected


def test_a_serializable_table_conflicts_with_blind_appends_of_what_was_read(log):
    """`delta.isolationLevel=Serializable` (delta-spark's default) is honoured: an overwrite or a
    DELETE that read the whole table conflicts with a concurrent blind append, as delta-spark's
    ConflictChecker decides (the delta-spark oracle tests check the pair with both engines); a
    compaction is still rebased over it (SnapshotIsolation)."""
    import dataclasses

    snap = log.snapshot()
    serializable = {**snap.metadata.configuration, "delta.isolationLevel": "Serializable"}
    log.start_transaction().add(dataclasses.replace(snap.metadata, configuration=serializable)).commit("SET TBLPROPERTIES")
    snap = log.snapshot()
    overwrite = log.start_transaction()
    overwrite.read_whole_table()
    overwrite.add(*remove_actions(snap.files, data_change=True), new_file(log.table_root, [0]))
    assert overwrite.isolation_level == "Serializable"
    delete = log.start_transaction().read_rows_matching(None)
    delete.add(*remove_actions(snap.files.slice(0, 1), data_change=True))
    compaction = log.start_transaction()
    rewrite(compaction, file_rows(log, 0, 1))
    blind_append(log, [8])
    before = listing(log)
    with pytest.raises(ConcurrentAppendError, match="should have read"):
        overwrite.commit("WRITE", {"mode": "Overwrite"})
    with pytest.raises(ConcurrentAppendError, match="condition matches"):
        delete.commit("DELETE")
    assert listing(log) == before
    assert compaction.commit("OPTIMIZE") == snap.version + 2
    assert log.history(1)[0].commit_info["isolationLevel"] == "SnapshotIsolation"
