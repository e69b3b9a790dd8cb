"""Column mapping (modes `name` and `id`): tables whose files, stats and partition values use physical
names are read under their logical names, pruned correctly, and refused for writes.

The tables are written here, by hand, the way delta-spark writes them: data files with physical column
names and parquet field ids, `add.stats` and `add.partitionValues` keyed by physical names.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import QueryBuilder

from use.delta import AddFile, DeltaLog
from use.delta.columnmapping import ColumnMapping
from use.delta.predicates import And, Comparison, IsNull
from use.delta.skipping import files_matching
from use.delta.stats_parse import parse_stats
from use.errors import CorruptLogError, UnsupportedFeatureError
from use.qbeast.query import select_files
from use.qbeast.snapshot import QbeastSnapshot

# logical name, Delta type, id, physical name; "s" is a struct with one field
FIELDS = [
    ("Id", "long", 1, "col-7f3a-id"),
    ("Name With Space", "string", 2, "col-91bc-name"),
    ("s", {"type": "struct", "fields": [("inner x", "integer", 4, "col-2d4e-x")]}, 3, "col-55aa-s"),
    ("Part", "string", 5, "col-c0de-part"),
]
ROWS = {  # partition value -> rows (Id, Name With Space, s.inner x)
    "a": [(1, "one", 10), (2, "two", 20), (3, None, 30)],
    "b": [(4, "four", 40), (5, "five", None), (6, "six", 60)],
}


def _field(name, typ, fid, phys):
    if isinstance(typ, dict):
        typ = {"type": "struct", "fields": [_field(*f) for f in typ["fields"]]}
    return {
        "name": name,
        "type": typ,
        "nullable": True,
        "metadata": {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": phys},
    }


def schema_string() -> str:
    return json.dumps({"type": "struct", "fields": [_field(*f) for f in FIELDS]})


def _file_schema(mode: str, *, odd_names: bool) -> pa.Schema:
    """The data files' schema: physical names (or, to prove matching by id, other names) + field ids."""

    def name(phys: str) -> str:
        return f"renamed_{phys[-2:]}" if odd_names else phys

    def meta(fid: int) -> dict[bytes, bytes]:
        return {b"PARQUET:field_id": str(fid).encode()}

    inner = pa.field(name("col-2d4e-x"), pa.int32(), metadata=meta(4))
    return pa.schema(
        [
            pa.field(name("col-7f3a-id"), pa.int64(), metadata=meta(1)),
            pa.field(name("col-91bc-name"), pa.string(), metadata=meta(2)),
            pa.field(name("col-55aa-s"), pa.struct([inner]), metadata=meta(3)),
        ]
    )


def _stats(rows) -> str:
    ids = [r[0] for r in rows]
    names = [r[1] for r in rows if r[1] is not None]
    xs = [r[2] for r in rows if r[2] is not None]
    return json.dumps(
        {
            "numRecords": len(rows),
            "minValues": {"col-7f3a-id": min(ids), "col-91bc-name": min(names), "col-55aa-s": {"col-2d4e-x": min(xs)}},
            "maxValues": {"col-7f3a-id": max(ids), "col-91bc-name": max(names), "col-55aa-s": {"col-2d4e-x": max(xs)}},
            "nullCount": {
                "col-7f3a-id": 0,
                "col-91bc-name": len(rows) - len(names),
                "col-55aa-s": {"col-2d4e-x": len(rows) - len(xs)},
            },
        }
    )


