"""CONTINUOUS execution on SparkEngine: which mode AUTO picks, the submit-time refusals, a
processor's failure, a Python worker killed mid-job, live metrics, and flow control that keeps
a fast source within a bounded lead of a slow sink.

Every assertion is on items, snapshots and counts: how far a run gets before a cancel or a kill
depends on the machine's speed, what it commits never does.
"""

from __future__ import annotations

import glob
import logging
import os
import signal
import time
from typing import Any

import fault_tolerance_jobs as jobs
import pytest

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    JobFailedError,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.edges import EdgeConfig, between, from_
from jetspark.processors import read_list_p, stream_journal_p, write_list_p

pytestmark = pytest.mark.spark

EXACTLY_ONCE = ProcessingGuarantee.EXACTLY_ONCE


def continuous(guarantee: ProcessingGuarantee = EXACTLY_ONCE, **settings: Any) -> JobConfig:
    return JobConfig(
        processing_guarantee=guarantee,
        snapshot_interval_millis=settings.pop("interval", 20),
        execution_mode=ExecutionMode.CONTINUOUS,
        **settings,
    )


@pytest.fixture
def engine(spark_engine: Any) -> Any:
    from jetspark.core.spark import SparkEngine

    return SparkEngine(spark_engine.context, members=2)


def _identity(item: Any) -> Any:
    return item


def _unbounded_dag() -> DAG:
    dag = DAG("endless")
    source = dag.new_vertex("source", stream_journal_p("journal"))
    sink = dag.new_vertex("sink", write_list_p("endless-out"))
    dag.edge(between(source, sink))
    return dag


# ------------------------------------------------------------------ the mode AUTO picks


def test_auto_runs_a_bounded_job_without_a_guarantee_as_stages(engine: Any) -> None:
    engine.get_list("in").extend(range(100))
    job = engine.new_job(jobs.copy_dag())
    job.join(120)
    assert job.execution_mode is ExecutionMode.STAGES
    assert job.metrics.execution_mode == "stages"
    assert sorted(engine.get_list("out")) == list(range(100))


def test_auto_runs_a_job_with_a_guarantee_continuously_when_every_member_has_a_slot(
    engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    engine.get_list("in").extend(range(100))
    config = JobConfig(processing_guarantee=EXACTLY_ONCE, name="guaranteed-copy")
    with caplog.at_level(logging.INFO, logger="jetspark.spark"):
        job = engine.new_job(jobs.copy_dag(), config)
    job.join(120)
    assert job.execution_mode is ExecutionMode.CONTINUOUS
    assert job.metrics.execution_mode == "continuous"
    assert sorted(engine.get_list("out")) == list(range(100))
    assert any("runs CONTINUOUS" in r.getMessage() for r in caplog.records)


def test_auto_falls_back_to_micro_batches_without_a_slot_per_member(
    spark_engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=3)  # local[2]: two task slots
    engine.get_list("in").extend(range(100))
    config = JobConfig(processing_guarantee=EXACTLY_ONCE, snapshot_interval_millis=50)
    with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
        job = engine.new_job(jobs.copy_dag(), config)
    job.join(120)
    assert job.execution_mode is ExecutionMode.MICRO_BATCH
    assert sorted(engine.get_list("out")) == list(range(100))
    message = next(r.getMessage() for r in caplog.records if "not CONTINUOUS" in r.getMessage())
    assert "2 task slots" in message and "(3)" in message


def test_auto_runs_an_unbounded_job_without_a_guarantee_continuously(engine: Any) -> None:
    engine.get_list("journal").extend(range(50))
    job = engine.new_job(_unbounded_dag())
    try:
        assert job.execution_mode is ExecutionMode.CONTINUOUS
        _wait_for(lambda: len(engine.get_list("endless-out")) >= 50, job)
    finally:
        job.cancel()
    assert sorted(engine.get_list("endless-out")) == list(range(50))


def test_continuous_with_too_few_slots_fails_at_submit_naming_both_numbers(
    spark_engine: Any,
) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=3)
    with pytest.raises(ValueError, match=r"needs 3 task slots .* has 2"):
        engine.new_job(jobs.copy_dag(), continuous())


def test_micro_batch_needs_a_guarantee(engine: Any) -> None:
    with pytest.raises(ValueError, match="needs a processing guarantee"):
        engine.new_job(jobs.copy_dag(), JobConfig(execution_mode=ExecutionMode.MICRO_BATCH))


def test_explain_shows_the_continuous_plan(engine: Any) -> None:
    text = engine.explain(jobs.copy_dag(), continuous())
    assert text.splitlines()[0] == (
        "DAG 'copy' on Spark, CONTINUOUS: 2 members, one barrier stage of 2 long-running tasks "
        "(needs 2 task slots; local[2] has 2)"
    )
    assert "    stream      source:0 -> sink:0  unicast: TCP streams between members" in text
    assert "snapshots: every 20 ms, barriers in-band (aligned, EXACTLY_ONCE)" in text


# ----------------------------------------------------------------------- failures


class Explodes(AbstractProcessor):
    def try_process0(self, item: Any) -> bool:
        if item == 77:
            raise jobs.InjectedFault("item 77")
        return self.try_emit(item)


def test_a_processor_failure_fails_the_job_naming_vertex_processor_and_callback(
    engine: Any,
) -> None:
    dag = DAG("explodes")
    source = dag.new_vertex("source", read_list_p("in"))
    boom = dag.new_vertex("boom", Explodes)
    sink = dag.new_vertex("sink", write_list_p("out"))
    dag.edge(between(source, boom).distributed())
    dag.edge(between(boom, sink))
    local = LocalEngine(2)
    for runner in (engine, local):
        runner.get_list("in").extend(range(200))
    with pytest.raises(JobFailedError) as on_local:
        local.new_job(dag, continuous()).join(60)
    job = engine.new_job(dag, continuous())
    with pytest.raises(JobFailedError) as failure:
        job.join(120)
    assert failure.value.vertex_name == on_local.value.vertex_name == "boom"
    assert failure.value.callback == on_local.value.callback
    assert failure.value.processor_index == on_local.value.processor_index
    assert "InjectedFault: item 77" in str(failure.value)
    assert job.metrics.restarts == 0  # a processor's own failure is not retried


