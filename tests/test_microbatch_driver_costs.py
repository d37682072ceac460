"""What the driver of a micro-batch job spends per batch stays the same however long the job
has run: a look at the job group's Spark jobs (the progress display, the wait for a cancelled
job's tasks) makes as many py4j round trips after a hundred Spark jobs as after three, and the
job's metrics keep the newest batch reports while their totals stay exact."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from microbatch_jobs import engine_with_words, guaranteed

from jetspark.core.spark.job_group import GroupJobs
from jetspark.core.spark.microbatch import runner

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def run_spark_jobs(context: Any, group: str, count: int) -> None:
    """`count` small Spark jobs in job group `group`, from a thread of their own (the group is
    a property of the thread that submits)."""

    def submit() -> None:
        context.setJobGroup(group, "a test's jobs")
        for _ in range(count):
            context.parallelize([1, 2], 2).count()

    thread = threading.Thread(target=submit)
    thread.start()
    thread.join()


@pytest.fixture
def round_trips(spark_engine: Any) -> Iterator[list[int]]:
    """Counts the py4j round trips the driver makes (one entry, reset by the test)."""
    client = spark_engine.context._gateway._gateway_client
    send = client.send_command
    counted = [0]

    def counting(*args: Any, **kwargs: Any) -> Any:
        counted[0] += 1
        return send(*args, **kwargs)

    client.send_command = counting
    try:
        yield counted
    finally:
        client.send_command = send


def trips_of_a_look(jobs_of_group: GroupJobs, counted: list[int]) -> int:
    counted[0] = 0
    jobs_of_group.stages()
    return counted[0]


def test_a_look_at_a_job_group_costs_the_same_after_many_spark_jobs(
    spark_engine: Any, round_trips: list[int]
) -> None:
    context = spark_engine.context
    group = "jetspark-test-driver-costs"
    run_spark_jobs(context, group, 3)
    watcher = GroupJobs(context, group)
    watcher.stages()  # sees the three end
    few = trips_of_a_look(GroupJobs(context, group), round_trips)
    run_spark_jobs(context, group, 100)
    watcher.stages()
    assert trips_of_a_look(watcher, round_trips) == few
    assert trips_of_a_look(GroupJobs(context, group), round_trips) == few  # a new look too


def test_metrics_keep_the_newest_batches_and_exact_totals(
    spark_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "RECENT_BATCHES", 3)
    monkeypatch.setattr(runner, "RECENT_SNAPSHOTS", 3)
    engine = engine_with_words(spark_engine, 1000, batch_items=50)
    items = engine.get_list("words")
    job = engine.new_job(jobs.counting_dag(lambda item: item), guaranteed())
    job.join(240)
    metrics = job.metrics
    assert engine.get_map("counts") == jobs.expected_counts(items)
    assert metrics.execution_mode == "micro_batch"
    assert metrics.batch_count > 3  # 1,000 words, 50 per source processor and batch
    assert len(metrics.batches) == 3 and len(metrics.snapshots) == 3
    assert metrics.snapshot_count == metrics.batch_count == metrics.snapshots[-1].snapshot_id
    assert [b.snapshot_id for b in metrics.batches] == [s.snapshot_id for s in metrics.snapshots]
    assert metrics.batches[-1].snapshot_id == metrics.batches[0].snapshot_id + 2
    assert sum(sum(p.emitted_count.values()) for p in metrics.of_vertex("source")) == len(items)
    assert metrics.snapshots[-1].vertex_bytes.keys() <= {"source", "fault", "count", "sink"}
