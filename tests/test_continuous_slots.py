"""What Spark allows a continuous job, decided at submit: no barrier stage under dynamic
allocation, and a free task slot per member beside the continuous jobs already running.
Explicit CONTINUOUS fails at submit naming the setting or the jobs; AUTO runs the job as
micro-batches and says why.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import fault_tolerance_jobs as jobs
import pytest

from jetspark.core import (
    DAG,
    ExecutionMode,
    JobCancelledError,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.core.spark.slots import configured_slots
from jetspark.edges import between
from jetspark.processors import stream_journal_p, write_list_p

EXACTLY_ONCE = ProcessingGuarantee.EXACTLY_ONCE


@pytest.fixture
def engine(spark_engine: Any) -> Any:
    from jetspark.core.spark import SparkEngine

    return SparkEngine(spark_engine.context, members=2)  # local[2]: two task slots


@pytest.fixture
def dynamic_allocation(spark_engine: Any) -> Iterator[None]:
    """The session's context under dynamic allocation for one test (Spark's `testing` switch
    makes a local master count as one that has it, as a cluster would)."""
    conf = spark_engine.context._jsc.sc().conf()
    settings = ("spark.dynamicAllocation.enabled", "spark.dynamicAllocation.testing")
    for key in settings:
        conf.set(key, "true")
    try:
        yield
    finally:
        for key in settings:
            conf.remove(key)


def _endless_dag() -> DAG:
    dag = DAG("endless")
    source = dag.new_vertex("source", stream_journal_p("journal"))
    sink = dag.new_vertex("sink", write_list_p("endless-out"))
    dag.edge(between(source, sink))
    return dag


def _continuous(**settings: Any) -> JobConfig:
    return JobConfig(execution_mode=ExecutionMode.CONTINUOUS, **settings)


def _fallbacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "not CONTINUOUS" in r.getMessage()]


# ------------------------------------------------------------------ dynamic allocation


@pytest.mark.spark
def test_auto_runs_micro_batches_under_dynamic_allocation_and_says_why(
    engine: Any, dynamic_allocation: None, caplog: pytest.LogCaptureFixture
) -> None:
    engine.get_list("in").extend(range(100))
    config = JobConfig(processing_guarantee=EXACTLY_ONCE, snapshot_interval_millis=50)
    with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
        job = engine.new_job(jobs.copy_dag("allocated", "allocated-out"), config)
        job.join(120)
    assert job.execution_mode is ExecutionMode.MICRO_BATCH
    assert job.metrics.restarts == 0
    assert sorted(engine.get_list("allocated-out")) == list(range(100))
    (why,) = _fallbacks(caplog)
    assert "spark.dynamicAllocation.enabled is true" in why and "MICRO_BATCH" in why


@pytest.mark.spark
def test_continuous_under_dynamic_allocation_fails_at_submit_naming_the_setting(
    engine: Any, dynamic_allocation: None
) -> None:
    with pytest.raises(ValueError, match=r"spark\.dynamicAllocation\.enabled is true"):
        engine.new_job(jobs.copy_dag("refused", "refused-out"), _continuous())


# ----------------------------------------------------------- slots held by running jobs


@pytest.mark.spark
def test_slots_held_by_a_running_continuous_job_are_not_free(
    engine: Any, spark_engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from jetspark.core.spark import SparkEngine

    one_member = SparkEngine(spark_engine.context, members=1)
    one_member.get_list("journal").extend(range(20))
    engine.get_list("in").extend(range(100))
    holder = one_member.new_job(_endless_dag(), _continuous(name="holder"))
    try:
        deadline = time.monotonic() + 120
        while len(one_member.get_list("endless-out")) < 20:  # the holder's task runs
            assert not holder.status.is_terminal and time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(ValueError) as refused:
            engine.new_job(jobs.copy_dag("second", "second-out"), _continuous())
        assert "has 2, 1 of them held by running continuous jobs (members): holder (1)" in str(
            refused.value
        )
        config = JobConfig(processing_guarantee=EXACTLY_ONCE, snapshot_interval_millis=50)
        with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
            beside = engine.new_job(jobs.copy_dag("beside", "beside-out"), config)
            beside.join(120)  # in the slot the holder leaves
        assert beside.execution_mode is ExecutionMode.MICRO_BATCH
        assert sorted(engine.get_list("beside-out")) == list(range(100))
        (why,) = _fallbacks(caplog)
        assert "has 2 task slots, 1 of them held by holder (1)" in why
    finally:
        holder.cancel()
        with contextlib.suppress(JobCancelledError):
            holder.join(120)
    after = engine.new_job(
        jobs.copy_dag("after", "after-out"), _continuous()
    )  # the holder's slot is free
    after.join(120)
    assert sorted(engine.get_list("after-out")) == list(range(100))


# ---------------------------------------------------------- slots the configuration asks for


@pytest.mark.parametrize(
    ("master", "settings", "slots"),
    [
        ("spark://master:7077", {"spark.cores.max": "4", "spark.task.cpus": "2"}, 2),
        ("spark://master:7077", {}, None),
        ("yarn", {"spark.executor.instances": "3", "spark.executor.cores": "2"}, 6),
        ("k8s://https://api:6443", {"spark.executor.instances": "4"}, 4),
        ("k8s://https://api:6443", {}, None),
        ("local[2]", {"spark.executor.instances": "4"}, None),
    ],
)
def test_the_slots_a_configuration_asks_for(
    master: str, settings: dict[str, str], slots: int | None
) -> None:
    assert configured_slots(settings, master) == slots


class _Registering:
    """A SparkContext whose executors register one at a time, a core each."""

    def __init__(self, master: str) -> None:
        self.master = master
        self.registered = 0

    def slots(self, context: Any) -> int:
        self.registered += 1
        return self.registered - 1


@pytest.mark.parametrize(
    ("master", "waited_for"), [("local-cluster[2,1,1024]", 2), ("local[2]", 0)]
)
def test_a_local_cluster_is_waited_for_as_any_cluster_and_local_is_not(
    monkeypatch: pytest.MonkeyPatch, master: str, waited_for: int
) -> None:
    """local-cluster's executors are processes of their own that register after the context
    starts: a continuous job submitted first thing waits for them, as on any cluster."""
    from jetspark.core.spark import slots

    context = _Registering(master)
    monkeypatch.setattr(slots, "task_slots", context.slots)
    assert slots.wait_for_slots(context, 2) == waited_for  # type: ignore[arg-type]
