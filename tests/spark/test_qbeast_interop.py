"""Where this project's Qbeast format must behave as qbeast-spark's own code does (issue 10, part B).

Each test pins one defect or difference an audit against qbeast-spark found; the expected values come
from the format spec (`../shared/docs/qbeast-format.md`) and qbeast-spark's published source
(`SampleRule`, `LinearTransformation` and its Jackson deserializer, `QbeastOptions`,
`DeltaMetadataWriter`), never from running it.
"""

from __future__ import annotations

import json
import os

import pytest

from use.delta.log import DeltaLog

# An int whose Spark `hash()` is exactly 2^31-1 = Weight(1.0). Found by running Spark's Murmur3
# backwards (for one int column every step - fmix, mixH1 with seed 42, mixK1 - is a bijection of
# 32-bit words); the test checks it with Spark itself.
HASH_IS_MAX = 2131931348


def _log_lines(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _commits(path: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(path, "_delta_log")) if n.endswith(".json"))


# --- B2: a new table is one commit; its schema nullable -------------------------------------------


def test_new_table_is_one_commit_with_its_files_and_app_transaction(spark, tmp_path) -> None:
    """qbeast-spark (a Delta write) makes a new table in one commit: protocol, metaData, adds (and
    the idempotent-write txn); before, version 0 was an empty CREATE TABLE and the data came in 1."""
    deltalake = pytest.importorskip("deltalake")
    from use.qbeast.writer import write

    path = str(tmp_path / "t")
    df = spark.range(0, 2_000, numPartitions=2).selectExpr("id", "CAST(id % 97 AS DOUBLE) AS x")
    res = write(spark, df, path, ["id", "x"], cube_size=300, txn_app_id="loader", txn_version=7)
    assert res.version == 0 and _commits(path) == [f"{0:020d}.json"]
    lines = _log_lines(path, 0)
    kinds = [next(iter(a)) for a in lines]
    assert kinds.count("protocol") == 1 and kinds.count("metaData") == 1 and kinds.count("txn") == 1
    assert kinds.count("add") == res.num_files >= 2
    info = lines[0]["commitInfo"]
    assert info["operation"] == "WRITE" and info["operationParameters"]["mode"] == "Append"
    assert DeltaLog.for_path(path).snapshot().app_transaction_version("loader") == 7
    # delta-rs reads the table at version 0 with every file and row
    dt = deltalake.DeltaTable(path)
    assert dt.version() == 0 and len(dt.file_uris()) == res.num_files
    assert dt.to_pyarrow_table().num_rows == 2_000
    # the repeat of an idempotent write is skipped
    again = write(spark, df, path, ["id", "x"], txn_app_id="loader", txn_version=7)
    assert again.num_files == 0 and _commits(path) == [f"{0:020d}.json"]


def test_empty_write_to_a_new_path_is_one_commit(spark, tmp_path) -> None:
    from use.qbeast.writer import write

    path = str(tmp_path / "t")
    res = write(spark, spark.range(0).selectExpr("id", "CAST(id AS DOUBLE) AS x"), path, ["id", "x"])
    assert res.version == 0 and res.num_files == 0 and _commits(path) == [f"{0:020d}.json"]
    conf = next(a["metaData"] for a in _log_lines(path, 0) if "metaData" in a)["configuration"]
    assert conf["qbeast.lastRevisionID"] == "0"


def _all_nullable(schema_string: str) -> list[str]:
    """The (nested) fields of a Delta schema that are not nullable."""
    bad: list[str] = []

    def walk(t: object, where: str) -> None:
        if isinstance(t, dict):
            if t.get("type") == "struct":
                for f in t["fields"]:
                    if not f["nullable"]:
                        bad.append(f"{where}{f['name']}")
                    walk(f["type"], f"{where}{f['name']}.")
            elif t.get("type") == "array":
                if not t["containsNull"]:
                    bad.append(f"{where}element")
                walk(t["elementType"], where)
            elif t.get("type") == "map":
                if not t["valueContainsNull"]:
                    bad.append(f"{where}value")
                walk(t["valueType"], where)

    walk(json.loads(schema_string), "")
    return bad


