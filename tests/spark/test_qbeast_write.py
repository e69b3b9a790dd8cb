"""The OTree writer on a real local Spark, checked against the files it wrote and delta-rs."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from use.delta.log import DeltaLog
from use.errors import IndexColumnError, InvalidArgumentError, SchemaMismatchError
from use.qbeast import writer
from use.qbeast.cube import CubeId
from use.qbeast.index_status import IndexStatus
from use.qbeast.snapshot import QbeastSnapshot
from use.qbeast.weight import MAX_WEIGHT
from use.qbeast.writer import index_into_revision, rewrite_with_existing_weights, write

UUID_FILE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.parquet")
BLOCK_KEYS = ["cubeId", "minWeight", "maxWeight", "elementCount"]


def _data(spark, n: int, start: int = 0, x_scale: float = 100.0, seed: int = 1):
    from pyspark.sql import functions as F

    return spark.range(start, start + n, numPartitions=2).select(
        F.col("id"),
        (F.rand(seed) * x_scale).alias("x"),
        (F.rand(seed + 1) * 50).cast("int").alias("y"),
        F.concat(F.lit("s"), F.col("id").cast("string")).alias("s"),
    )


def _qsnap(path: str) -> QbeastSnapshot:
    return QbeastSnapshot.from_delta(DeltaLog.for_path(path).snapshot())


def _listing(path: str) -> list[str]:
    out = []
    for dirpath, _, files in os.walk(path):
        out.extend(os.path.relpath(os.path.join(dirpath, f), path) for f in files)
    return sorted(out)


def _commit(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _check_table(spark, path: str, expected_ids: np.ndarray, columns: list[str]) -> dict[str, list[dict]]:
    """Every structural promise of a written table; returns the blocks per file path."""
    from pyspark.sql import functions as F

    qsnap = _qsnap(path)
    files = qsnap.files
    paths = files.column("path").to_pylist()
    # Only the live files and the log in the table root, each a <uuid>.parquet.
    data_files = [p for p in _listing(path) if not p.startswith("_delta_log")]
    assert sorted(data_files) == sorted(paths) or set(paths) <= set(data_files)
    blocks_by_file: dict[str, list[dict]] = {}
    for p, tags in zip(paths, files.column("tags").to_pylist(), strict=False):
        assert UUID_FILE.fullmatch(p)
        tags = dict(tags)
        assert sorted(tags) == ["blocks", "revision"]
        blocks = json.loads(tags["blocks"])
        assert blocks and all(list(b) == BLOCK_KEYS for b in blocks)
        blocks_by_file[p] = blocks
    # Rows: never lost or duplicated, through our files and through delta-rs.
    import deltalake

    ids = np.sort(deltalake.DeltaTable(path).to_pyarrow_table(columns=["id"]).column("id").to_numpy())
    assert np.array_equal(ids, np.sort(expected_ids))
    # Block stats are exact: recount each file's rows per cube, with Spark's hash as the weight
    # (one Spark read per revision) and cube.py's scalar containers walk as the cube.
    # A file's rows were placed with the cube weights of the commit that added it (a later append
    # can turn a leaf into an inner cube; the older leaf block keeps its rows), so each file is
    # checked against the index status at its own version.
    revisions = qsnap.revisions
    tags_of = {p: dict(t) for p, t in zip(paths, files.column("tags").to_pylist(), strict=False)}
    added_at = {}
    for v in range(qsnap.version + 1):
        for action in _commit(path, v):
            if "add" in action:
                added_at[action["add"]["path"]] = v
    for rid, version in sorted({(int(tags_of[p]["revision"]), added_at[p]) for p in paths}):
        rev = revisions[rid]
        cube_weights = IndexStatus.from_snapshot(_qsnap_at(path, version), rid).cube_weights()
        rev_paths = [p for p in paths if int(tags_of[p]["revision"]) == rid and added_at[p] == version]
        read = spark.read.parquet(*[os.path.join(path, p) for p in rev_paths])
        rows = read.select(
            F.input_file_name().alias("f"), F.hash(*rev.columns).alias("w"), *[F.col(c) for c in rev.columns]
        ).toArrow()
        points = rev.transform(rows)
        weights = rows.column("w").to_numpy()
        names = np.array([os.path.basename(f) for f in rows.column("f").to_pylist()], dtype=object)
        cubes = []
        for point, w in zip(points, weights, strict=False):
            for cube in CubeId.containers(point):
                s = cube.to_string()
                if s not in cube_weights or w <= cube_weights[s]:
                    break
            cubes.append(s)
        cubes_arr = np.array(cubes, dtype=object)
        for p in rev_paths:
            in_file = names == os.path.basename(p)
            assert int(in_file.sum()) == pq.read_metadata(os.path.join(path, p)).num_rows
            got = {b["cubeId"]: b for b in blocks_by_file[p]}
            assert set(got) == set(cubes_arr[in_file])
            for cube, block in got.items():
                mask = in_file & (cubes_arr == cube)
                assert block["elementCount"] == int(mask.sum())
                assert block["minWeight"] == int(weights[mask].min())
                assert block["maxWeight"] == cube_weights.get(cube, MAX_WEIGHT) >= int(weights[mask].max())
    return blocks_by_file


def test_first_write_builds_a_qbeast_table(spark, table_path) -> None:
    df = _data(spark, 20_000)
    result = write(spark, df, table_path, ["x", "y", "s"], cube_size=1000)
    # One commit makes the table, as Delta and qbeast-spark write it: protocol, metaData and adds.
    assert result.version == 0 and result.revision_id == 1
    assert os.listdir(os.path.join(table_path, "_delta_log")) == [f"{0:020d}.json"]
    assert result.num_rows == 20_000 and result.num_files >= 2
    blocks = _check_table(spark, table_path, np.arange(20_000), ["x", "y", "s"])
    assert len(blocks) == result.num_files

    commit = _commit(table_path, 0)
    assert sum("protocol" in a for a in commit) == 1 and sum("add" in a for a in commit) == result.num_files
    meta = next(a["metaData"] for a in commit if "metaData" in a)
    conf = meta["configuration"]
    assert conf["qbeast.lastRevisionID"] == "1"
    assert conf["columnsToIndex"] == "x,y,s"  # the user's specs, as qbeast-spark keeps its option
    rev1, rev0 = json.loads(conf["qbeast.revision.1"]), json.loads(conf["qbeast.revision.0"])
    assert [t["columnName"] for t in rev1["columnTransformers"]] == ["x", "y", "s"]
    assert rev1["columnTransformers"][2]["className"].endswith("HashTransformer")
    assert rev1["desiredCubeSize"] == 1000 and rev0["timestamp"] == rev1["timestamp"] - 1
    assert all(t["className"].endswith("EmptyTransformer") for t in rev0["columnTransformers"])
    info = commit[0]["commitInfo"]
    assert info["operation"] == "WRITE" and info["operationParameters"]["mode"] == "Append"
    assert all(a["add"]["dataChange"] for a in commit if "add" in a)

    # Inner cubes hold the desired size within 20% on uniform data.
    status = IndexStatus.from_snapshot(_qsnap(table_path), 1)
    counts, weights = status.cube_element_counts(), status.cube_weights()
    inner = [counts[c] for c, w in weights.items() if w < MAX_WEIGHT]
    assert inner and all(800 <= n <= 1200 for n in inner), inner
    assert sum(counts.values()) == 20_000


def test_append_new_revision_and_overwrite(spark, table_path) -> None:
    stats = {"x_min": 0.0, "x_max": 100.0, "y_min": 0, "y_max": 49}
    write(spark, _data(spark, 8_000), table_path, ["x", "y"], cube_size=500, column_stats=stats)
    before = IndexStatus.from_snapshot(_qsnap(table_path), 1).cube_weights()
    res = write(spark, _data(spark, 6_000, start=8_000, seed=7), table_path, ["x", "y"])
    assert res.revision_id == 1 and res.num_rows == 6_000
    assert not any("metaData" in a for a in _commit(table_path, res.version))
    status = IndexStatus.from_snapshot(_qsnap(table_path), 1)
    after = status.cube_weights()
    for cube, w in before.items():
        if w < MAX_WEIGHT:
            assert after[cube] <= w  # existing inner cube weights are re-estimated, never raised
    # The root keeps holding about the desired size after the append (upstream behaviour): its rows
    # above the lowered maxWeight are offsets the optimizer moves down; the rows of the new blocks
    # stop below it.
    assert after[""] < before[""]

    # A wider x range does not fit revision 1: revision 2 indexes the new rows from scratch.
    res2 = write(spark, _data(spark, 3_000, start=14_000, x_scale=1000.0, seed=9), table_path, ["x", "y"])
    assert res2.revision_id == res.revision_id + 1
    meta = next(a["metaData"] for a in _commit(table_path, res2.version) if "metaData" in a)
    conf = meta["configuration"]
    assert conf["qbeast.lastRevisionID"] == str(res2.revision_id)
    assert {"qbeast.revision.0", "qbeast.revision.1", f"qbeast.revision.{res2.revision_id}"} <= set(conf)
    new_tags = [a["add"]["tags"] for a in _commit(table_path, res2.version) if "add" in a]
    assert new_tags and all(t["revision"] == str(res2.revision_id) for t in new_tags)
    rev2 = IndexStatus.from_snapshot(_qsnap(table_path), 2).cube_element_counts()
    assert sum(rev2.values()) == 3_000 and 400 <= rev2[""] <= 600  # a fresh tree for the new rows only
    _check_table(spark, table_path, np.arange(17_000), ["x", "y"])

    # Overwrite: every file removed, revisions start again from 1 (other columns, other cube size).
    res3 = write(spark, _data(spark, 3_000, start=100_000), table_path, ["y", "x"], cube_size=400, mode="overwrite")
    assert res3.revision_id == 1
    commit = _commit(table_path, res3.version)
    assert commit[0]["commitInfo"]["operationParameters"]["mode"] == "Overwrite"
    removes = [a["remove"] for a in commit if "remove" in a]
    assert len(removes) == _qsnap_at(table_path, res2.version).files.num_rows
    assert all(r["dataChange"] for r in removes)
    conf = next(a["metaData"] for a in commit if "metaData" in a)["configuration"]
    assert sorted(k for k in conf if k.startswith("qbeast.revision.")) == ["qbeast.revision.0", "qbeast.revision.1"]
    rev1 = json.loads(conf["qbeast.revision.1"])
    assert rev1["desiredCubeSize"] == 400 and [t["columnName"] for t in rev1["columnTransformers"]] == ["y", "x"]
    _check_table(spark, table_path, np.arange(100_000, 103_000), ["y", "x"])


def _qsnap_at(path: str, version: int) -> QbeastSnapshot:
    return QbeastSnapshot.from_delta(DeltaLog.for_path(path).snapshot(version=version))


def test_empty_dataframe_writes_nothing(spark, table_path) -> None:
    empty = _data(spark, 0)
    res = write(spark, empty, table_path, ["x", "y"], cube_size=1000)
    assert (res.num_files, res.num_rows, res.revision_id) == (0, 0, 0)
    qsnap = _qsnap(table_path)
    assert qsnap.files.num_rows == 0 and set(qsnap.revisions) == {0}
    assert _listing(table_path) == ["_delta_log/00000000000000000000.json"]


@pytest.fixture(scope="module")
def small_table(spark, tmp_path_factory):
    """A small indexed table shared by the tests that must leave it unchanged."""
    path = str(tmp_path_factory.mktemp("small") / "table")
    write(spark, _data(spark, 2_000), path, ["x", "y"], cube_size=1000)
    return path


def _state(path: str) -> tuple[int, list[str]]:
    return DeltaLog.for_path(path).snapshot().version, _listing(path)


def test_empty_append_and_idempotent_repeat_commit_nothing(spark, small_table) -> None:
    before = _state(small_table)
    res = write(spark, _data(spark, 0), small_table, ["x", "y"])
    assert (res.version, res.num_files, res.revision_id) == (before[0], 0, 1)
    assert _state(small_table) == before
    # An idempotent write whose version was already committed is skipped before any work.
    first = write(spark, _data(spark, 300, start=2_000), small_table, ["x", "y"], txn_app_id="app", txn_version=3)
    assert DeltaLog.for_path(small_table).snapshot().app_transaction_version("app") == 3
    state = _state(small_table)
    again = write(spark, _data(spark, 300, start=2_000), small_table, ["x", "y"], txn_app_id="app", txn_version=2)
    assert again.version == first.version and again.num_files == 0
    assert _state(small_table) == state
    with pytest.raises(InvalidArgumentError, match="txn_version"):
        write(spark, _data(spark, 10), small_table, ["x", "y"], txn_app_id="app")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"columns_to_index": ["nope"]}, IndexColumnError, "nope"),
        ({"columns_to_index": ["x", "x"]}, IndexColumnError, "twice"),
        ({"columns_to_index": []}, IndexColumnError, "no columns"),
        ({"cube_size": 0}, InvalidArgumentError, "cube_size"),
        ({"cube_size": -5}, InvalidArgumentError, "cube_size"),
        ({"cube_size": "10"}, InvalidArgumentError, "cube_size"),
        ({"cube_size": True}, InvalidArgumentError, "cube_size"),
        ({"mode": "upsert"}, InvalidArgumentError, "mode"),
        ({"columns_to_index": ["y", "x"]}, IndexColumnError, "differ"),
        ({"columns_to_index": ["x"]}, IndexColumnError, "differ"),
        ({"column_stats": {"q_min": 1}}, InvalidArgumentError, "q_min"),
        ({"column_stats": "{not json"}, InvalidArgumentError, "JSON"),
    ],
)
def test_bad_input_changes_nothing(spark, small_table, kwargs, error, message) -> None:
    before = _state(small_table)
    args = {"columns_to_index": ["x", "y"], "cube_size": 1000, "mode": "append", **kwargs}
    with pytest.raises(error, match=message):
        write(spark, _data(spark, 500, start=10_000), small_table, **args)
    assert _state(small_table) == before


def test_schema_mismatch_names_the_columns(spark, small_table, table_path) -> None:
    from pyspark.sql import functions as F

    before = _state(small_table)
    bad = _data(spark, 100).withColumn("extra", F.lit(1)).withColumn("y", F.col("y").cast("string"))
    with pytest.raises(SchemaMismatchError, match=r"extra.*y is string in the data and (int|bigint|double) in the table"):
        write(spark, bad, small_table, ["x", "y"])
    with pytest.raises(SchemaMismatchError, match="missing from the data: s"):
        write(spark, _data(spark, 100).drop("s"), small_table, ["x", "y"])
    assert _state(small_table) == before
    # A bad call does not create a new table either.
    with pytest.raises(IndexColumnError):
        write(spark, _data(spark, 100), table_path, ["zz"])
    with pytest.raises(InvalidArgumentError):
        write(spark, _data(spark, 100), table_path, ["x"], cube_size=0)
    assert not os.path.exists(table_path)


def test_failure_before_commit_deletes_written_files(spark, small_table, table_path, monkeypatch) -> None:
    before = _state(small_table)
    written: list[str] = []
    real = writer.commit_write

    def fail(log, snapshot, revision, is_new, mode, adds, *args, **kwargs):
        written.extend(a.path for a in adds)
        raise RuntimeError("injected failure after the files were written")

    monkeypatch.setattr(writer, "commit_write", fail)
    with pytest.raises(RuntimeError, match="injected"):
        write(spark, _data(spark, 3_000, start=20_000), small_table, ["x", "y"])
    assert written  # files existed when the failure struck
    assert _state(small_table) == before
    with pytest.raises(RuntimeError, match="injected"):
        write(spark, _data(spark, 3_000), table_path, ["x", "y"])
    assert not os.path.exists(table_path)
    assert real is not fail


def test_a_write_runs_its_jobs_in_a_job_group_its_cleanup_waits_for(spark, small_table, monkeypatch) -> None:
    """A failed write deletes its files only once its tasks have stopped (`discard_write` awaits the
    thread's job group), so a write whose caller set no job group runs in one of its own, and gives
    the thread its properties back; a caller's own group (a Thrift statement's) is kept."""
    from use.qbeast import write_scope
    from use.runtime.jobs import JOB_PROPERTIES

    sc = spark.sparkContext
    before = _state(small_table)
    seen: list[tuple[str | None, str | None]] = []
    awaited: list[str | None] = []
    real_await = write_scope.await_job_group_tasks

    def fail(*args, **kwargs):
        seen.append((sc.getLocalProperty("spark.jobGroup.id"), sc.getLocalProperty("spark.job.description")))
        raise RuntimeError("injected failure after the files were written")

    def spy(spark_) -> bool:
        awaited.append(sc.getLocalProperty("spark.jobGroup.id"))
        return real_await(spark_)

    monkeypatch.setattr(writer, "commit_write", fail)
    monkeypatch.setattr(write_scope, "await_job_group_tasks", spy)
    previous = {key: sc.getLocalProperty(key) for key in JOB_PROPERTIES}
    assert previous["spark.jobGroup.id"] is None
    with pytest.raises(RuntimeError, match="injected"):
        write(spark, _data(spark, 3_000, start=20_000), small_table, ["x", "y"])
    group, description = seen[0]
    assert group is not None and group.startswith("use-write-")
    assert description is not None and description.startswith("USE write: append of 3000 rows to ")
    assert awaited == [group]
    assert {key: sc.getLocalProperty(key) for key in JOB_PROPERTIES} == previous
    assert _state(small_table) == before
    sc.setJobGroup("callers-group", "the caller's statement")
    try:
        with pytest.raises(RuntimeError, match="injected"):
            write(spark, _data(spark, 3_000, start=20_000), small_table, ["x", "y"])
        assert seen[1][0] == "callers-group" and awaited[1] == "callers-group"
        assert sc.getLocalProperty("spark.jobGroup.id") == "callers-group"
    finally:
        for key, value in previous.items():
            sc.setLocalProperty(key, value)  # type: ignore[arg-type]
    assert _state(small_table) == before


def test_optimizer_entry_points(spark, table_path) -> None:
    from use.delta.actions import remove_actions

    # Three appends scatter each cube over several files.
    for i in range(2):
        write(
            spark,
            _data(spark, 4_000, start=4_000 * i, seed=20 + i),
            table_path,
            ["x", "y"],
            cube_size=1000,
            column_stats={"x_min": 0.0, "x_max": 100.0, "y_min": 0, "y_max": 49},
        )
    qsnap = _qsnap(table_path)
    assert qsnap.latest_revision_id == 1
    status = IndexStatus.from_snapshot(qsnap, 1).cube_weights()
    files = qsnap.files_of_revision(1)
    df = spark.read.parquet(*[os.path.join(table_path, p) for p in files.column("path").to_pylist()])
    # Shuffled (input size unknown), and in one task (small input, as the optimizer says): the
    # same layout, every cube's blocks gathered into one file.
    single = rewrite_with_existing_weights(spark, df, qsnap, 1, input_bytes=int(pc.sum(files.column("size")).as_py()))
    layouts = []
    for adds in (single, rewrite_with_existing_weights(spark, df, qsnap, 1)):
        assert adds and all(not a.data_change for a in adds)
        counts: dict[str, int] = {}
        files_per_cube: dict[str, int] = {}
        for a in adds:
            for b in json.loads(a.tags["blocks"]):
                files_per_cube[b["cubeId"]] = files_per_cube.get(b["cubeId"], 0) + 1
                assert b["maxWeight"] == status.get(b["cubeId"], MAX_WEIGHT)
                counts[b["cubeId"]] = counts.get(b["cubeId"], 0) + b["elementCount"]
        assert sum(counts.values()) == 8_000
        assert set(files_per_cube.values()) == {1}  # every cube's blocks gathered into one file
        layouts.append(sorted(sorted(b["cubeId"] for b in json.loads(a.tags["blocks"])) for a in adds))
    assert layouts[0] == layouts[1]
    for a in single:
        os.unlink(os.path.join(table_path, a.path))
    # Commit it the way the optimizer does, and the table still holds every row, exactly blocked.
    txn = DeltaLog.for_path(table_path).start_transaction()
    txn.add(*remove_actions(files, data_change=False), *adds)
    txn.commit("WRITE", {"mode": "Append"})
    assert IndexStatus.from_snapshot(_qsnap(table_path), 1).cube_weights() == status
    _check_table(spark, table_path, np.arange(8_000), ["x", "y"])

    # Rows far outside the revision's space get a new revision (metadata returned, not committed).
    qsnap = _qsnap(table_path)
    res = index_into_revision(spark, _data(spark, 1_000, start=50_000, x_scale=1000.0), qsnap)
    assert res.revision_id == 2 and res.metadata is not None and res.num_rows == 1_000
    assert res.metadata.configuration["qbeast.lastRevisionID"] == "2"
    assert all(a.tags["revision"] == "2" and not a.data_change for a in res.adds)
    assert _qsnap(table_path).version == qsnap.version
    for a in res.adds:  # not committed: the caller would; clean up like a failed caller
        os.unlink(os.path.join(table_path, a.path))
    # Rows inside the space stay in revision 1 with no metadata change.
    res = index_into_revision(spark, _data(spark, 500, start=60_000, seed=5), qsnap)
    assert res.revision_id == 1 and res.metadata is None
    for a in res.adds:
        os.unlink(os.path.join(table_path, a.path))


def test_write_tasks_bound_their_memory(spark, table_path) -> None:
    """Past spark.qbeast.index.writeBufferBytes a write task writes its held rows out early (small
    row groups); files past spark.qbeast.index.maxOpenFilesPerTask are grouped in memory and spilled
    to local disk instead of kept open. Either way every row is written once, blocks exact, spill
    files removed; bad values are typed errors that write nothing."""
    import glob
    import tempfile

    from use.errors import ConfigError

    spills = os.path.join(tempfile.gettempdir(), "qbeast-write-spill-*")
    before = set(glob.glob(spills))
    spark.conf.set("spark.qbeast.index.writeBufferBytes", "20000")
    try:
        result = write(spark, _data(spark, 6_000), table_path, ["x", "y"], cube_size=500)
        assert result.num_rows == 6_000
        spark.conf.set("spark.qbeast.index.maxOpenFilesPerTask", "1")
        result = write(spark, _data(spark, 6_000, start=6_000), table_path, ["x", "y"], optimize_write=True)
        assert result.num_rows == 6_000 and result.num_files > 2
    finally:
        spark.conf.unset("spark.qbeast.index.writeBufferBytes")
        spark.conf.unset("spark.qbeast.index.maxOpenFilesPerTask")
    _check_table(spark, table_path, np.arange(12_000), ["x", "y"])
    assert set(glob.glob(spills)) <= before  # the spill files are gone
    state = _state(table_path)
    for key, value in (("spark.qbeast.index.writeBufferBytes", "lots"), ("spark.qbeast.index.maxOpenFilesPerTask", "0")):
        spark.conf.set(key, value)
        try:
            with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
                write(spark, _data(spark, 100, start=12_000), table_path, ["x", "y"])
        finally:
            spark.conf.unset(key)
        assert _state(table_path) == state


def test_task_files_stream_row_groups_and_overflow(tmp_path) -> None:
    """_TaskFiles on its own: pieces for 3 files arriving interleaved, a budget smaller than the
    rows, at most 2 open files: files 0 and 1 are streamed in several row groups, file 2 goes
    through the overflow groups; each file holds exactly its rows, blocks exact."""
    import pyarrow as pa

    from use.qbeast.index_plan import WEIGHT_COLUMN
    from use.qbeast.write_tasks import CUBE_COLUMN, _FileSettings, _TaskFiles

    schema = pa.schema([("id", pa.int64()), ("v", pa.float64())])
    settings = _FileSettings(str(tmp_path), schema, {"": -5, "A": 100}, True, 30_000, max_open=2, compression="snappy")
    files = _TaskFiles(lambda f: f"f{f}.parquet", settings)
    expected: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for i in range(60):
        f = i % 3
        ids = list(range(i * 500, i * 500 + 500))
        expected[f] += ids
        cubes = pa.array(["" if j % 2 else "A" for j in ids], pa.string())
        weights = pa.array([j % 1000 - 500 for j in ids], pa.int32())
        piece = pa.RecordBatch.from_arrays(
            [pa.array(ids, pa.int64()), pa.array([float(j) for j in ids]), cubes, weights],
            names=["id", "v", CUBE_COLUMN, WEIGHT_COLUMN],
        )
        files.add(f, piece)
    try:
        (result,) = list(files.finish())
    finally:
        files.close()
    assert result.column("path").to_pylist() == ["f0.parquet", "f1.parquet", "f2.parquet"]
    for f, path, blocks in zip(range(3), result.column("path").to_pylist(), result.column("blocks").to_pylist(), strict=False):
        pf = pq.ParquetFile(os.path.join(tmp_path, path))
        assert pf.read().column("id").to_pylist() == expected[f]
        if f < 2:
            assert pf.num_row_groups > 1  # streamed: written out as the budget filled
        got = {b["cubeId"]: b for b in json.loads(blocks)}
        ids = np.array(expected[f])
        assert got["A"]["elementCount"] == int((ids % 2 == 0).sum()) and got["A"]["maxWeight"] == 100
        assert got[""]["minWeight"] == int((ids[ids % 2 == 1] % 1000 - 500).min()) and got[""]["maxWeight"] == -5
    assert sorted(os.listdir(tmp_path)) == ["f0.parquet", "f1.parquet", "f2.parquet"]
    # A task that fails before finishing leaves no file, partial or published.
    failed = _TaskFiles(lambda f: f"g{f}.parquet", settings)
    for i in range(30):
        failed.add(i % 3, piece)
    failed.close()
    assert sorted(os.listdir(tmp_path)) == ["f0.parquet", "f1.parquet", "f2.parquet"]


def _files_per_cube(path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for blocks in _qsnap(path).files.column("tags").to_pylist():
        for block in json.loads(dict(blocks)["blocks"]):
            out[block["cubeId"]] = out.get(block["cubeId"], 0) + 1
    return out


def test_optimize_write_false_has_no_shuffle_and_true_one_file_per_group(spark, tmp_path) -> None:
    """With optimize_write=False every write task (at most spark.default.parallelism after a
    coalesce: 4 here, from 6 input partitions) writes its own part of each planned file;
    optimize_write=True (argument, Spark conf or table property delta.autoOptimize.optimizeWrite)
    shuffles so each planned file is written once. The settings win over the default rule
    (`use.qbeast.write_shuffle`, tested in test_qbeast_write_shuffle.py) both ways."""
    from pyspark.sql import functions as F

    def data(n: int, start: int = 0):
        return spark.range(start, start + n, numPartitions=6).select(
            F.col("id"), (F.rand(3) * 100).alias("x"), (F.rand(4) * 100).alias("y")
        )

    local, shuffled = str(tmp_path / "local"), str(tmp_path / "shuffled")
    write(spark, data(12_000), local, ["x", "y"], cube_size=1_000, optimize_write=False)
    write(spark, data(12_000), shuffled, ["x", "y"], cube_size=1_000, optimize_write=True)
    for path in (local, shuffled):
        _check_table(spark, path, np.arange(12_000), ["x", "y"])
    parts, whole = _files_per_cube(local), _files_per_cube(shuffled)
    assert set(parts) == set(whole)  # the same tree, whichever way it is written
    tasks = spark.sparkContext.defaultParallelism
    assert tasks < 6 and max(whole.values()) == 1 and max(parts.values()) == tasks
    assert len(_qsnap(local).files) > len(_qsnap(shuffled).files)

    # The Spark conf, then the table property, decide when the argument is not given.
    spark.conf.set("spark.qbeast.index.optimizeWrite", "true")
    try:
        write(spark, data(3_000, start=12_000), local, ["x", "y"])
    finally:
        spark.conf.unset("spark.qbeast.index.optimizeWrite")
    version = _qsnap(local).version
    added = [a["add"] for a in _commit(local, version) if "add" in a]
    cubes = [b["cubeId"] for a in added for b in json.loads(a["tags"]["blocks"])]
    assert len(cubes) == len(set(cubes))  # one file per planned group: no cube in two new files

    from dataclasses import replace

    from use.delta.transaction import Transaction

    log = DeltaLog.for_path(shuffled)
    snap = log.snapshot()
    conf = {**snap.metadata.configuration, "delta.autoOptimize.optimizeWrite": "true"}
    Transaction(log, snap).add(replace(snap.metadata, configuration=conf)).commit("SET TBLPROPERTIES", {}, {})
    write(spark, data(3_000, start=12_000), shuffled, ["x", "y"])
    added = [a["add"] for a in _commit(shuffled, _qsnap(shuffled).version) if "add" in a]
    cubes = [b["cubeId"] for a in added for b in json.loads(a["tags"]["blocks"])]
    assert len(cubes) == len(set(cubes))
    write(spark, data(3_000, start=15_000), shuffled, ["x", "y"], optimize_write=False)
    added = [a["add"] for a in _commit(shuffled, _qsnap(shuffled).version) if "add" in a]
    cubes = [b["cubeId"] for a in added for b in json.loads(a["tags"]["blocks"])]
    assert len(cubes) > len(set(cubes))  # the argument wins over the table property
    _check_table(spark, shuffled, np.arange(18_000), ["x", "y"])


def test_bad_optimize_write_settings_write_nothing(spark, small_table) -> None:
    from use.errors import ConfigError

    state = _state(small_table)
    with pytest.raises(InvalidArgumentError, match="optimize_write must be True, False or None"):
        write(spark, _data(spark, 100, start=9_000), small_table, ["x", "y"], optimize_write="yes")
    spark.conf.set("spark.qbeast.index.optimizeWrite", "sometimes")
    try:
        with pytest.raises(ConfigError, match=r"spark\.qbeast\.index\.optimizeWrite must be true or false"):
            write(spark, _data(spark, 100, start=9_000), small_table, ["x", "y"])
    finally:
        spark.conf.unset("spark.qbeast.index.optimizeWrite")
    assert _state(small_table) == state


def test_writes_use_the_session_parquet_codec(spark, small_table, table_path) -> None:
    """Data files are compressed as Spark's own writer would (spark.sql.parquet.compression.codec,
    snappy by default); a codec pyarrow cannot write is a ConfigError that changes nothing."""
    from use.errors import ConfigError

    def codecs(path: str) -> set[str]:
        added = [a["add"]["path"] for a in _commit(path, _qsnap(path).version) if "add" in a]
        return {pq.ParquetFile(os.path.join(path, p)).metadata.row_group(0).column(0).compression for p in added}

    write(spark, _data(spark, 2_000), table_path, ["x", "y"], cube_size=500)
    assert codecs(table_path) == {"SNAPPY"}
    spark.conf.set("spark.sql.parquet.compression.codec", "zstd")
    try:
        write(spark, _data(spark, 2_000, start=2_000), table_path, ["x", "y"])
        assert codecs(table_path) == {"ZSTD"}
        # Spark reads them back, and the rows are all there.
        assert spark.read.parquet(table_path).count() == 4_000
        _check_table(spark, table_path, np.arange(4_000), ["x", "y"])
        state = _state(small_table)
        spark.conf.set("spark.sql.parquet.compression.codec", "lzo")
        with pytest.raises(ConfigError, match=r"spark\.sql\.parquet\.compression\.codec = 'lzo'.*zstd"):
            write(spark, _data(spark, 100, start=9_000), small_table, ["x", "y"])
        assert _state(small_table) == state
    finally:
        spark.conf.unset("spark.sql.parquet.compression.codec")


def test_estimation_on_a_sample_keeps_cube_sizes(spark, table_path, monkeypatch) -> None:
    """Past ESTIMATION_MIN_ROWS the cube domains are estimated on a seeded sample (here 20% of the
    rows); inner cubes still hold the desired size within 20% and every row is written once."""
    from pyspark.sql import functions as F

    from use.qbeast import domains

    monkeypatch.setattr(domains, "ESTIMATION_MIN_ROWS", 1_000)
    assert domains.estimation_fraction(5_000, 60_000) == pytest.approx(0.2)
    df = spark.range(0, 60_000, numPartitions=4).select(F.col("id"), (F.rand(11) * 100).alias("x"), (F.rand(12) * 100).alias("y"))
    write(spark, df, table_path, ["x", "y"], cube_size=5_000)
    status = IndexStatus.from_snapshot(_qsnap(table_path), 1)
    counts, weights = status.cube_element_counts(), status.cube_weights()
    inner = [counts[c] for c, w in weights.items() if w < MAX_WEIGHT]
    assert len(inner) >= 5 and all(4_000 <= n <= 6_000 for n in inner), inner
    _check_table(spark, table_path, np.arange(60_000), ["x", "y"])


def test_write_with_large_arrow_var_types(spark, table_path) -> None:
    """With spark.sql.execution.arrow.useLargeVarTypes the rows (and the packed rows of an
    optimized write) reach the write tasks as large types (64-bit offsets); every row is still
    written once, blocks exact."""
    key = "spark.sql.execution.arrow.useLargeVarTypes"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, "true")
    try:
        write(spark, _data(spark, 3_000), table_path, ["x", "s"], cube_size=400)
        write(spark, _data(spark, 2_000, start=3_000), table_path, ["x", "s"], optimize_write=True)
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)
    _check_table(spark, table_path, np.arange(5_000), ["x", "s"])


def test_an_append_whose_new_revision_loses_to_a_concurrent_one_lands_staged(spark, tmp_path, monkeypatch) -> None:
    """A real race: a drifting append opens revision 2 while another commit (an append, as the
    service's indexing would) opens revision 2 first. The append is not failed: its files land as
    staging files (no index tags) without its revision, every row readable, a sample exact, and
    the optimizer indexes them. A concurrent change of anything else still fails the append, and a
    cube-size change (the user's request) is not dropped."""
    from pyspark.sql import functions as F

    from use import QbeastTable
    from use.errors import MetadataChangedError

    path = str(tmp_path / "t")
    write(spark, _data(spark, 1_000), path, ["x", "y"], cube_size=400)
    real = writer.commit_write
    raced: list[int] = []

    def racing(before):
        def commit(*args, **kwargs):
            if not raced:
                raced.append(-1)  # the racing write commits through here too: once
                raced[0] = before()
            return real(*args, **kwargs)

        return commit

    winner = lambda: write(spark, _data(spark, 500, start=5_000, x_scale=-100.0), path, ["x", "y"]).revision_id  # noqa: E731
    monkeypatch.setattr(writer, "commit_write", racing(winner))
    res = write(spark, _data(spark, 700, start=2_000).withColumn("x", F.col("x") + 150), path, ["x", "y"])
    assert raced == [2] and res.revision_id == 0 and res.num_rows == 700
    q = _qsnap(path)
    assert sorted(q.revisions) == [0, 1, 2] and q.latest_revision_id == 2
    staged = q.staging_files()
    assert staged.num_rows == res.num_files and all(t is None for t in staged.column("tags").to_pylist())
    df = spark.read.format("qbeast").load(path)
    assert df.count() == 2_200 and df.where("x >= 150").count() == 700
    sampled = sorted(r.id for r in df.sample(0.3).collect())
    assert 0.2 * 2_200 < len(sampled) < 0.4 * 2_200  # every revision's rows and the staged ones
    QbeastTable.for_path(spark, path).optimize(progress=False)
    assert _qsnap(path).staging_files().num_rows == 0 and spark.read.format("qbeast").load(path).count() == 2_200
    # the sample is the same rows once the staged ones are indexed: it was exact
    assert sorted(r.id for r in spark.read.format("qbeast").load(path).sample(0.3).collect()) == sampled

    # anything but a revision added meanwhile still fails the append, whose files are deleted
    def fails(other, cube_size=None) -> None:
        raced.clear()
        monkeypatch.setattr(writer, "commit_write", racing(other))
        before = set(_listing(path))
        data = _data(spark, 300, start=7_000).withColumn("x", F.col("x") + 1_000)
        with pytest.raises(MetadataChangedError, match="changed concurrently"):
            write(spark, data, path, ["x", "y"], cube_size=cube_size)
        live = set(DeltaLog.for_path(path).snapshot().files.column("path").to_pylist())
        assert len(raced) == 1 and not {f for f in set(_listing(path)) - before if f.endswith(".parquet")} - live

    fails(lambda: spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('k' = 'v')").collect())
    fails(lambda: write(spark, _data(spark, 100, start=9_000, x_scale=-1_000.0), path, ["x", "y"]), cube_size=100)


def test_a_table_with_decimal_columns_spark_stores_as_integers(spark, table_path) -> None:
    """Spark's parquet writer (the JVM write path of linear indexed columns) stores decimals of up to
    18 digits as INT32/INT64, whose footer statistics pyarrow cannot convert: every such write failed
    with ArrowNotImplementedError, nothing written. Now the rows land, the stats bound them, and a
    filter on a decimal column prunes by them and returns its rows."""
    import decimal

    from use import QbeastTable

    df = spark.sql(
        "SELECT id, CAST(id AS DOUBLE) AS x, CAST(id / 100 AS DECIMAL(10, 2)) AS price, "
        "CAST(id % 1000 / 10 AS DECIMAL(5, 1)) AS small, CAST(id AS DECIMAL(18, 3)) AS wide FROM range(3000)"
    )
    write(spark, df, table_path, ["x"], cube_size=500)
    _check_table(spark, table_path, np.arange(3_000), ["x"])
    files = _qsnap(table_path).files
    stats = [json.loads(s) for s in files.column("stats").to_pylist()]
    assert all({"price", "small", "wide"} <= set(s["minValues"]) for s in stats)
    assert min(decimal.Decimal(str(s["minValues"]["price"])) for s in stats) == decimal.Decimal("0.00")
    assert max(decimal.Decimal(str(s["maxValues"]["wide"])) for s in stats) == decimal.Decimal("2999.000")
    qt = QbeastTable.for_path(spark, table_path)
    assert sorted(r.id for r in qt.read(filter="price >= 29.95").collect()) == list(range(2995, 3000))
