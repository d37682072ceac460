"""The Spark engine: a DAG translated onto Spark RDD stages (imports pyspark).

`SparkEngine` and `SparkJob` are imported on first use: a Spark task imports the modules it
runs (`stages.task` and the processors) without the driver's engine, its streaming modes and
their imports (a third of a Python worker's jetspark imports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jetspark.core.spark.engine import SparkEngine, SparkJob

__all__ = ["SparkEngine", "SparkJob"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from jetspark.core.spark import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