def test_written_schema_is_stored_nullable(spark, tmp_path) -> None:
    """Delta and qbeast-spark store a written schema as nullable (`asNullable`, nested types too), so
    a later append (by qbeast-spark or anyone) may bring nulls; before, columns of non-nullable
    expressions were stored `nullable=false`."""
    from use.qbeast.writer import write

    path = str(tmp_path / "t")
    df = spark.range(0, 500, numPartitions=1).selectExpr(
        "id", "CAST(id AS DOUBLE) AS x", "named_struct('a', id, 'b', array(id)) AS s", "map('k', id) AS m"
    )
    assert not df.schema["id"].nullable and not df.schema["s"].dataType["a"].nullable
    write(spark, df, path, ["id", "x"], cube_size=200)
    meta = next(a["metaData"] for a in _log_lines(path, 0) if "metaData" in a)
    assert _all_nullable(meta["schemaString"]) == []
    # an overwrite stores its schema the same way
    res = write(spark, df.drop("m"), path, ["id"], cube_size=200, mode="overwrite")
    meta = next(a["metaData"] for a in _log_lines(path, res.version) if "metaData" in a)
    assert _all_nullable(meta["schemaString"]) == []
    assert [f["name"] for f in json.loads(meta["schemaString"])["fields"]] == ["id", "x", "s"]
    # and a null can then be appended to a column that had none
    nulls = spark.sql("SELECT CAST(NULL AS BIGINT) AS id, 1.0D AS x, CAST(NULL AS STRUCT<a: BIGINT, b: ARRAY<BIGINT>>) AS s")
    write(spark, nulls, path, ["id"])
    from use.qbeast.reader import read

    assert read(spark, path, filter="id IS NULL").count() == 1


def test_create_with_first_files_checks_them_and_writes_nothing_when_bad(tmp_path) -> None:
    """`DeltaLog.create(actions=...)`, the one-commit creation the writer and convert use."""
    import pyarrow as pa

    from use.delta.actions import AddFile, RemoveFile
    from use.errors import InvalidArgumentError

    schema = pa.schema([("a", pa.int64())])
    add = AddFile(path="f.parquet", size=1, modification_time=0, data_change=True)
    partitioned = AddFile(path="g.parquet", size=1, modification_time=0, data_change=True, partition_values={"a": "1"})
    for bad in ([add, add], [partitioned], [RemoveFile(path="f.parquet", deletion_timestamp=0)]):
        log = DeltaLog.for_path(str(tmp_path / "t"))
        with pytest.raises(InvalidArgumentError):
            log.create(schema, actions=bad)
        assert not log.exists()
    log = DeltaLog.for_path(str(tmp_path / "t"))
    snap = log.create(schema, actions=[add], operation="WRITE", operation_parameters={"mode": "Append"})
    assert snap.version == 0 and snap.files.column("path").to_pylist() == ["f.parquet"]


# --- B2: sample(1.0) and sample(0) as qbeast-spark's SampleRule ------------------------------------


def test_sample_one_drops_the_max_hash_and_sample_zero_returns_nothing(spark, tmp_path) -> None:
    """qbeast-spark rewrites `sample(f)` into `hash < Weight(f)`: Weight(1.0) = 2^31-1, so the rows
    hashing to exactly that are not in `sample(1.0)`, and Weight(0.0) = -2^31 selects nothing.
    Before, sample(1.0) kept every row and sample(0) was refused."""
    from use.qbeast.reader import plan_read, read
    from use.qbeast.writer import write

    assert spark.sql(f"SELECT hash({HASH_IS_MAX})").first()[0] == 2**31 - 1
    path = str(tmp_path / "t")
    df = spark.sql(f"SELECT CAST(id AS INT) AS x, id AS v FROM range(1000) UNION ALL SELECT {HASH_IS_MAX}, -1")
    write(spark, df, path, ["x"], cube_size=100)
    whole = read(spark, path, sample=1.0)
    assert whole.count() == 1000 and whole.filter(f"x = {HASH_IS_MAX}").count() == 0
    assert read(spark, path).count() == 1001
    assert read(spark, path, sample=0).count() == 0 and read(spark, path, sample=0.0).count() == 0
    from use.qbeast.reader import load_snapshot

    assert plan_read(spark, load_snapshot(path), sample=0).num_files == 0


