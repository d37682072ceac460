"""The engines' lifecycle: `stop()` and `with ... as engine:` end the engine's running jobs (both
engines); SparkEngine's stops a context the engine created, never one the user passed in."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from jetspark.core import DAG, JobCancelledError, JobStatus, LocalEngine
from jetspark.edges import between
from jetspark.processors import read_list_p, stream_journal_p, write_list_p


def endless_dag() -> DAG:
    """An unbounded job: it reads the journal "journal" into the list "endless" until cancelled."""
    dag = DAG("endless")
    source = dag.new_vertex("source", stream_journal_p("journal"))
    dag.edge(between(source, dag.new_vertex("sink", write_list_p("endless"))))
    return dag


def test_local_stop_cancels_a_running_unbounded_job() -> None:
    engine = LocalEngine(members=2)
    engine.get_list("journal").extend(range(5))
    job = engine.new_job(endless_dag())
    engine.stop()
    assert job.status is JobStatus.CANCELLED
    with pytest.raises(JobCancelledError):
        job.join(0)
    engine.stop()  # again: nothing to do


def test_local_stop_leaves_ended_jobs_as_they_ended() -> None:
    engine = LocalEngine()
    engine.get_list("in").extend(range(3))
    dag = DAG("copy")
    dag.edge(
        between(dag.new_vertex("a", read_list_p("in")), dag.new_vertex("b", write_list_p("out")))
    )
    job = engine.new_job(dag)
    job.join(60)
    engine.stop()
    assert job.status is JobStatus.COMPLETED
    assert engine.get_list("out") == [0, 1, 2]


def test_local_with_block_stops_the_engine() -> None:
    with LocalEngine() as engine:
        engine.get_list("journal").extend(range(5))
        job = engine.new_job(endless_dag())
    assert job.status is JobStatus.CANCELLED
    with pytest.raises(JobCancelledError):
        job.join(0)


def test_local_with_block_stops_the_engine_when_the_block_raises() -> None:
    with pytest.raises(KeyError), LocalEngine() as engine:
        job = engine.new_job(endless_dag())
        raise KeyError("the user's own error")
    assert job.status is JobStatus.CANCELLED


@pytest.mark.spark
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


@pytest.mark.spark
def test_stop_ends_running_jobs_first(spark_engine: Any) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2)
    engine.get_list("journal").extend(range(5))
    job = engine.new_job(endless_dag())
    engine.stop()
    assert job.status is JobStatus.CANCELLED
    engine.stop()  # again: nothing to do


@pytest.mark.spark
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
