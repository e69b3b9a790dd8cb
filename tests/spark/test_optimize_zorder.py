"""ZOrder and Hilbert on real plain Delta tables: Delta's OPTIMIZE ZORDER BY semantics (rows kept,
dataChange=false, zOrderBy in the commit, files ordered by the key, readable by delta-rs), measured
pruning gains, the fixed point, incremental ZCubes, the CLI, and every bad input leaving the table
as it was."""

from __future__ import annotations

import collections
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as DeltaRsTable
from deltalake import write_deltalake

from optimize_support import commit_actions, deltars_rows, directory_state, plain_delta
from use import DeltaTable
from use.cli import main
from use.delta.predicates import And, Comparison
from use.delta.skipping import files_matching
from use.errors import ConfigError, InvalidArgumentError
from use.optimize import curves
from use.optimize.loop_core import CONVERGED
from use.optimize.strategies.zorder import ZCUBE_CURVE_TAG, ZCUBE_ID_TAG, ZCUBE_ZORDER_BY_TAG


def _uniform(path: str, appends: int = 16, rows: int = 1000, seed: int = 1) -> str:
    """`appends` files of uniform random (a, b) in [0, 1000)^2: every file spans the whole square."""
    rng = np.random.default_rng(seed)
    for i in range(appends):
        write_deltalake(
            path,
            pa.table(
                {"id": np.arange(i * rows, (i + 1) * rows), "a": rng.uniform(0, 1000, rows), "b": rng.integers(0, 1000, rows)}
            ),
            mode="append",
        )
    return path


def _rows(path: str, columns: tuple[str, ...] = ("id", "a", "b")) -> collections.Counter:
    t = DeltaRsTable(path).to_pyarrow_table()
    return collections.Counter(zip(*(t.column(c).to_pylist() for c in columns), strict=False))


def _box_files(table: DeltaTable, boxes: list[tuple[int, int]]) -> int:
    """Files that 1% boxes (100 x 100 of the 1000 x 1000 square) read, summed over the boxes."""
    snap = table.snapshot()
    total = 0
    for a, b in boxes:
        box = And(
            And(Comparison("a", ">=", a), Comparison("a", "<", a + 100)),
            And(Comparison("b", ">=", b), Comparison("b", "<", b + 100)),
        )
        total += int(np.asarray(files_matching(snap.files, box, snap.schema).to_numpy(zero_copy_only=False)).sum())
    return total


def _file_keys(path: str, rels: list[str], curve: str) -> list[np.ndarray]:
    """The clustering key of every row of each file, with buckets from all the files' rows (a task
    under 100,000 rows samples all its rows, so these are the rewrite's own buckets)."""
    tables = [pq.read_table(os.path.join(path, r), columns=["a", "b"]) for r in rels]
    both = pa.concat_tables(tables)
    bounds = [curves.range_bounds(both.column(c)) for c in ("a", "b")]
    return [np.asarray(curves.key_of_columns([t.column("a"), t.column("b")], bounds, curve).to_pylist()) for t in tables]


