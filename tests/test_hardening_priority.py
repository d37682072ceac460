"""The priority trap (issue 17, item 9): one upstream feeding a priority -1 and a priority 0 edge
of one vertex hangs once it emits more than the later edge's queues hold. The DAG shape gets a
warning at submit time naming the vertex and both edges; a job caught in it fails with the
diagnosis instead of hanging."""

from __future__ import annotations

import logging

import pytest
from runtime_processors import ListSink, ScriptSource

from jetspark.core import (
    DAG,
    JobConfig,
    JobFailedError,
    JobStatus,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.edges import EdgeConfig, from_
from jetspark.processors import map_p

pytestmark = pytest.mark.timeout(30)


def trap_dag(items: int, queue_size: int, separate_sources: bool = False) -> DAG:
    """source -> join:0 (priority 0) and source(or other) -> join:1 (priority -1)."""
    dag = DAG()
    source = dag.new_vertex("source", lambda: ScriptSource({0: list(range(items))}), 1)
    other = source
    if separate_sources:
        other = dag.new_vertex("build", lambda: ScriptSource({0: list(range(items))}), 1)
    join = dag.new_vertex("join", lambda: ListSink("joined"), 1)
    config = EdgeConfig(queue_size=queue_size)
    dag.edge(from_(source, 0).to(join, 0).set_config(config))
    dag.edge(from_(other, 1 if other is source else 0).to(join, 1).priority(-1).set_config(config))
    return dag


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "priority trap" in r.getMessage()]


def test_the_trap_fails_the_job_with_the_diagnosis_instead_of_hanging(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="jetspark"):
        job = LocalEngine().new_job(trap_dag(items=200, queue_size=16))
        with pytest.raises(JobFailedError) as caught:
            job.join(timeout=20)
    assert job.status is JobStatus.FAILED
    message = str(caught.value)
    assert message.startswith("vertex 'join', processor #0: the job is stuck: it waits for edge")
    assert "edge source:1 -> join:1 (priority -1) while edge source:0 -> join:0 (priority 0)" in (
        message
    )
    assert caught.value.vertex_name == "join"
    (warning,) = warnings_of(caplog)
    assert warning.startswith(
        "vertex 'join': edge source:1 -> join:1 (priority -1) and edge source:0 -> join:0 "
        "(priority 0) are both fed by vertex 'source'"
    )


def test_queues_that_hold_every_item_get_the_warning_and_run_to_the_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = LocalEngine()
    engine.get_list("joined").clear()
    with caplog.at_level(logging.WARNING, logger="jetspark"):
        engine.new_job(trap_dag(items=200, queue_size=1024)).join(timeout=20)
    assert sorted(engine.get_list("joined")) == sorted(list(range(200)) * 2)
    assert len(warnings_of(caplog)) == 1


def test_edges_from_separate_sources_get_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    engine = LocalEngine()
    engine.get_list("joined").clear()
    with caplog.at_level(logging.WARNING, logger="jetspark"):
        dag = trap_dag(items=200, queue_size=16, separate_sources=True)
        engine.new_job(dag).join(timeout=20)
    assert sorted(engine.get_list("joined")) == sorted(list(range(200)) * 2)
    assert warnings_of(caplog) == []


def test_a_trap_through_a_longer_path_is_caught_while_running() -> None:
    dag = DAG()
    source = dag.new_vertex("source", lambda: ScriptSource({0: list(range(200))}), 1)
    relay = dag.new_vertex("relay", map_p(lambda item: item), 1)
    join = dag.new_vertex("join", lambda: ListSink("joined"), 1)
    config = EdgeConfig(queue_size=16)
    dag.edge(from_(source, 0).to(join, 0).set_config(config))
    dag.edge(from_(source, 1).to(relay).set_config(config))
    dag.edge(from_(relay).to(join, 1).priority(-1).set_config(config))
    with pytest.raises(JobFailedError, match="vertex 'join', processor #0: the job is stuck"):
        LocalEngine().new_job(dag).join(timeout=20)


def test_the_trap_is_diagnosed_in_a_job_taking_snapshots() -> None:
    config = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)
    job = LocalEngine().new_job(trap_dag(items=200, queue_size=16), config)
    with pytest.raises(JobFailedError, match="vertex 'join', processor #0: the job is stuck"):
        job.join(timeout=20)


@pytest.mark.spark
@pytest.mark.timeout(120)
def test_the_trap_fails_a_spark_job_with_the_diagnosis_too(spark_engine: object) -> None:
    """The stage's task drives the member runtime as LocalEngine does, stall check included."""
    job = spark_engine.new_job(trap_dag(items=200, queue_size=16))  # type: ignore[attr-defined]
    with pytest.raises(JobFailedError) as caught:
        job.join(timeout=100)
    assert "the job is stuck: it waits for edge" in str(caught.value)
    assert caught.value.vertex_name == "join"
    assert "at org.apache" not in str(caught.value)
