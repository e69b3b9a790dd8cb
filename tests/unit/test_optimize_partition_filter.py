"""`PartitionFilter.mask`: a file is kept exactly when every partition column's value (null
included) is that of a kept partition; columnar, no Spark."""

from __future__ import annotations

import pyarrow as pa

from use.optimize.partition_filter import PartitionFilter


def _files(*partitions: dict) -> pa.Table:
    return pa.table({"partition_values": pa.array([list(p.items()) for p in partitions], pa.map_(pa.string(), pa.string()))})


def test_mask_matches_whole_partitions_nulls_included() -> None:
    files = _files(
        {"a": "1", "b": None}, {"a": "2", "b": "x"}, {"a": "1", "b": "x"}, {"a": "3", "b": None}, {"a": "1", "b": None}
    )
    kept = pa.table({"a": pa.array(["1", "2"]), "b": pa.array([None, "x"], pa.string())})
    # (1, x) has each value of a kept partition but is not one; (3, null) has a value none has
    assert PartitionFilter("w", kept).mask(files).tolist() == [True, True, False, False, True]
    assert PartitionFilter("w", kept.slice(0, 0)).mask(files).tolist() == [False] * 5
    assert PartitionFilter("w", kept).mask(files.slice(0, 0)).tolist() == []