def make_table(
    root: str, mode: str = "name", *, odd_names: bool = False, null_partition: bool = False, qbeast: bool = False
) -> None:
    """A partitioned column-mapped table in two commits (create + one file per partition); with
    `qbeast`, its configuration also holds a staging revision indexing `Id` (a converted table)."""
    os.makedirs(os.path.join(root, "_delta_log"))
    if mode == "name":
        protocol = {"minReaderVersion": 2, "minWriterVersion": 5}
    else:
        protocol = {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["columnMapping"],
            "writerFeatures": ["columnMapping"],
        }
    metadata = {
        "id": "cm-table",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema_string(),
        "partitionColumns": ["Part"],
        "createdTime": 1,
        "configuration": {"delta.columnMapping.mode": mode, "delta.columnMapping.maxColumnId": "5"},
    }
    if qbeast:
        from use.qbeast.revision import configuration_with_revision, staging_revision

        metadata["configuration"] = configuration_with_revision(
            metadata["configuration"], staging_revision(root, ["Id"], 1000, 1)
        )
    v0 = [{"commitInfo": {"operation": "CREATE TABLE"}}, {"protocol": protocol}, {"metaData": metadata}]
    v1 = [{"commitInfo": {"operation": "WRITE"}}]
    file_schema = _file_schema(mode, odd_names=odd_names)
    for part, rows in ROWS.items():
        value = None if (null_partition and part == "b") else part
        rel = f"col-c0de-part={value or '__HIVE_DEFAULT_PARTITION__'}/part-{part}.parquet"
        data = pa.table(
            [
                pa.array([r[0] for r in rows], pa.int64()),
                pa.array([r[1] for r in rows], pa.string()),
                pa.array([{file_schema[2].type.field(0).name: r[2]} for r in rows], file_schema[2].type),
            ],
            schema=file_schema,
        )
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        pq.write_table(data, os.path.join(root, rel))
        v1.append(
            {
                "add": {
                    "path": rel,
                    "partitionValues": {"col-c0de-part": value},
                    "size": os.path.getsize(os.path.join(root, rel)),
                    "modificationTime": 2,
                    "dataChange": True,
                    "stats": _stats(rows),
                }
            }
        )
    for v, actions in enumerate((v0, v1)):
        with open(os.path.join(root, "_delta_log", f"{v:020d}.json"), "w") as fh:
            fh.write("\n".join(json.dumps(a) for a in actions) + "\n")


def edit_first_commit(root: str, old: str, new: str) -> None:
    path = os.path.join(root, "_delta_log", f"{0:020d}.json")
    with open(path) as fh:
        text = fh.read()
    assert old in text
    with open(path, "w") as fh:
        fh.write(text.replace(old, new))


def expected_rows(part_filter=None) -> list[tuple]:
    return sorted((r[0], r[1], r[2], p) for p, rows in ROWS.items() for r in rows if part_filter is None or p == part_filter)


# --- the log, without Spark --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["name", "id"])
def test_snapshot_reads_a_column_mapped_table(tmp_path, mode):
    root = str(tmp_path / "t")
    make_table(root, mode)
    snap = DeltaLog.for_path(root).snapshot()
    assert snap.schema.names == ["Id", "Name With Space", "s", "Part"]
    cm = snap.column_mapping
    assert cm.mode == mode and cm.active
    assert cm.physical_name("Part") == "col-c0de-part"
    assert cm.physical_path(("s", "inner x")) == ("col-55aa-s", "col-2d4e-x")
    physical = cm.physical_schema
    assert physical.names == ["col-7f3a-id", "col-91bc-name", "col-55aa-s", "col-c0de-part"]
    assert physical.field("col-55aa-s").type.field(0).name == "col-2d4e-x"
    if mode == "id":
        assert physical.field("col-7f3a-id").metadata[b"PARQUET:field_id"] == b"1"
    # The log keeps the physical keys, and only those (checkpoints and removes stay exact) ...
    assert sorted(map(tuple, snap.files.column("partition_values").to_pylist())) == [
        (("col-c0de-part", "a"),),
        (("col-c0de-part", "b"),),
    ]
    # ... and the stats read under logical names, by physical keys.
    stats = parse_stats(snap.files, snap.schema, column_mapping=cm)
    by_path = dict(zip(snap.files.column("path").to_pylist(), range(snap.num_files), strict=False))
    a = by_path["col-c0de-part=a/part-a.parquet"]
    assert stats.column("min.Id")[a].as_py() == 1 and stats.column("max.s.inner x")[a].as_py() == 30
    assert stats.column("null_count.Name With Space")[a].as_py() == 1
    # delta-rs reads the same table to the same rows (through DataFusion: its pyarrow dataset path
    # returns nulls for mapped columns).
    rs = pa.table(QueryBuilder().register("t", RsDeltaTable(root)).execute("select * from t").read_all())
    assert rs.column_names == ["Id", "Name With Space", "s", "Part"]
    got = sorted((r["Id"], r["Name With Space"], r["s"]["inner x"], r["Part"]) for r in rs.to_pylist())
    assert got == expected_rows()