# --- B2: legacy null values, float and decimal bounds as upstream reads and computes them ----------

P = "io.qbeast.core.transform."


def test_legacy_linear_null_value_is_regenerated_as_upstream(spark) -> None:
    """A pre-0.2 LinearTransformation has no nullValue; Scala seeds a `Random` with
    `MurmurHash3.stringHash` of the JSON tree its deserializer sees, which no longer holds the
    `className` type id (qbeast-spark's JSONSerializationTests: tree
    `{"minNumber":0,"maxNumber":10,"orderedDataType":"IntegerDataType"}`, null value
    `0 + (nextDouble * 10).toInt`). Before, `className` was hashed too (null value 4, not 7)."""
    from use.qbeast.java_values import JavaRandom, scala_string_hash
    from use.qbeast.transformers import transformation_from_json_obj

    tree = '{"minNumber":0,"maxNumber":10,"orderedDataType":"IntegerDataType"}'
    jvm = spark.sparkContext._jvm
    murmur = getattr(getattr(jvm.scala.util.hashing, "MurmurHash3$"), "MODULE$")  # Scala's library, in Spark's JVM
    seed = murmur.stringHash(tree)
    assert scala_string_hash(tree) == seed
    r = jvm.java.util.Random(seed).nextDouble()
    assert JavaRandom(seed).next_double() == r
    legacy = {"className": P + "LinearTransformation", "minNumber": 0, "maxNumber": 10, "orderedDataType": "IntegerDataType"}
    t = transformation_from_json_obj(legacy)
    assert t.null_value == 0 + int(r * 10) == 7
    wide = transformation_from_json_obj(dict(legacy, maxNumber=4_000_000, orderedDataType="LongDataType"))
    wide_tree = '{"minNumber":0,"maxNumber":4000000,"orderedDataType":"LongDataType"}'
    wide_seed = murmur.stringHash(wide_tree)
    assert wide.null_value == int(jvm.java.util.Random(wide_seed).nextDouble() * 4_000_000)


def test_float_bounds_are_the_float32_upstream_reads() -> None:
    """Scala reads a FloatDataType bound as `floatValue` of the JSON number: 0.10002996772527695 for
    "0.10002997", not the double 0.10002997. Before, the double was used, so the revision read back
    from the log differed from the one the rows were placed with."""
    import json

    import numpy as np
    import pyarrow as pa

    from use.qbeast.transform import LinearTransformation
    from use.qbeast.transformers import LinearTransformer, transformation_from_json_obj

    obj = {
        "className": P + "LinearTransformation",
        "minNumber": 0.1,
        "maxNumber": 0.10002997,
        "nullValue": 0.1,
        "orderedDataType": "FloatDataType",
    }
    t = transformation_from_json_obj(obj)
    assert t.max_number == 0.10002996772527695 and t.min_number == float(np.float32(0.1))
    values = pa.array([0.1, 0.10001, 0.10002997], pa.float32())
    mn, mx = float(np.float32(0.1)), float(np.float32(0.10002997))
    expected = (np.asarray(values, np.float64) - mn) * (1.0 / (mx - mn))  # upstream: (v - mn) * scale
    assert np.array_equal(t.transform(values), np.clip(expected, 0, 1))
    # the transformation the writer makes from a Float column's statistics survives its own JSON
    made = LinearTransformer("f", "FloatDataType").make_transformation({"f_min": 0.1, "f_max": 0.3})
    assert isinstance(made, LinearTransformation) and made.min_number == float(np.float32(0.1))
    assert transformation_from_json_obj(json.loads(made.to_json())) == made
    ident = transformation_from_json_obj(
        {"className": P + "IdentityTransformation", "identityValue": 0.1, "orderedDataType": "FloatDataType"}
    )
    assert ident.identity_value == float(np.float32(0.1))


