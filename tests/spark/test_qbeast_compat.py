"""A table whose log is written by hand exactly as qbeast-spark writes it (spec §7.1/§7.2) is read,
filtered and sampled correctly; the same table is a valid Delta table for delta-rs."""

from __future__ import annotations

import json
import os
import random
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from use.delta.stats import file_stats_json
from use.qbeast.cube import CubeId
from use.qbeast.weight import MAX_WEIGHT, spark_hash, weight_from_fraction

ROOT_WEIGHT = weight_from_fraction(0.2)
SCHEMA = pa.schema([("x", pa.int32()), ("y", pa.float64()), ("name", pa.string()), ("payload", pa.string())])
SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "x", "type": "integer", "nullable": True, "metadata": {}},
            {"name": "y", "type": "double", "nullable": True, "metadata": {}},
            {"name": "name", "type": "string", "nullable": True, "metadata": {}},
            {"name": "payload", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)
REVISION_0 = (
    '{"revisionID":0,"timestamp":1726222122374,"tableID":"%s","desiredCubeSize":400,'
    '"columnTransformers":[{"className":"io.qbeast.core.transform.EmptyTransformer","columnName":"x"},'
    '{"className":"io.qbeast.core.transform.EmptyTransformer","columnName":"y"}],'
    '"transformations":[{"className":"io.qbeast.core.transform.EmptyTransformation"},'
    '{"className":"io.qbeast.core.transform.EmptyTransformation"}]}'
)
REVISION_1 = (
    '{"revisionID":1,"timestamp":1726222122375,"tableID":"%s","desiredCubeSize":400,'
    '"columnTransformers":[{"className":"io.qbeast.core.transform.LinearTransformer","columnName":"x","dataType":"IntegerDataType"},'
    '{"className":"io.qbeast.core.transform.LinearTransformer","columnName":"y","dataType":"DoubleDataType"}],'
    '"transformations":[{"className":"io.qbeast.core.transform.LinearTransformation","minNumber":0,"maxNumber":999,'
    '"nullValue":500,"orderedDataType":"IntegerDataType"},'
    '{"className":"io.qbeast.core.transform.LinearTransformation","minNumber":0.0,"maxNumber":1.0,"nullValue":0.5,'
    '"orderedDataType":"DoubleDataType"}]}'
)


def _rows(rng: random.Random, n: int) -> list[dict]:
    names = ["ann", "bob", "cyd", "dee", None]
    return [
        {"x": rng.randint(0, 999), "y": rng.random(), "name": rng.choice(names), "payload": uuid.uuid4().hex[:8]}
        for _ in range(n)
    ]


def _weight(r: dict) -> int:
    return spark_hash([r["x"], r["y"]], ["int", "double"])


def _write(root: str, rows: list[dict], stats: bool = True) -> dict:
    name = f"{uuid.uuid4()}.parquet"
    path = os.path.join(root, name)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
    add = {
        "path": name,
        "partitionValues": {},
        "size": os.path.getsize(path),
        "modificationTime": int(os.path.getmtime(path) * 1000),
        "dataChange": True,
    }
    if stats:
        add["stats"] = file_stats_json(pq.read_metadata(path), SCHEMA)
    return add


def _blocks(rows_by_cube: dict[str, list[dict]], legacy: bool) -> str:
    out = []
    for cube, rows in rows_by_cube.items():
        block = {
            "cubeId": cube,
            "minWeight": min(_weight(r) for r in rows),
            "maxWeight": ROOT_WEIGHT if cube == "" else MAX_WEIGHT,
            "elementCount": len(rows),
        }
        if legacy:  # qbeast-spark 0.6/0.7 also wrote "replicated"
            block["replicated"] = False
        out.append(block)
    return json.dumps(out, separators=(",", ":"))


