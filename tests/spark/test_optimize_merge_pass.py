"""A compaction reads its input once where the input's blocks tell where every row goes, and a scan
of many files lists them without a Spark job (issue 14: merge-task throughput)."""

from __future__ import annotations

import json
import os
import shutil
import uuid

import pyarrow as pa
import pytest

from use.delta import DeltaLog
from use.optimize.config import OptimizationConfig
from use.optimize.executor import run_task
from use.optimize.plan import MergeTask
from use.optimize.task_metrics import COMMITTED, blocks_of_rows, num_records, reindexed_blocks, task_file_rows
from use.qbeast.index_plan import _cube_counts, existing_index, with_weight
from use.qbeast.index_status import InputBlocks, counts_in_place
from use.qbeast.jvm_write import JVM_WRITE_CONF
from use.qbeast.reader import load_snapshot, read, scan
from use.qbeast.snapshot import QbeastSnapshot
from use.qbeast.weight import weight_from_fraction
from use.qbeast.writer import rewrite_with_existing_weights, write

_SPACE = {"x_min": 0.0, "x_max": 100.0, "y_min": 0.0, "y_max": 100.0}
_TEMPLATES: dict[str, str] = {}


def _rows(spark, start: int, n: int):
    return spark.range(start, start + n, numPartitions=4).selectExpr(
        "id", "rand(7) * 100 as x", "rand(8) * 100 as y", "concat('p', cast(id % 13 as string)) as s"
    )


def _table(spark, tmp_path_factory, name: str, appends: int) -> str:
    """One unshuffled write of 6,000 rows (every cube split in up to 4 parts, all blocks with the
    cube's one maxWeight), then `appends` more writes of 3,000 rows, which lower the maxWeights of
    the cubes they fill (the older blocks' rows above them move down in a compaction)."""
    if name not in _TEMPLATES:
        path = str(tmp_path_factory.mktemp("merge-pass") / name)
        write(spark, _rows(spark, 0, 6_000), path, ["x", "y"], cube_size=400, column_stats=_SPACE, optimize_write=False)
        for i in range(appends):
            write(spark, _rows(spark, 6_000 + 3_000 * i, 3_000), path, ["x", "y"], cube_size=400, optimize_write=False)
        _TEMPLATES[name] = path
    return _TEMPLATES[name]


@pytest.fixture
def one_write(spark, tmp_path_factory, tmp_path) -> str:
    return str(shutil.copytree(_table(spark, tmp_path_factory, "one-write", 0), tmp_path / "one-write"))


@pytest.fixture
def appended(spark, tmp_path_factory, tmp_path) -> str:
    return str(shutil.copytree(_table(spark, tmp_path_factory, "appended", 2), tmp_path / "appended"))


def _whole_revision_task(qsnap: QbeastSnapshot) -> MergeTask:
    files = qsnap.files_of_revision(1)
    return MergeTask(
        strategy="test", revision_id=1, paths=tuple(files.column("path").to_pylist()),
        bytes=int(sum(files.column("size").to_pylist())), num_files=files.num_rows, score=0.0,
        reason="test", kind="compact",
    )  # fmt: skip


def _input_blocks(qsnap: QbeastSnapshot, task: MergeTask) -> InputBlocks:
    idx = task_file_rows(qsnap, task)
    files = qsnap.files.take(pa.array(idx, pa.int64()))
    return InputBlocks(reindexed_blocks(blocks_of_rows(qsnap, idx), idx), int(idx.size), num_records(files, qsnap.schema))


def _counted(spark, qsnap: QbeastSnapshot, task: MergeTask, *, jvm: bool = True) -> dict[str, int]:
    """The counting pass over the task's rows (in the JVM, or through Python)."""
    revision = qsnap.revisions[1]
    df = scan(spark, qsnap, qsnap.files.take(pa.array(task_file_rows(qsnap, task), pa.int64())))
    weights, _ = existing_index(qsnap, 1)
    if not jvm:
        spark.conf.set(JVM_WRITE_CONF, "false")
    try:
        return _cube_counts(with_weight(df, revision), revision, weights)
    finally:
        spark.conf.unset(JVM_WRITE_CONF)


def _layout(adds) -> list[list[tuple]]:
    """Each written file as its sorted blocks (cube, minWeight, maxWeight, elementCount)."""
    return sorted(sorted(tuple(b.values()) for b in json.loads(a.tags["blocks"])) for a in adds)