@pytest.mark.parametrize("strategy, curve", [("ZOrder", "zorder"), ("Hilbert", "hilbert")])
def test_clustering_sorts_rows_by_the_curve_and_a_box_filter_reads_fewer_files(spark, tmp_path, strategy, curve) -> None:
    path = _uniform(str(tmp_path / "t"))
    table = DeltaTable.for_path(spark, path)
    rows = _rows(path)
    boxes = [(a, b) for a in (0, 300, 650, 900) for b in (50, 420, 890)]
    before = _box_files(table, boxes)
    total = sum(table.snapshot().files.column("size").to_pylist())
    assert before == 16 * len(boxes)  # every file spans the square: every box reads every file

    result = table.optimize(zorder_by=["a", "b"], strategy=None if strategy == "ZOrder" else strategy, max_file_size=total // 12)

    (m,) = result.committed
    assert result.outcome == CONVERGED and m.strategy == strategy and m.kind == "cluster" and m.files_in == 16
    assert 10 <= m.files_out <= 16  # the target size, not the input count, decides the files
    after = _box_files(table, boxes)
    print(f"{strategy}: files read by {len(boxes)} 1% boxes: {before} before, {after} after")
    assert after * 4 <= before, (before, after)
    assert _rows(path) == rows  # delta-rs reads the same multiset of rows
    # Each file is one range of the key, sorted inside; ranges follow each other without overlap.
    rels = table.snapshot().files.column("path").to_pylist()
    keys = _file_keys(path, rels, curve)
    assert all((np.diff(k) >= 0).all() for k in keys)
    spans = sorted((int(k.min()), int(k.max())) for k in keys)
    assert all(hi <= lo for (_, hi), (lo, _) in zip(spans, spans[1:], strict=False))

    commit = commit_actions(path, m.version)
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    adds = [a["add"] for a in commit if "add" in a]
    removes = [a["remove"] for a in commit if "remove" in a]
    assert info["operation"] == "OPTIMIZE" and len(removes) == 16 and len(adds) == m.files_out
    assert not any(a["dataChange"] for a in adds + removes)
    assert len({a["tags"][ZCUBE_ID_TAG] for a in adds}) == 1  # one task, one ZCube
    assert {(a["tags"][ZCUBE_ZORDER_BY_TAG], a["tags"][ZCUBE_CURVE_TAG]) for a in adds} == {('["a","b"]', curve)}
    params = DeltaRsTable(path).history(1)[0]["operationParameters"]  # as delta-rs reads the commit
    if curve == "zorder":
        assert params["zOrderBy"] == '["a","b"]' and params["clusterBy"] == "[]"
    else:
        assert params["zOrderBy"] == "[]" and params["clusterBy"] == '["a","b"]'
    assert params["curve"] == curve

    # The fixed point: the same key again selects nothing and writes nothing.
    state = directory_state(path)
    again = table.optimize(zorder_by=["a", "b"], strategy=None if strategy == "ZOrder" else strategy, max_file_size=total // 12)
    assert again.outcome == CONVERGED and len(again) == 0 and directory_state(path) == state


def test_each_partition_becomes_one_zcube_and_one_commit(spark, tmp_path) -> None:
    path = plain_delta(str(tmp_path / "t"))  # 3 partitions of 6 small files
    table = DeltaTable.for_path(spark, path)
    rows = deltars_rows(path)

    result = table.optimize(zorder_by="x,y")

    assert result.outcome == CONVERGED and len(result.committed) == 3
    assert deltars_rows(path) == rows  # partition values included
    seen = set()
    for m in result.committed:
        assert m.files_in == 6 and m.files_out == 1 and m.revision_id == -1
        commit = commit_actions(path, m.version)
        parts = {a[k]["partitionValues"]["s"] for a in commit for k in ("add", "remove") if k in a}
        assert len(parts) == 1  # one partition per task and commit
        seen |= parts
        (add,) = [a["add"] for a in commit if "add" in a]
        assert add["path"].startswith(f"s={add['partitionValues']['s']}/") and add["tags"][ZCUBE_ZORDER_BY_TAG] == '["x","y"]'
    assert seen == {"s0", "s1", "s2"}
    version = table.log.history()[0].version
    assert len(table.optimize(zorder_by="x,y")) == 0 and table.log.history()[0].version == version


def test_single_large_files_are_clustered_into_target_sized_files_in_every_partition(spark, tmp_path) -> None:
    """A task of one file that comes out as two still counts as progress: the loop goes on to the
    next partition (a plain rewrite that does not shrink the file count would stop the loop)."""
    path = str(tmp_path / "t")
    ids = np.arange(4000)
    write_deltalake(path, pa.table({"id": ids, "a": (ids * 7919 % 1000).astype(np.float64), "b": ids * 31 % 997,
                                    "p": np.where(ids % 2 == 0, "even", "odd")}), partition_by=["p"])  # fmt: skip
    table = DeltaTable.for_path(spark, path)
    rows = _rows(path)
    size = max(table.snapshot().files.column("size").to_pylist())

    result = table.optimize(zorder_by="a,b", max_file_size=size // 2 + 1)

    assert result.outcome == CONVERGED
    assert [(m.files_in, m.files_out) for m in result.committed] == [(1, 2), (1, 2)]
    assert _rows(path) == rows and table.snapshot().num_files == 4


def test_new_files_join_small_zcubes_or_form_their_own_past_min_cube_size(spark, tmp_path) -> None:
    path = _uniform(str(tmp_path / "t"), appends=4, rows=300)
    table = DeltaTable.for_path(spark, path)
    table.optimize(zorder_by="a,b")
    clustered = set(table.snapshot().files.column("path").to_pylist())
    _uniform(path, appends=2, rows=300, seed=2)  # two new, unclustered files
    rows = _rows(path)

    # Default min-cube-size: the table's one ZCube is small, so it is re-sorted with the new files.
    (task,) = table.optimize(zorder_by="a,b", dry_run=True).plan.tasks
    assert task.num_files == len(clustered) + 2
    # Past min-cube-size the ZCube is settled: a round costs only the new files (a second ZCube).
    result = table.optimize(zorder_by="a,b", zorder_min_cube_size=1)
    (m,) = result.committed
    assert m.files_in == 2 and clustered <= set(table.snapshot().files.column("path").to_pylist())
    tags = table.snapshot().files.column("tags").to_pylist()
    assert len({dict(t)[ZCUBE_ID_TAG] for t in tags}) == 2
    # Back under the default, the two small ZCubes are merged into one, and then nothing is left.
    merged = table.optimize(zorder_by="a,b")
    assert [x.files_in for x in merged.committed] == [len(clustered) + 1]
    assert len({dict(t)[ZCUBE_ID_TAG] for t in table.snapshot().files.column("tags").to_pylist()}) == 1
    assert _rows(path) == rows


def test_nested_key_columns(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    for i in range(3):
        ids = np.arange(i * 50, (i + 1) * 50)
        write_deltalake(path, pa.table({"id": ids, "st": pa.StructArray.from_arrays([pa.array(ids % 7)], ["u"]),
                                        "x": (ids * 13 % 17).astype(np.float64)}), mode="append")  # fmt: skip
    table = DeltaTable.for_path(spark, path)
    rows = _rows(path, ("id", "x"))
    (m,) = table.optimize(zorder_by=["st.u", "x"], strategy="Hilbert").committed
    assert m.files_in == 3 and _rows(path, ("id", "x")) == rows
    assert DeltaRsTable(path).history(1)[0]["operationParameters"]["clusterBy"] == '["st.u","x"]'


def test_cli_zorder_by_and_hilbert(spark, tmp_path, capsys) -> None:
    path = _uniform(str(tmp_path / "t"), appends=3, rows=200)
    rows = _rows(path)
    assert main(["optimize", "--table-location", path, "--zorder-by", "a,b", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "plan: strategy=ZOrder" in out and "cluster" in out and "zorder by a,b: 3 file(s)" in out
    assert main(["optimize", "--table-location", path, "--strategy", "Hilbert", "--zorder-by", "b,a"]) == 0
    out = capsys.readouterr().out
    assert "Hilbert/cluster plain Delta: 3 files" in out and out.strip().splitlines()[-1].startswith("converged: 1 of 1")
    assert json.loads(DeltaRsTable(path).history(1)[0]["operationParameters"]["clusterBy"]) == ["b", "a"]
    assert main(["optimize", "--table-location", path, "--strategy", "Hilbert", "--zorder-by", "b,a"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("converged: nothing to optimize")
    assert _rows(path) == rows


@pytest.mark.parametrize(
    "args, message",
    [
        (["--zorder-by", "a,nope"], "'nope', which is not a column"),
        (["--zorder-by", ""], "zorder-by"),
        (["--strategy", "ZOrder"], "needs use.optimization.zorder-by"),
        (["--zorder-by", "a", "--strategy", "Peano"], "Peano"),
    ],
)
def test_cli_bad_zorder_flags_are_one_line_errors(spark, tmp_path, capsys, args, message) -> None:
    path = _uniform(str(tmp_path / "t"), appends=2, rows=50)
    before = directory_state(path)
    assert main(["optimize", "--table-location", path, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("use optimize: error:") and message in err[0]
    assert directory_state(path) == before


def _typed_table(path: str, configuration: dict[str, str] | None = None) -> str:
    ids = np.arange(20)
    data = pa.table({
        "id": ids, "x": ids.astype(np.float64), "flag": ids % 2 == 0, "raw": [bytes([int(i)]) for i in ids],
        "st": pa.StructArray.from_arrays([pa.array(ids)], ["u"]), "tags": pa.array([[("k", "v")]] * 20, pa.map_(pa.string(), pa.string())),
        "p": ["a"] * 10 + ["b"] * 10,
    })  # fmt: skip
    write_deltalake(path, data, partition_by=["p"], configuration=configuration)
    write_deltalake(path, data, mode="append", partition_by=["p"])
    return path


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"zorder_by": ["x", "nope"]}, ConfigError, "'nope', which is not a column of the table"),
        ({"zorder_by": ["p"]}, ConfigError, "partition column"),
        ({"zorder_by": ["flag"]}, ConfigError, "of type bool, which cannot be ordered"),
        ({"zorder_by": ["raw"]}, ConfigError, "cannot be ordered"),
        ({"zorder_by": ["tags"]}, ConfigError, "cannot be ordered"),
        ({"zorder_by": ["st"]}, ConfigError, "a struct: name one of its fields"),
        ({"zorder_by": "x,X"}, ConfigError, "distinct"),
        ({"zorder_by": []}, ConfigError, "for zorder_by: .*; pass zorder_by=.a,b."),
        ({"zorder_by": "x", "zorder_min_cube_size": -1}, ConfigError, "zorder_min_cube_size"),
        ({"strategy": "Hilbert"}, ConfigError, "needs use.optimization.zorder-by"),
        ({"zorder_by": "x", "files": ["p=a/f.parquet"]}, InvalidArgumentError, "cannot be combined"),
    ],
)
def test_bad_zorder_input_leaves_the_table_as_it_was(spark, tmp_path, kwargs, error, message) -> None:
    path = _typed_table(str(tmp_path / "t"))
    before = directory_state(path)
    with pytest.raises(error, match=message):
        DeltaTable.for_path(spark, path).optimize(**kwargs)
    assert directory_state(path) == before


def test_a_column_without_stats_is_refused(spark, tmp_path) -> None:
    path = _typed_table(str(tmp_path / "t"), configuration={"delta.dataSkippingNumIndexedCols": "1"})
    before = directory_state(path)
    with pytest.raises(ConfigError, match="'x', which has no min/max statistics"):
        DeltaTable.for_path(spark, path).optimize(zorder_by="x")
    assert directory_state(path) == before


def test_zorder_refuses_a_qbeast_table(spark, tmp_path) -> None:
    from optimize_support import staging_qbeast
    from use import QbeastTable

    path = staging_qbeast(spark, str(tmp_path / "t"), appends=1)
    before = directory_state(path)
    with pytest.raises(ConfigError, match="is a Qbeast table"):
        QbeastTable.for_path(spark, path).optimize(strategy="ZOrder", zorder_by="x")
    assert directory_state(path) == before
