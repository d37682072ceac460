"""The Spark engine: a DAG translated onto Spark RDD stages (imports pyspark)."""

from jetspark.core.spark.engine import SparkEngine, SparkJob

__all__ = ["SparkEngine", "SparkJob"]