def _jobs(spark, fn) -> int:
    """Spark jobs `fn(group)` runs in a fresh job group."""
    group = f"test-{uuid.uuid4().hex}"
    fn(group)
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def test_blocks_give_the_counts_the_counting_pass_finds(spark, one_write) -> None:
    qsnap = load_snapshot(one_write)
    task = _whole_revision_task(qsnap)
    in_place = counts_in_place(_input_blocks(qsnap, task), qsnap.revisions[1], existing_index(qsnap, 1)[0])
    assert in_place is not None and sum(in_place.values()) == 6_000 and len(in_place) > 4
    assert in_place == _counted(spark, qsnap, task) == _counted(spark, qsnap, task, jvm=False)


def test_blocks_whose_cube_weight_dropped_need_the_counting_pass(spark, appended) -> None:
    qsnap = load_snapshot(appended)
    task = _whole_revision_task(qsnap)
    source = _input_blocks(qsnap, task)
    weights = existing_index(qsnap, 1)[0]
    stale = [c for c, w in zip(source.blocks.column("cube_id").to_pylist(), source.blocks.column("max_weight").to_pylist(), strict=False)
             if w > weights[c]]  # fmt: skip
    assert stale  # the appends lowered some cube's maxWeight below its older blocks'
    assert counts_in_place(source, qsnap.revisions[1], weights) is None
    counted = _counted(spark, qsnap, task)
    assert sum(counted.values()) == 12_000 and counted == _counted(spark, qsnap, task, jvm=False)
    # Only the blocks' cubes that kept their weight would have been right: some rows did move.
    blocks_total: dict[str, int] = {}
    for c, n in zip(source.blocks.column("cube_id").to_pylist(), source.blocks.column("element_count").to_pylist(), strict=False):
        blocks_total[c] = blocks_total.get(c, 0) + n
    assert blocks_total != counted


def test_blocks_of_staging_files_or_unknown_row_counts_need_the_counting_pass(one_write) -> None:
    qsnap = load_snapshot(one_write)
    task = _whole_revision_task(qsnap)
    source = _input_blocks(qsnap, task)
    revision, weights = qsnap.revisions[1], existing_index(qsnap, 1)[0]
    assert counts_in_place(source, revision, weights) is not None
    staging = source.blocks.set_column(1, "revision_id", pa.array([0] * source.blocks.num_rows, pa.int64()))
    assert counts_in_place(InputBlocks(staging, source.num_files, source.num_rows), revision, weights) is None
    assert counts_in_place(InputBlocks(source.blocks, source.num_files + 1, source.num_rows), revision, weights) is None
    assert counts_in_place(InputBlocks(source.blocks, source.num_files, None), revision, weights) is None
    assert counts_in_place(InputBlocks(source.blocks, source.num_files, source.num_rows + 1), revision, weights) is None
    # a cube whose parent has no weight: its rows would stop in the parent
    assert counts_in_place(source, revision, {c: w for c, w in weights.items() if c != ""}) is None


def test_one_pass_compaction_writes_what_the_two_pass_one_wrote(spark, one_write, tmp_path) -> None:
    qsnap = load_snapshot(one_write)
    task = _whole_revision_task(qsnap)
    files = qsnap.files.take(pa.array(task_file_rows(qsnap, task), pa.int64()))
    df = scan(spark, qsnap, files)
    two_pass = rewrite_with_existing_weights(spark, df, qsnap, 1, input_bytes=task.bytes)
    one_pass = rewrite_with_existing_weights(spark, df, qsnap, 1, input_bytes=task.bytes, input_blocks=_input_blocks(qsnap, task))
    assert _layout(one_pass) == _layout(two_pass) and len(one_pass) < task.num_files
    for a in two_pass:
        os.unlink(os.path.join(one_write, a.path))

    # Through the executor, committed: every row kept, and reads return what they did before.
    from pyspark.sql import functions as F

    flt = "x >= 20 and x < 35 and y < 50"
    before = (sorted(read(spark, one_write).collect()), sorted(read(spark, one_write, sample=0.1).collect()),
              sorted(read(spark, one_write, filter=flt).collect()))  # fmt: skip
    log = DeltaLog.for_path(one_write)
    snap = log.snapshot()
    m = run_task(spark, log, snap, QbeastSnapshot.from_delta(snap), task, OptimizationConfig())
    assert m.status == COMMITTED and m.rows == 6_000
    after_snap = load_snapshot(one_write)
    assert _layout(_adds_of(after_snap)) == _layout(one_pass)
    after = (sorted(read(spark, one_write).collect()), sorted(read(spark, one_write, sample=0.1).collect()),
             sorted(read(spark, one_write, filter=flt).collect()))  # fmt: skip
    assert after == before and before[1] and before[2]
    assert (
        read(spark, one_write, sample=0.1).count()
        == read(spark, one_write).filter(F.hash("x", "y") < F.lit(int(weight_from_fraction(0.1)))).count()
    )


