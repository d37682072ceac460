"""Getting a SparkContext for the engine: the user's, or a quiet local one bound to 127.0.0.1."""

from __future__ import annotations

import logging
import os
from typing import Any

from pyspark import SparkConf, SparkContext

logger = logging.getLogger("jetspark.spark")

DEFAULT_MASTER = "local[*]"


def local_conf(master: str = DEFAULT_MASTER, app_name: str = "jetspark") -> SparkConf:
    """The configuration of an engine-made context: UI off, loopback only, Python workers reused."""
    return (
        SparkConf()
        .setMaster(master)
        .setAppName(app_name)
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "true")
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.driver.bindAddress", "127.0.0.1")
        .set("spark.python.worker.reuse", "true")
        .set("spark.executorEnv.PYTHONHASHSEED", os.environ.get("PYTHONHASHSEED", "0"))
    )


def spark_context_of(spark: Any) -> SparkContext:
    """The SparkContext of a SparkSession or SparkContext; creates a local one for None.

    An engine-made context is a bare SparkContext: an RDD engine needs no SparkSession, which
    takes about twice as long to start (DESIGN.md, measured facts).
    """
    if spark is None:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        context = SparkContext.getOrCreate(local_conf())
        context.setLogLevel("ERROR")
        return context
    if isinstance(spark, SparkContext):
        return spark
    context = getattr(spark, "sparkContext", None)
    if isinstance(context, SparkContext):
        return context
    raise TypeError(
        f"SparkEngine(spark=...) takes a SparkSession, a SparkContext or None, "
        f"got {type(spark).__name__}"
    )
