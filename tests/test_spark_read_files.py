"""read_files_p on SparkEngine: members are Spark tasks, so every line is read exactly once with
or without `shared_file_system`, and the result equals LocalEngine's with a shared file system."""

from __future__ import annotations

from collections import Counter

import pytest
import test_file_ranges
from pyspark import cloudpickle
from test_file_ranges import corpus, corpus_lines, read_files_dag, run_local  # noqa: F401

from jetspark.core import JobStatus
from jetspark.core.spark import SparkEngine

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]
cloudpickle.register_pickle_by_value(test_file_ranges)  # executors cannot import tests


@pytest.mark.parametrize("members", [2, 3])
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "not shared"])
def test_spark_reads_each_line_once_as_local_engine_does(corpus, spark_engine, members, shared):  # noqa: F811
    engine = SparkEngine(spark=spark_engine.context, members=members)
    job = engine.new_job(read_files_dag(corpus, shared))
    job.join()
    assert job.status is JobStatus.COMPLETED
    lines = [tuple(item) for item in engine.get_list("lines")]
    assert Counter(lines) == Counter(corpus_lines(corpus))
    assert Counter(lines) == Counter(run_local(read_files_dag(corpus, shared=True), members))
