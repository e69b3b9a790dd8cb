"""The shim protocol's Scala side (`jvm-shim/src/main/scala/use/sql/Protocol.scala`) against the
shared fixtures the Python side passes too (tests/unit/test_protocol.py): each case class reads its
message's fixture and writes it back unchanged, has the dataclass's fields in its order, and each
request names the method and reply its dataclass names. A field added or renamed on one side alone
fails one of the two tests; and rows cross both ways through Spark's own Arrow converters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from use.sql.protocol import MESSAGES, REQUESTS, wire_fields

FIXTURES = Path(__file__).resolve().parents[1] / "protocol"


def _protocol(spark):
    return spark.sparkContext._jvm.use.sql.Protocol


def test_the_shim_knows_every_message_and_no_other(spark) -> None:
    assert sorted(_protocol(spark).messageNames()) == sorted(MESSAGES)


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_each_case_class_reads_its_fixture_and_writes_it_back_unchanged(spark, name: str) -> None:
    text = (FIXTURES / f"{name}.json").read_text()
    protocol = _protocol(spark)
    assert json.loads(protocol.roundTrip(name, text)) == json.loads(text)
    assert list(protocol.fieldNames(name, text)) == list(wire_fields(MESSAGES[name]))
    method = protocol.method(name, text)
    cls = MESSAGES[name]
    if cls in REQUESTS.values():
        assert list(method) == [cls.METHOD, cls.REPLY.__name__]
    else:
        assert method is None


def test_rows_cross_as_arrow_with_their_spark_types(spark) -> None:
    """A procedure's result (an Arrow stream from Python) becomes Spark rows of the same types, and
    a CALL's arguments (Spark rows) reach Python as the values Spark gave, typed as given."""
    spark.sql("CREATE TABLE IF NOT EXISTS protocol_rows (a INT) USING delta")
    try:
        rows = spark.sql("CALL use_catalog.system.vacuum(table => 'protocol_rows', retention_hours => 200.5, dry_run => 'true')")
        assert [(f.name, f.dataType.simpleString()) for f in rows.schema] == [
            ("path", "string"),
            ("bytes", "bigint"),
            ("deleted", "boolean"),
        ]
        assert rows.collect() == []
        (task,) = spark.sql("CALL use_catalog.system.optimize(table => 'protocol_rows', dry_run => true)").collect()
        assert task["kind"] == "none" and task["partition_values"] == {} and isinstance(task["score"], float)
    finally:
        spark.sql("DROP TABLE IF EXISTS protocol_rows")