def _adds_of(qsnap: QbeastSnapshot) -> list:
    from use.delta.actions import AddFile

    return [AddFile(path=p, size=0, modification_time=0, data_change=False, tags=t)
            for p, t in zip(qsnap.files.column("path").to_pylist(), _tags(qsnap), strict=False)]  # fmt: skip


def _tags(qsnap: QbeastSnapshot) -> list[dict[str, str]]:
    return [dict(t or ()) for t in qsnap.files.column("tags").to_pylist()]


def test_a_compaction_whose_blocks_tell_the_counts_runs_one_job_less(spark, one_write, appended) -> None:
    """The counting pass is a Spark job over the input: skipped when the blocks prove the counts."""

    def compaction(path: str):
        def run(group: str) -> None:
            log = DeltaLog.for_path(path)
            snap = log.snapshot()
            qsnap = QbeastSnapshot.from_delta(snap)
            m = run_task(spark, log, snap, qsnap, _whole_revision_task(qsnap), OptimizationConfig(), job_group=group)
            assert m.status == COMMITTED

        return run

    assert _jobs(spark, compaction(one_write)) == _jobs(spark, compaction(appended)) - 1


def test_a_scan_of_many_local_files_lists_them_without_a_spark_job(spark, appended) -> None:
    qsnap = load_snapshot(appended)
    assert qsnap.files.num_rows > 32  # past Spark's parallel listing threshold
    key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    assert spark.conf.get(key, None) is None
    frames = []
    assert (
        _jobs(
            spark, lambda group: (spark.sparkContext.setJobGroup(group, "scan"), frames.append(scan(spark, qsnap, qsnap.files)))
        )
        == 0
    )
    spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert spark.conf.get(key, None) is None  # the session's setting is back as it was
    assert frames[0].count() == 12_000


def test_a_compaction_whose_blocks_tell_the_counts_runs_only_its_write_job(spark, one_write) -> None:
    """Neither a counting pass nor a Spark job for the dictionary sample: the first rows come from
    the input files on the driver."""
    log = DeltaLog.for_path(one_write)
    snap = log.snapshot()
    qsnap = QbeastSnapshot.from_delta(snap)
    task = _whole_revision_task(qsnap)

    def run(group: str) -> None:
        assert run_task(spark, log, snap, qsnap, task, OptimizationConfig(), job_group=group).status == COMMITTED

    assert _jobs(spark, run) == 1


def test_the_dictionary_sample_of_a_rewrite_comes_from_its_files(spark, one_write) -> None:
    from use.delta.storage import absolute_path
    from use.qbeast.jvm_write import _first_rows, _plain_columns

    qsnap = load_snapshot(one_write)
    paths = [absolute_path(one_write, p) for p in qsnap.files.column("path").to_pylist()]
    first = _first_rows(paths, ["id", "s"], 2_500)
    assert first.num_rows == 2_500 and first.column_names == ["id", "s"]
    assert _first_rows(paths, ["id", "missing"], 10) is None
    df = scan(spark, qsnap, qsnap.files)
    names = ["id", "x", "y", "s"]
    # id, x, y are distinct values, s repeats 13 values: it alone keeps a dictionary, either way
    assert _plain_columns(df, names, paths) == _plain_columns(df, names) == ["id", "x", "y"]


def test_the_first_rows_of_files_that_differ_in_nullability_are_one_table(tmp_path) -> None:
    import pyarrow.parquet as pq

    from use.qbeast.jvm_write import _first_rows

    strict = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.string())])
    pq.write_table(pa.table({"id": [1, 2], "s": ["a", "b"]}, schema=strict), tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": [3, None], "s": ["c", None]}), tmp_path / "b.parquet")
    first = _first_rows([str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")], ["id", "s"], 3)
    assert first.column("id").to_pylist() == [1, 2, 3] and first.column("s").to_pylist() == ["a", "b", "c"]
