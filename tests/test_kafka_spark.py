"""Kafka on SparkEngine against a real broker: a windowed job reading a topic and writing its
results exactly once to another, continuously and in micro-batches, across a killed Python
worker; results read back with read_committed, each expected one exactly once."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
from fault_tolerance_jobs import SignalOnce
from kafka_jobs import (
    expected_window_results,
    produce_numbers,
    produce_window_closers,
    topic_name,
    wait_for_results,
    windowed_dag,
)

from jetspark.core import DirectorySnapshotStore, ExecutionMode, JobConfig, ProcessingGuarantee

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

RECORDS = 3000
PARTITIONS = 3


@pytest.fixture
def engine(spark_engine: Any) -> Any:
    from jetspark.core.spark import SparkEngine

    return SparkEngine(spark_engine.context, members=2)


def config(mode: ExecutionMode) -> JobConfig:
    return JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=200,
        execution_mode=mode,
    )


@pytest.mark.parametrize("mode", [ExecutionMode.CONTINUOUS, ExecutionMode.MICRO_BATCH])
def test_a_killed_python_worker_changes_no_window_result(
    engine: Any, kafka_broker: Any, tmp_path: Any, mode: ExecutionMode
) -> None:
    source, sink = topic_name("in"), topic_name("out")
    kafka_broker.create_topic(source, PARTITIONS)
    kafka_broker.create_topic(sink, 2)
    produce_numbers(kafka_broker, source, range(RECORDS), PARTITIONS)
    produce_window_closers(kafka_broker, source, PARTITIONS, RECORDS + 1000)
    snapshots = str(tmp_path / "snapshots")
    kill = SignalOnce(signal.SIGKILL, 400, snapshots, str(tmp_path / "killed"))
    dag = windowed_dag(kafka_broker, source, sink, kill)
    job = engine.new_job(dag, config(mode), snapshot_store=DirectorySnapshotStore(snapshots))
    expected = expected_window_results(range(RECORDS))
    try:
        results = wait_for_results(kafka_broker, sink, expected, job)
    finally:
        job.cancel()
    assert results == expected
    assert os.path.exists(tmp_path / "killed")
    assert job.metrics.restarts == 1