def test_skipping_uses_physical_stats_and_partition_keys(tmp_path):
    root = str(tmp_path / "t")
    make_table(root, "name", null_partition=True)
    snap = DeltaLog.for_path(root).snapshot()
    cm = snap.column_mapping
    paths = snap.files.column("path").to_pylist()

    def kept(predicate):
        mask = files_matching(snap.files, predicate, snap.schema, partition_columns=snap.partition_columns, column_mapping=cm)
        return sorted(p.split("/")[0] for p, k in zip(paths, mask.to_pylist(), strict=False) if k)

    assert kept(Comparison("Id", ">", 4)) == ["col-c0de-part=__HIVE_DEFAULT_PARTITION__"]
    assert kept(Comparison("id", "<=", 2)) == ["col-c0de-part=a"]  # names resolve case-insensitively
    assert kept(Comparison("s.inner x", ">=", 35)) == ["col-c0de-part=__HIVE_DEFAULT_PARTITION__"]
    assert kept(Comparison("Name With Space", "=", "zzz")) == []
    assert kept(Comparison("Part", "=", "a")) == ["col-c0de-part=a"]
    assert kept(IsNull("Part")) == ["col-c0de-part=__HIVE_DEFAULT_PARTITION__"]
    assert kept(And(Comparison("Part", "=", "a"), Comparison("Id", ">", 2))) == ["col-c0de-part=a"]
    # The Qbeast reader's file selection goes through the same mapping.
    qsnap = QbeastSnapshot.from_delta(snap)
    assert qsnap.column_mapping is cm
    assert select_files(qsnap, Comparison("Id", ">", 4)).to_pylist() == [p.startswith("col-c0de-part=__") for p in paths]


def test_mapped_schema_without_physical_names_is_corrupt(tmp_path):
    root = str(tmp_path / "t")
    make_table(root, "name")
    edit_first_commit(root, '\\"delta.columnMapping.physicalName\\": \\"col-91bc-name\\"', '\\"x\\": 1')
    with pytest.raises(CorruptLogError, match="Name With Space has no delta.columnMapping.physicalName"):
        DeltaLog.for_path(root).snapshot()


def test_unknown_column_mapping_mode_is_refused(tmp_path):
    root = str(tmp_path / "t")
    make_table(root, "name")
    edit_first_commit(root, '"delta.columnMapping.mode": "name"', '"delta.columnMapping.mode": "ordinal"')
    with pytest.raises(UnsupportedFeatureError, match="ordinal") as err:
        DeltaLog.for_path(root).snapshot()
    assert err.value.feature == "columnMapping"


def test_mode_ignored_without_protocol_support(tmp_path):
    # The property counts only when the protocol supports column mapping: here files use display names.
    root = str(tmp_path / "t")
    make_table(root, "name")
    edit_first_commit(root, '"minReaderVersion": 2', '"minReaderVersion": 1')
    cm = DeltaLog.for_path(root).snapshot().column_mapping
    assert cm.mode == "none" and cm.physical_name("Part") == "Part" and cm.physical_path(("s", "inner x")) == ("s", "inner x")


def test_to_logical_renames_and_matches_ids(tmp_path):
    root = str(tmp_path / "t")
    make_table(root, "id", odd_names=True)
    cm = DeltaLog.for_path(root).snapshot().column_mapping
    data = pq.ParquetFile(os.path.join(root, "col-c0de-part=a", "part-a.parquet")).read()
    out = cm.to_logical(data)
    assert out.column_names == ["Id", "Name With Space", "s", "Part"]
    assert out.column("Id").to_pylist() == [1, 2, 3]
    assert out.column("Part").null_count == 3  # partition values come from the log, not the file
    # nested fields are found by physical name; the odd names here do not match, so they read as null
    assert out.column("s").to_pylist() == [{"inner x": None}] * 3


# --- writes are refused, with nothing written -------------------------------------------------------