def test_decimals_become_doubles_as_java_big_decimal(spark) -> None:
    """qbeast-spark transforms a decimal with `BigDecimal.doubleValue` (correctly rounded); Arrow's
    decimal -> double cast is one ulp off for many values (56834724.12 -> 56834724.120000005)."""
    import decimal

    import pyarrow as pa

    from use.qbeast.transform import LinearTransformation

    jvm = spark.sparkContext._jvm
    texts = ["56834724.12", "24615360.58", "-947.487905666", "658125430.829133", "-9510765630201553.937"]
    for text in texts:
        d = decimal.Decimal(text)
        arr = pa.array([d], pa.decimal128(20, max(0, -d.as_tuple().exponent)))
        # py4j hands a BigDecimal back as a Python Decimal; Java's text parse gives the same
        # correctly rounded double as `BigDecimal.doubleValue`
        java = float(jvm.java.lang.Double.parseDouble(text))
        assert java == float(d)
        # bounds close around the value, so a one-ulp difference in it shows in the coordinate
        lo, hi = java - abs(java) * 1e-9, java + abs(java) * 1e-9
        t = LinearTransformation(lo, hi, lo, "DecimalDataType")
        assert t.transform(arr)[0] == (java - lo) * (1.0 / (hi - lo)), text
        assert t.transform_value(d) == t.transform(arr)[0]


# --- B2: BETWEEN prunes as its comparisons do ------------------------------------------------------


def test_between_is_translated_into_a_pruning_predicate(spark, tmp_path) -> None:
    """Spark's optimizer hands qbeast-spark `x >= a AND x <= b` for a BETWEEN; the analyzed plan we
    translate still holds `Between` (its replacement a `With` over a common-expression reference),
    which was an untranslatable `Unknown` before, so it pruned nothing."""
    import datetime as dt

    from use.delta.predicates import And, Comparison, Not
    from use.qbeast.reader import load_snapshot, plan_read, read, translate_filter
    from use.qbeast.writer import write

    schema = spark.createDataFrame([], "x int, d date, s string").schema
    ge10, le20 = Comparison("x", ">=", 10), Comparison("x", "<=", 20)
    assert translate_filter(spark, schema, "x BETWEEN 10 AND 20") == And(ge10, le20)
    assert translate_filter(spark, schema, "d BETWEEN '2024-01-01' AND '2024-01-05'") == And(
        Comparison("d", ">=", dt.date(2024, 1, 1)), Comparison("d", "<=", dt.date(2024, 1, 5))
    )
    not_between = Not(And(Comparison("x", ">=", 1), Comparison("x", "<=", 2)))
    assert translate_filter(spark, schema, "x NOT BETWEEN 1 AND 2") == not_between

    path = str(tmp_path / "t")
    df = spark.range(0, 4_000, numPartitions=2).selectExpr("CAST(id AS INT) AS x", "CAST(id * 7 % 1000 AS INT) AS y")
    write(spark, df, path, ["x", "y"], cube_size=250, optimize_write=True)
    qsnap = load_snapshot(path)
    between = plan_read(spark, qsnap, filter="x BETWEEN 100 AND 300")
    compared = plan_read(spark, qsnap, filter="x >= 100 AND x <= 300")
    assert between.num_files == compared.num_files < between.total_files
    assert read(spark, path, filter="x BETWEEN 100 AND 300").count() == 201


# --- B1: dates written by a JVM outside UTC ---------------------------------------------------------


def _shift_date_bounds(path: str, column: str, shift_ms: int) -> None:
    """Rewrite the latest revision's linear bounds and null value of `column` shifted by `shift_ms`,
    as qbeast-spark on a JVM at UTC-shift writes them (`java.sql.Date.getTime` is local midnight):
    the rows stay where they are, which is exactly where that JVM would have put them."""
    from dataclasses import replace

    from use.qbeast.revision import REVISION_PREFIX, Revision

    log = DeltaLog.for_path(path)
    meta = log.snapshot().metadata
    conf = dict(meta.configuration)
    key = f"{REVISION_PREFIX}{conf['qbeast.lastRevisionID']}"
    obj = json.loads(conf[key])
    i = [t["columnName"] for t in obj["columnTransformers"]].index(column)
    for field in ("minNumber", "maxNumber", "nullValue"):
        obj["transformations"][i][field] += shift_ms
    conf[key] = Revision.from_json_obj(obj).to_json()
    txn = log.start_transaction()
    txn.add(replace(meta, configuration=conf))
    txn.commit("SET TBLPROPERTIES", {"properties": {key: conf[key]}})


