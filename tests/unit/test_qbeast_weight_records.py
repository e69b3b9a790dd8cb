"""Empty blocks recording the weights the format's sampling walk trusts (`use.qbeast.weight_records`),
on synthetic one-dimensional tables: which commits need one, where it goes, what it looks like in the
log, and that every reader of USE's model counts it as a weight and nothing else."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from _optimize_snapshots import MAX_W, MIN_W, files_table, revision
from spec_walk_support import walk_files
from use.delta.actions import AddFile
from use.optimize.strategies._common import RevisionBlocks
from use.qbeast.blocks import Block, blocks_tags
from use.qbeast.metrics import index_metrics
from use.qbeast.query import select_files
from use.qbeast.revision import staging_revision
from use.qbeast.snapshot import QbeastSnapshot
from use.qbeast.weight_records import EMPTY_BLOCK_MIN_WEIGHT, record_weights

REVS = {0: staging_revision("test_table", ["x"], 100, 999), 1: revision(1)}
STATS = '{"numRecords":%d}'


def tagged(files: dict[str, list[Block]], dv: set[str] = frozenset()) -> QbeastSnapshot:
    """A one-dimensional table (cube "" the root, "A"/"g" its halves) of files with these blocks."""
    paths = list(files)
    table = files_table(paths, [100] * len(paths), revisions=[1] * len(paths),
                        stats=[STATS % sum(b.element_count for b in files[p]) for p in paths])  # fmt: skip
    tags = pa.array([list(blocks_tags(1, files[p]).items()) for p in paths], pa.map_(pa.string(), pa.string()))
    table = table.set_column(table.column_names.index("tags"), "tags", tags)
    if dv:
        dvs = [
            {"storageType": "u", "pathOrInlineDv": "x", "sizeInBytes": 1, "cardinality": 1} if p in dv else None for p in paths
        ]
        i = table.column_names.index("deletion_vector")
        table = table.set_column(i, "deletion_vector", pa.array(dvs, table.schema.field(i).type))
    return QbeastSnapshot.from_tables(files=table, blocks=None, revisions=REVS)


def add(path: str, blocks: list[Block]) -> AddFile:
    return AddFile(path, 100, 0, stats=STATS % sum(b.element_count for b in blocks), tags=blocks_tags(1, blocks))


def blocks_of(a: AddFile) -> list[dict]:
    return json.loads(a.tags["blocks"])


def after(qsnap: QbeastSnapshot, adds: list[AddFile], removed: set[str] = frozenset()) -> QbeastSnapshot:
    """The snapshot once the commit's adds (re-adds included) replaced or joined its files."""
    files: dict[str, list[Block]] = {}
    for p, tags in zip(qsnap.files.column("path").to_pylist(), qsnap.files.column("tags").to_pylist(), strict=True):
        if p not in removed:
            files[p] = [
                Block(b["cubeId"], b["minWeight"], b["maxWeight"], b["elementCount"]) for b in json.loads(dict(tags)["blocks"])
            ]
    for a in adds:
        files[a.path] = [Block(b["cubeId"], b["minWeight"], b["maxWeight"], b["elementCount"]) for b in blocks_of(a)]
    return tagged(files)


ROOT_ONLY = {"f0": [Block("", MIN_W + 5, -1000, 10), Block("A", -900, MAX_W, 4)]}


def test_an_append_that_lowers_a_cube_without_writing_to_it_records_the_lower_weight():
    """The append routed its rows by a root weight of -2000 and wrote none into the root: its row of
    weight -1500 went down to A, below the root's old weight -1000. The walk of sample weight -1200
    stopped at the root and missed it; the record in the append's own file lets it descend."""
    qsnap = tagged(ROOT_ONLY)
    appended = add("a0", [Block("A", -1500, MAX_W, 3)])
    adds, readds = record_weights(qsnap, [appended], routing={"": -2000, "A": MAX_W})
    assert readds == []
    assert blocks_of(adds[0])[-1] == {"cubeId": "", "minWeight": MAX_W, "maxWeight": -2000, "elementCount": 0}
    assert EMPTY_BLOCK_MIN_WEIGHT == MAX_W
    assert "a0" not in walk_files(after(qsnap, [appended]), -1200)  # without it
    assert "a0" in walk_files(after(qsnap, adds), -1200)


def test_an_append_whose_rows_land_in_the_lowered_cube_or_stay_above_the_old_weight_records_nothing():
    qsnap = tagged(ROOT_ONLY)
    into_root = [add("a0", [Block("", -2100, -2000, 2), Block("A", -1500, MAX_W, 3)])]
    assert record_weights(qsnap, into_root, routing={"": -2000, "A": MAX_W}) == (into_root, [])
    heavier = [add("a1", [Block("A", -500, MAX_W, 3)])]  # every row below the root weighs more than -1000
    adds, _ = record_weights(qsnap, heavier, routing={"": -2000, "A": MAX_W})
    # the root's status stays -1000 < -500: the walk is exact, but the write's weight is what it routed by
    assert blocks_of(adds[0])[-1]["maxWeight"] == -2000


