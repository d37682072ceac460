"""SparkEngine's lifecycle: `stop()` and `with SparkEngine(...) as engine:` stop a context the
engine created, never one the user passed in, and end its running jobs first."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from jetspark.core import DAG, JobStatus
from jetspark.edges import between
from jetspark.processors import read_list_p, stream_journal_p, write_list_p

pytestmark = pytest.mark.spark


def test_a_context_the_user_passed_in_keeps_running(spark_engine: Any) -> None:
    from jetspark.core.spark import SparkEngine

    with SparkEngine(spark_engine.context, members=2) as engine:
        engine.get_list("in").extend(range(10))
        dag = DAG("copy")
        dag.edge(
            between(
                dag.new_vertex("a", read_list_p("in")), dag.new_vertex("b", write_list_p("out"))
            )
        )
        engine.new_job(dag).join(120)
    assert not engine.owns_context
    assert spark_engine.context._jsc is not None
    assert spark_engine.context.parallelize([1, 2]).count() == 2


def test_stop_ends_running_jobs_first(spark_engine: Any) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2)
    engine.get_list("journal").extend(range(5))
    dag = DAG("endless")
    source = dag.new_vertex("source", stream_journal_p("journal"))
    dag.edge(between(source, dag.new_vertex("sink", write_list_p("endless"))))
    job = engine.new_job(dag)
    engine.stop()
    assert job.status is JobStatus.CANCELLED
    engine.stop()  # again: nothing to do


def test_an_engine_stops_the_context_it_created() -> None:
    script = textwrap.dedent(
        """
        from pyspark import SparkContext
        from jetspark.core import DAG
        from jetspark.core.spark import SparkEngine
        from jetspark.edges import between
        from jetspark.processors import read_list_p, write_list_p

        with SparkEngine("local[1]") as engine:
            engine.get_list("in").extend(range(3))
            dag = DAG("copy")
            source = dag.new_vertex("a", read_list_p("in"))
            dag.edge(between(source, dag.new_vertex("b", write_list_p("out"))))
            engine.new_job(dag).join(120)
            print("owns", engine.owns_context, sorted(engine.get_list("out")))
        print("stopped", engine.context._jsc is None, SparkContext._active_spark_context is None)
        """
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "owns True [0, 1, 2]" in result.stdout
    assert "stopped True True" in result.stdout