def test_a_killed_python_worker_restarts_the_job_from_its_snapshot_and_windows_are_exact(
    engine: Any, tmp_path: Any
) -> None:
    items = jobs.events(3000)
    engine.get_list("events").extend(items)
    snapshots = str(tmp_path / "snapshots")
    kill = jobs.SignalOnce(signal.SIGKILL, 400, snapshots, str(tmp_path / "killed"))
    job = engine.new_job(
        jobs.windowed_dag(kill),
        continuous(interval=5),
        snapshot_store=DirectorySnapshotStore(snapshots),
    )
    job.join(240)
    assert os.path.exists(tmp_path / "killed")
    assert job.metrics.restarts == 1
    assert engine.get_map("windows") == jobs.expected_windows(items)


# ------------------------------------------------------------------- live metrics


def test_metrics_are_live_while_a_continuous_job_runs(engine: Any) -> None:
    engine.get_list("journal").extend(range(500))
    job = engine.new_job(_unbounded_dag(), continuous(interval=20))
    try:
        _wait_for(lambda: len(engine.get_list("endless-out")) >= 500, job)
        _wait_for(lambda: _received(job, "sink") >= 500 and len(job.metrics.snapshots) >= 2, job)
        metrics = job.metrics
        assert metrics.execution_mode == "continuous"
        assert {p.vertex for p in metrics.processors} == {"source", "sink"}
        snapshot = metrics.snapshots[-1]
        assert metrics.snapshot_count == len(metrics.snapshots)
        assert snapshot.bytes == sum(snapshot.vertex_bytes.values())
    finally:
        job.cancel()


def _received(job: Any, vertex: str) -> int:
    return sum(sum(p.received_count.values()) for p in job.metrics.of_vertex(vertex))


# ------------------------------------------------------------------- flow control

QUEUE = 32
SOURCE_ITEMS = 6000
REPORT_EVERY = 50


class CountingSource(AbstractProcessor):
    """Processor 0 emits SOURCE_ITEMS items; every REPORT_EVERY items it reads how many items
    the sinks have received (files they write) and keeps the largest lead it saw, which it
    emits last on ordinal 1."""

    def __init__(self, progress: str) -> None:
        super().__init__()
        self.progress = progress
        self.next = 0
        self.lead = 0

    def complete(self) -> bool:
        if self.context.global_processor_index != 0:
            return True
        while self.next < SOURCE_ITEMS:
            if self.next % REPORT_EVERY == 0:
                self.lead = max(self.lead, self.next - _sunk(self.progress))
            if not self.try_emit(self.next, 0):
                return False
            self.next += 1
        return self.try_emit(self.lead, 1)


class SlowSink(AbstractProcessor):
    """Takes a fraction of a millisecond per item and writes its count every REPORT_EVERY."""

    def __init__(self, progress: str) -> None:
        super().__init__()
        self.progress = progress
        self.count = 0

    def try_process0(self, item: Any) -> bool:
        time.sleep(0.0002)
        self.count += 1
        if self.count % REPORT_EVERY == 0:
            path = os.path.join(self.progress, f"sink-{self.context.global_processor_index}")
            with open(path + ".tmp", "w") as file:
                file.write(str(self.count))
            os.replace(path + ".tmp", path)
        return True


def _sunk(progress: str) -> int:
    total = 0
    for path in glob.glob(os.path.join(progress, "sink-*")):
        if not path.endswith(".tmp"):
            with open(path) as file:
                total += int(file.read() or 0)
    return total


def test_a_slow_sink_holds_a_fast_source_within_the_windows_and_queues(
    engine: Any, tmp_path: Any
) -> None:
    progress = str(tmp_path)
    dag = DAG("backpressure")
    source = dag.new_vertex("source", lambda: CountingSource(progress))
    sink = dag.new_vertex("sink", lambda: SlowSink(progress))
    lead = dag.new_vertex("lead", write_list_p("lead"))
    small = EdgeConfig(queue_size=QUEUE)
    dag.edge(between(source, sink).distributed().partitioned(_identity).set_config(small))
    dag.edge(from_(source, 1).to(lead).distributed())
    job = engine.new_job(dag, continuous(ProcessingGuarantee.NONE))
    job.join(240)
    # in flight at most: the source's outbox bucket, then per link its window (two queues,
    # items sent and not yet moved into the queue) and its queue, and the sink's inbox;
    # the sinks report every REPORT_EVERY items, so the lead seen may be that much higher
    bound = QUEUE + 2 * (2 * QUEUE + QUEUE + QUEUE) + 2 * REPORT_EVERY
    leads = [item for item in engine.get_list("lead")]
    assert len(leads) == 1
    lead_seen = leads[0]
    assert lead_seen <= bound, f"the source ran {lead_seen} items ahead of the sinks"
    assert _sunk(progress) >= SOURCE_ITEMS - 2 * REPORT_EVERY


def _wait_for(condition: Any, job: Any, timeout: float = 120) -> None:
    """Waits until `condition()` holds while `job` runs; bounded, never a speed check."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert not job.status.is_terminal, f"{job.name} ended: {job.status}"
        assert time.monotonic() < deadline, f"{job.name}: condition not met in {timeout} s"
        time.sleep(0.05)