@pytest.fixture(scope="module")
def handmade(tmp_path_factory):
    """Revision 1 over (x, y): the root holds weights <= Weight(0.2); four leaf children hold the
    rest, rolled up two per file; plus one untagged staging file (written by a plain Delta writer)."""
    root = str(tmp_path_factory.mktemp("handmade"))
    os.makedirs(os.path.join(root, "_delta_log"))
    rng = random.Random(7)
    rows = _rows(rng, 1600)
    cubes: dict[str, list[dict]] = {}
    for r in rows:
        if _weight(r) <= ROOT_WEIGHT:
            cubes.setdefault("", []).append(r)
        else:
            cube = CubeId.container((r["x"] / 999, r["y"]), 1).to_string()
            cubes.setdefault(cube, []).append(r)
    assert set(cubes) == {"", "A", "Q", "g", "w"}
    adds = []
    a = _write(root, cubes[""])
    a["tags"] = {"revision": "1", "blocks": _blocks({"": cubes[""]}, legacy=True)}
    adds.append(a)
    b = _write(root, cubes["A"] + cubes["Q"])  # x < 500
    b["tags"] = {"revision": "1", "blocks": _blocks({"A": cubes["A"], "Q": cubes["Q"]}, legacy=False)}
    adds.append(b)
    c = _write(root, cubes["g"] + cubes["w"], stats=False)  # x >= 500; no stats: only the cubes prune it
    c["tags"] = {"revision": "1", "blocks": _blocks({"g": cubes["g"], "w": cubes["w"]}, legacy=True)}
    adds.append(c)
    staging_rows = _rows(rng, 150)
    adds.append(_write(root, staging_rows))  # no tags at all: staging
    commit0 = [
        {"commitInfo": {"timestamp": 1726222122375, "operation": "WRITE", "operationParameters": {"mode": "Append"}}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": SCHEMA_STRING,
                "partitionColumns": [],
                "configuration": {
                    "qbeast.lastRevisionID": "1",
                    "qbeast.revision.0": REVISION_0 % root,
                    "qbeast.revision.1": REVISION_1 % root,
                },
                "createdTime": 1726222122375,
            }
        },
        *({"add": add} for add in adds),
    ]
    with open(os.path.join(root, "_delta_log", "00000000000000000000.json"), "w") as f:
        f.write("\n".join(json.dumps(a) for a in commit0) + "\n")
    return root, rows + staging_rows, [a["path"] for a in adds]


def _rowset(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_snapshot_sees_revisions_files_and_blocks(handmade):
    from use.qbeast.reader import load_snapshot

    root, rows, paths = handmade
    qsnap = load_snapshot(root)
    assert qsnap.is_qbeast and qsnap.latest_revision_id == 1 and sorted(qsnap.revisions) == [0, 1]
    assert qsnap.files.num_rows == 4
    assert sorted(qsnap.blocks.column("cube_id").to_pylist()) == ["", "", "A", "Q", "g", "w"]


def test_full_read_and_filters(spark, handmade):
    from use import QbeastTable
    from use.qbeast.reader import plan_read

    root, rows, paths = handmade
    qt = QbeastTable.for_path(spark, root)
    full = spark.read.parquet(*[os.path.join(root, p) for p in paths])
    assert qt.read().count() == len(rows)
    for f in [
        "x >= 600 and y < 0.3",
        "x < 100 or x > 900",
        "name is null",
        "name in ('ann', 'bob') and x < 500",
        "payload = 'nothing'",
        "y between 0.4 and 0.45",
    ]:
        assert _rowset(qt.read(filter=f)) == _rowset(full.filter(f)), f
    qsnap = qt.snapshot()
    # x >= 600: file b (x < 500) is dropped by its stats and its cubes; file c has no stats but its cubes
    # lie at x >= 500, so it is read, as is the root file.
    plan = plan_read(spark, qsnap, filter="x >= 600")
    assert paths[1] not in plan.files.column("path").to_pylist() and paths[2] in plan.files.column("path").to_pylist()
    plan = plan_read(spark, qsnap, filter="x < 400")
    assert paths[2] not in plan.files.column("path").to_pylist()  # pruned by the cube space alone


def test_samples_are_exact_and_pruned(spark, handmade):
    from pyspark.sql import functions as F

    from use import QbeastTable
    from use.qbeast.reader import plan_read

    root, rows, paths = handmade
    qt = QbeastTable.for_path(spark, root)
    full = qt.read()
    for fraction in (0.05, 0.1, 0.2, 0.5):
        expected = full.filter(F.hash("x", "y") < weight_from_fraction(fraction))
        assert _rowset(qt.read(sample=fraction)) == _rowset(expected), fraction
    plan = plan_read(spark, qt.snapshot(), sample=0.1)
    # only the root file (its cube covers weights up to 0.2) and the staging file
    assert sorted(plan.files.column("path").to_pylist()) == sorted([paths[0], paths[3]])
    assert plan_read(spark, qt.snapshot(), sample=0.5).num_files == 4
    # sample and filter together
    got = qt.read(sample=0.3, filter="x >= 500")
    assert _rowset(got) == _rowset(full.filter("x >= 500").filter(F.hash("x", "y") < weight_from_fraction(0.3)))


def test_delta_rs_reads_the_same_table(handmade):
    deltalake = pytest.importorskip("deltalake")
    root, rows, paths = handmade
    assert deltalake.DeltaTable(root).to_pyarrow_table().num_rows == len(rows)


def test_index_metrics_of_the_handmade_tree(spark, handmade):
    from use import QbeastTable

    root, rows, paths = handmade
    m = QbeastTable.for_path(spark, root).index_metrics(1)
    assert m.cube_count == 5 and m.depth == 2 and m.file_count == 3 and m.block_count == 5
    assert m.inner_cube_sizes.count == 1 and m.leaf_cube_sizes.count == 4
    assert m.row_count == 1600 and m.avg_fanout == 4.0
    assert m.blocks_per_file.max == 2 and m.blocks_per_file.min == 1
    assert sum(m.file_levels.values()) == 3
    assert "revision 1" in str(m)
