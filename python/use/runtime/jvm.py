"""The driver's JVM as py4j shows it: the one way USE reaches Spark's and the shim's JVM classes.

pyspark types `SparkContext._jvm` as Optional (the class attribute is None until a context starts);
every live session has one, so this says so once instead of each caller working around the Optional.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from py4j.java_gateway import JVMView
    from pyspark.sql import SparkSession

__all__ = ["driver_jvm"]


def driver_jvm(spark: SparkSession) -> JVMView:
    """The py4j view of `spark`'s driver JVM: classes by their dotted names (`jvm.use.shim.X`)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "a SparkSession's context has started its JVM gateway"
    return jvm