def _listing(root: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


@pytest.mark.parametrize("mode", ["name", "id"])
def test_writes_to_column_mapped_tables_are_refused(tmp_path, mode):
    root = str(tmp_path / "t")
    make_table(root, mode)
    before = _listing(root)
    txn = DeltaLog.for_path(root).start_transaction()
    txn.add(AddFile("col-c0de-part=a/x.parquet", 1, 1, partition_values={"Part": "a"}))
    with pytest.raises(UnsupportedFeatureError, match="column mapping.*does not write") as err:
        txn.commit("WRITE")
    assert err.value.feature == "columnMapping"
    from use.delta.vacuum import vacuum

    with pytest.raises(UnsupportedFeatureError):
        vacuum(DeltaLog.for_path(root), 0, enforce_retention_check=False)
    assert _listing(root) == before


def test_spark_writes_and_optimize_refused_before_writing(spark, tmp_path):
    from use import DeltaTable, QbeastTable

    root = str(tmp_path / "t")
    make_table(root, "name")
    before = _listing(root)
    df = spark.createDataFrame(
        [(7, "seven", {"inner x": 70}, "a")], "Id long, `Name With Space` string, s struct<`inner x`: int>, Part string"
    )
    with pytest.raises(UnsupportedFeatureError, match="column mapping"):
        QbeastTable.write(df, root, columns_to_index=["Id"])
    with pytest.raises(UnsupportedFeatureError, match="column mapping"):
        DeltaTable.for_path(spark, root).optimize()
    assert _listing(root) == before


# --- reading on Spark -------------------------------------------------------------------------------


def _rows(df) -> list[tuple]:
    return sorted(
        (r["Id"], r["Name With Space"], r["s"]["inner x"] if r["s"] is not None else None, r["Part"]) for r in df.collect()
    )


@pytest.mark.parametrize("mode", ["name", "id"])
def test_spark_reads_logical_columns(spark, tmp_path, mode):
    from use import DeltaTable, QbeastTable
    from use.qbeast.reader import plan_read

    root = str(tmp_path / "t")
    make_table(root, mode, qbeast=True)
    qt = QbeastTable.for_path(spark, root)
    df = qt.read()
    assert df.columns == ["Id", "Name With Space", "s", "Part"]
    assert df.schema["s"].dataType.fieldNames() == ["inner x"]
    assert _rows(df) == expected_rows()
    assert _rows(qt.read(filter="Id > 4")) == [r for r in expected_rows() if r[0] > 4]
    assert _rows(qt.read(filter="`s`.`inner x` < 25")) == [r for r in expected_rows() if r[2] is not None and r[2] < 25]
    plan = plan_read(spark, qt.snapshot(), filter="Id > 4")
    assert plan.num_files == 1  # pruned by the physical stats
    sample = _rows(qt.read(sample=0.5))  # hashes the logical column (the staging revision indexes Id)
    assert 0 < len(sample) < 6 and set(sample) <= set(expected_rows())
    assert _rows(DeltaTable.for_path(spark, root).read(filter="Part = 'a'")) == expected_rows("a")
    # SQL and format(...) reads map the names too (they read every column as NULL before), with pruning and samples
    fmt = spark.read.format("qbeast").load(root)
    assert sorted((r["Id"], r["Name With Space"]) for r in fmt.collect()) == [(r[0], r[1]) for r in expected_rows()]
    assert _rows(fmt) == expected_rows() and _rows(fmt.where("Id > 4")) == [r for r in expected_rows() if r[0] > 4]
    assert _rows(fmt.sample(0.5)) == sample
    sql = spark.sql(f"SELECT * FROM delta.`{root}` WHERE Part = 'a' AND `s`.`inner x` IS NOT NULL OR Id = 1")
    assert _rows(sql) == [r for r in expected_rows() if (r[3] == "a" and r[2] is not None) or r[0] == 1]
    pruned = spark.sql(f"SELECT Id FROM delta.`{root}` WHERE Id > 4")._jdf.queryExecution().executedPlan().toString()
    assert f"1 of {len(ROWS)} files" in pruned, pruned
    # ... but DML, which writes, is refused before anything is written
    before = sorted(os.listdir(os.path.join(root, "_delta_log")))
    with pytest.raises(
        Exception, match=rf"DELETE on the table at .* uses Delta column mapping \(delta.columnMapping.mode={mode}\)"
    ):
        spark.sql(f"DELETE FROM delta.`{root}` WHERE Id > 4").collect()
    assert sorted(os.listdir(os.path.join(root, "_delta_log"))) == before


def test_spark_id_mode_matches_field_ids_not_names(spark, tmp_path):
    # The files' column names match nothing in the schema; only their parquet field ids do.
    from use import DeltaTable

    root = str(tmp_path / "t")
    make_table(root, "id", odd_names=True)
    df = DeltaTable.for_path(spark, root).read()
    got = sorted((r["Id"], r["Name With Space"], r["Part"]) for r in df.collect())
    assert got == [(r[0], r[1], r[3]) for r in expected_rows()]
    assert spark.conf.get("spark.sql.parquet.fieldId.read.enabled") == "true"


def test_column_mapping_of_a_plain_table_is_identity():
    schema = pa.schema([("a", pa.int64()), ("b", pa.struct([("c", pa.int32())]))])
    cm = ColumnMapping("none", schema)
    assert not cm.active and cm.physical_schema is schema and cm.physical_path(("b", "c")) == ("b", "c")
    data = pa.table({"b": pa.array([{"c": 1}], schema.field("b").type), "a": pa.array([1], pa.int32())})
    assert cm.to_logical(data).to_pylist() == [{"a": 1, "b": {"c": 1}}]