@pytest.mark.parametrize("shift_hours", [1, -12])
def test_dates_written_in_any_jvm_time_zone_read_exactly(spark, tmp_path, shift_hours) -> None:
    """A date-indexed table whose revision bounds sit at a non-UTC JVM's local midnight (UTC+1:
    -3,600,000 ms) returns every row of every day. Before, a UTC-midnight literal landed an hour
    off the rows' coordinates, and cube pruning dropped the files of most days."""
    import datetime as dt

    from use.qbeast.reader import load_snapshot, plan_read, read
    from use.qbeast.writer import write

    path = str(tmp_path / "t")
    days = 10
    df = spark.range(0, days * 300, numPartitions=2).selectExpr(
        f"date_add(DATE '2024-01-01', CAST(id % {days} AS INT)) AS d", "id", "CAST(id * 37 % 1000 AS DOUBLE) AS v"
    )
    write(spark, df, path, ["d", "id"], cube_size=40, optimize_write=True)
    _shift_date_bounds(path, "d", -shift_hours * 3_600_000)
    qsnap = load_snapshot(path)
    assert qsnap.revisions[1].transformations[0].min_number % 86_400_000 == (-shift_hours * 3_600_000) % 86_400_000
    total = qsnap.files.num_rows
    for k in range(days):
        day = dt.date(2024, 1, 1) + dt.timedelta(days=k)
        where = f"d = DATE '{day.isoformat()}'"
        assert read(spark, path, filter=where).count() == 300, where
        assert plan_read(spark, qsnap, filter=where).num_files < total  # still pruned
    assert read(spark, path, filter="d >= DATE '2024-01-04' AND d < DATE '2024-01-06'").count() == 600
    assert read(spark, path, filter="d <= DATE '2024-01-01'").count() == 300
    assert read(spark, path, filter="d BETWEEN DATE '2024-01-10' AND DATE '2024-01-31'").count() == 300
    assert read(spark, path, filter="d IN (DATE '2024-01-02', DATE '2024-01-09')").count() == 600


def test_timestamp_ntz_columns_are_refused_and_nothing_is_written(spark, tmp_path) -> None:
    """qbeast-spark maps only TIMESTAMP to TimestampDataType (`SparkToQTypesUtils`): an indexed
    TIMESTAMP_NTZ would make a table it cannot append to or optimize. Before, such a column was
    indexed as TimestampDataType."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from use.errors import UnsupportedTypeError
    from use.qbeast.convert import convert_to_qbeast
    from use.qbeast.writer import write

    df = spark.sql("SELECT id, TIMESTAMP_NTZ '2024-01-01 10:00:00' + make_interval(0, 0, 0, 0, 0, id) AS ts FROM range(50)")
    path = str(tmp_path / "t")
    for spec in (["id", "ts"], ["ts:hashing"], "id,ts:linear"):
        with pytest.raises(UnsupportedTypeError, match="TIMESTAMP_NTZ.*CAST\\(ts AS TIMESTAMP\\)"):
            write(spark, df, path, spec)
        assert not os.path.exists(path)
    # the same column as TIMESTAMP is indexed
    write(spark, df.selectExpr("id", "CAST(ts AS TIMESTAMP) AS ts"), path, ["id", "ts"], cube_size=20)
    assert DeltaLog.for_path(path).snapshot().version == 0
    # converting a parquet directory with one: refused before its log exists
    parquet = str(tmp_path / "p")
    os.makedirs(parquet)
    pq.write_table(pa.table({"id": [1, 2], "ts": pa.array([0, 1], pa.timestamp("us"))}), os.path.join(parquet, "a.parquet"))
    with pytest.raises(UnsupportedTypeError, match="TIMESTAMP_NTZ"):
        convert_to_qbeast(parquet, ["id", "ts"])
    assert sorted(os.listdir(parquet)) == ["a.parquet"]
    assert convert_to_qbeast(parquet, ["id"]).converted  # the other columns may stay NTZ
