"""Run by tests/test_runtime_deps.py in a process where only runtime dependencies import: the
paths a new user takes after `pip install .` (`use demo`'s Delta part, an indexed Qbeast write in
two appends, a sampled read, an optimization). Exits non-zero on the first failure."""

from __future__ import annotations

import sys
from pathlib import Path


def main(root: Path) -> None:
    from use import QbeastTable
    from use.cli import main as cli
    from use.session import spark_session

    assert cli(["demo", "--delta-only", "--path", str(root / "demo")]) == 0
    spark = spark_session("use-runtime-paths", master="local[1]", conf={"spark.sql.shuffle.partitions": "1"})
    df = spark.range(2000).selectExpr("id", "cast(id % 97 as double) as x")
    for _ in range(2):
        QbeastTable.write(df, str(root / "qbeast"), columns_to_index=["id", "x"], cube_size=500, mode="append")
    table = QbeastTable.for_path(spark, str(root / "qbeast"))
    assert table.read(sample=0.5).count() > 0
    assert table.read().count() == 4000
    table.optimize()
    assert table.read().count() == 4000
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