def test_a_cube_rows_passed_that_holds_no_block_gets_one():
    """Rows passed A (weight -1000) into AA and Ag without one landing in A: the walk went through
    the missing A, but a rewrite of AA's file alone stopped its rows in A, above Ag's."""
    qsnap = tagged({"f0": [Block("", MIN_W + 5, -3000, 10)]})
    new = [add("a0", [Block("AA", -900, MAX_W, 3)]), add("a1", [Block("Ag", -950, MAX_W, 2)])]
    adds, _ = record_weights(qsnap, new, routing={"": -3000, "A": -1000})
    assert [b for b in blocks_of(adds[1]) if b["elementCount"] == 0] == [
        {"cubeId": "A", "minWeight": MAX_W, "maxWeight": -1000, "elementCount": 0}
    ]  # in the file of the lightest row below A
    assert all(b["elementCount"] for b in blocks_of(adds[0]))


def test_a_delete_that_removes_a_cube_s_lowest_weight_keeps_it_in_a_file_that_stays():
    """f1 held the root's lowest maxWeight (-2000) and A's row of weight -1500 sits below it in f2;
    a DELETE moving f1's rows to staging would raise the root's status to -1000 above that row."""
    files = {"f0": [Block("", MIN_W + 5, -1000, 10)], "f1": [Block("", MIN_W + 9, -2000, 4)], "f2": [Block("A", -1500, MAX_W, 4)]}
    qsnap = tagged(files)
    adds, readds = record_weights(qsnap, [], ["f1"])
    assert adds == [] and [a.path for a in readds] == ["f2"]
    assert readds[0].data_change is False and readds[0].stats == STATS % 4
    assert blocks_of(readds[0]) == [
        {"cubeId": "A", "minWeight": -1500, "maxWeight": MAX_W, "elementCount": 4},
        {"cubeId": "", "minWeight": MAX_W, "maxWeight": -2000, "elementCount": 0},
    ]
    assert "f2" in walk_files(after(qsnap, readds, {"f1"}), -1200)
    assert "f2" not in walk_files(after(qsnap, [], {"f1"}), -1200)
    # a file with a deletion vector is never re-added (its add would drop the vector): another one is
    _, readds = record_weights(tagged(files, dv={"f2"}), [], ["f1"])
    assert [a.path for a in readds] == ["f0"]


def test_an_overwrite_keeps_nothing_of_the_old_tree():
    qsnap = tagged({"f0": [Block("", MIN_W + 5, -3000, 10)], "f1": [Block("A", -2900, MAX_W, 3)]})
    new = [add("n0", [Block("", MIN_W + 1, 0, 10), Block("A", 5, MAX_W, 3)])]
    assert record_weights(qsnap, new, ["f0", "f1"], routing={"": 0}, fresh=True) == (new, [])


def test_use_models_count_an_empty_block_as_a_weight_only():
    """The index status folds its maxWeight (and neither rows nor a block), the strategies' and the
    metrics' cube weights too; the snapshot's blocks, and so the optimizer's fragments, the insights'
    and the metrics' counts, never see it; the reader never lists a file for it."""
    qsnap = tagged({
        "f0": [Block("", MIN_W + 5, -1000, 10)],
        "f1": [Block("A", -1500, MAX_W, 3), Block("", EMPTY_BLOCK_MIN_WEIGHT, -2000, 0)],
    })  # fmt: skip
    assert qsnap.blocks.num_rows == 2 and qsnap.empty_blocks.num_rows == 1
    status = qsnap.index_status(1)
    assert status.max_weight_of("") == -2000 and status.element_count_of("") == 10
    assert status.block_counts.tolist() == [1, 1]
    rb = RevisionBlocks.of(qsnap, 1)
    assert dict(zip(rb.cubes.to_pylist(), rb.cube_max_weight().tolist(), strict=True)) == {"": -2000, "A": MAX_W}
    metrics = index_metrics(qsnap)[1]
    assert (metrics.row_count, metrics.block_count, metrics.cube_count) == (13, 2, 2)
    assert metrics.leaf_cube_sizes.count == 1 and metrics.inner_cube_sizes.count == 1
    # a sample that stops in the root reads f0 only; one going deeper also reads f1 for A's rows
    assert select_files(qsnap, None, (MIN_W, -1600)).tolist() == [True, False]
    assert select_files(qsnap, None, (MIN_W, -1400)).tolist() == [True, True]
    assert set(walk_files(qsnap, -1600)) == {"f0"}  # qbeast-spark's walk: the same files
    assert set(walk_files(qsnap, -1400)) == {"f0", "f1"}


def test_a_cube_known_only_by_its_record_is_in_the_status_with_no_rows():
    qsnap = tagged({"f0": [Block("", MIN_W + 5, -3000, 10), Block("AA", -900, MAX_W, 3), Block("A", MAX_W, -1000, 0)]})
    status = qsnap.index_status(1)
    assert status.cubes == ["", "A", "AA"]
    assert status.max_weight_of("A") == -1000 and status.element_count_of("A") == 0
    assert int(np.asarray(status.block_counts)[1]) == 0
    assert sorted(qsnap.blocks.column("cube_id").to_pylist()) == ["", "AA"]
