"""A DataFrame's columns conformed to a table's schema before its rows are written into the table."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType, _parse_datatype_json_value

from use.delta.schema import nullable_type, type_sql

__all__ = ["conform_to_table"]


def conform_to_table(df: DataFrame, schema_string: str) -> DataFrame:
    """The DataFrame's columns as the table's: in its order and under its names, each value cast to
    the table's type where the data's differs, nested fields matched by name (a struct cast would
    match them by position). For data `use.delta.schema.write_type_problem` let through (the same
    types, or widened without loss), so no value changes; the files then hold the table's types."""

    def same(a: DataType, b: DataType) -> bool:
        return type_sql(a.jsonValue()) == type_sql(b.jsonValue())

    def conformed(c: Any, have: DataType, want: DataType) -> Any:
        if same(have, want):
            return c
        if isinstance(have, StructType) and isinstance(want, StructType):
            by_name = {f.name.lower(): f for f in have.fields}
            fields = [conformed(c.getField(by_name[w.name.lower()].name), by_name[w.name.lower()].dataType, w.dataType).alias(w.name)
                      for w in want.fields]  # fmt: skip
            return F.when(c.isNull(), F.lit(None).cast(_parse_datatype_json_value(nullable_type(want.jsonValue())))).otherwise(
                F.struct(*fields)
            )
        if isinstance(have, ArrayType) and isinstance(want, ArrayType):
            return F.transform(c, lambda e: conformed(e, have.elementType, want.elementType))
        if isinstance(have, MapType) and isinstance(want, MapType):
            keyed = F.transform_keys(c, lambda k, _v: conformed(k, have.keyType, want.keyType))
            return F.transform_values(keyed, lambda _k, v: conformed(v, have.valueType, want.valueType))
        return c.cast(want)

    table = StructType.fromJson(json.loads(schema_string))
    given = {f.name.lower(): f for f in df.schema.fields}
    columns = []
    for f in table.fields:
        have = given.get(f.name.lower())
        if have is None:
            columns.append(F.lit(None).cast(f.dataType).alias(f.name))
        else:
            columns.append(conformed(F.col(f"`{have.name}`"), have.dataType, f.dataType).alias(f.name))
    return df.select(*columns)
