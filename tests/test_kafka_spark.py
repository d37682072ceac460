"""Kafka on SparkEngine against a real broker: a windowed job reading a topic and writing its
results exactly once to another, continuously and in micro-batches, across a killed Python
worker, a killed driver, a broker restarted mid-job and a crash between a snapshot's commit and
its transaction's; results read back with read_committed, each expected one exactly once."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fault_tolerance_jobs import SignalOnce
from kafka_jobs import (
    READ_PATIENCE_SECONDS,
    DieBeforeTransactionCommit,
    committed_values,
    copy_dag,
    died_marker,
    duplicates,
    expected_window_results,
    produce_numbers,
    produce_window_closers,
    topic_name,
    wait_for_results,
    wait_for_values,
    windowed_dag,
)

from jetspark.core import (
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.processors import kafka

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
    half = RECORDS // 2
    produce_numbers(kafka_broker, source, range(half), PARTITIONS)
    snapshots = str(tmp_path / "snapshots")
    # the worker dies at its first item after a snapshot is committed: the second half
    # comes after one is, so the kill falls mid-stream whatever the machine's speed
    kill = SignalOnce(signal.SIGKILL, 1, snapshots, str(tmp_path / "killed"))
    dag = windowed_dag(kafka_broker, source, sink, kill)
    job = engine.new_job(dag, config(mode), snapshot_store=DirectorySnapshotStore(snapshots))
    expected = expected_window_results(range(RECORDS))
    try:
        _wait_for_a_commit(snapshots, job)
        produce_numbers(kafka_broker, source, range(half, RECORDS), PARTITIONS)
        produce_window_closers(kafka_broker, source, PARTITIONS, RECORDS + 1000)
        results = wait_for_results(kafka_broker, sink, expected, job)
    finally:
        job.cancel()
    assert results == expected
    assert os.path.exists(tmp_path / "killed")
    assert job.metrics.restarts == 1


def _wait_for_a_commit(snapshots: str, job: Any = None) -> None:
    deadline = time.monotonic() + READ_PATIENCE_SECONDS
    while not glob.glob(os.path.join(snapshots, "snapshot-*", "MANIFEST")):
        assert job is None or not job.status.is_terminal, job.status
        assert time.monotonic() < deadline, "no snapshot was committed"
        time.sleep(0.1)


def _driver(
    broker: Any, source: str, sink: str, snapshots: str, members: int, *options: str
) -> Any:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    arguments = [broker.bootstrap_servers, source, sink, snapshots, str(members), *options]
    return subprocess.Popen(
        [sys.executable, "kafka_driver_child.py", *arguments],
        cwd=Path(__file__).parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


@pytest.mark.parametrize("mode", [ExecutionMode.CONTINUOUS, ExecutionMode.MICRO_BATCH])
def test_a_killed_driver_restored_with_another_member_count_changes_no_window_result(
    kafka_broker: Any, tmp_path: Any, mode: ExecutionMode
) -> None:
    source, sink = topic_name("in"), topic_name("out")
    kafka_broker.create_topic(source, PARTITIONS)
    kafka_broker.create_topic(sink, 2)
    snapshots = str(tmp_path / "snapshots")
    produce_numbers(kafka_broker, source, range(1500), PARTITIONS)
    first = _driver(kafka_broker, source, sink, snapshots, 2, mode.name)
    try:
        # killed once a snapshot is committed and some windows are out
        deadline = time.monotonic() + READ_PATIENCE_SECONDS
        while not (
            glob.glob(os.path.join(snapshots, "snapshot-*", "MANIFEST"))
            and committed_values(kafka_broker, sink)
        ):
            assert first.poll() is None, "the first driver ended by itself"
            assert time.monotonic() < deadline, "no snapshot and no result from the first driver"
            time.sleep(0.2)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    produce_numbers(kafka_broker, source, range(1500, RECORDS), PARTITIONS)
    produce_window_closers(kafka_broker, source, PARTITIONS, RECORDS + 1000)
    second = _driver(kafka_broker, source, sink, snapshots, 3, mode.name, "restore")
    try:
        expected = expected_window_results(range(RECORDS))
        results = wait_for_results(kafka_broker, sink, expected)
    finally:
        os.killpg(second.pid, signal.SIGKILL)
        second.wait()
    assert results == expected


def test_a_bounded_micro_batch_job_publishes_its_last_batch_exactly_once(
    engine: Any, kafka_broker: Any, tmp_path: Any
) -> None:
    from kafka_jobs import duplicates, properties

    from jetspark.core import DAG
    from jetspark.edges import between
    from jetspark.processors import read_list_p
    from jetspark.processors.kafka import write_kafka_p

    sink = topic_name("out")
    kafka_broker.create_topic(sink, 1)
    engine.get_list("numbers")[:] = [str(n) for n in range(500)]
    dag = DAG("bounded-to-kafka")
    source = dag.new_vertex("numbers", read_list_p("numbers"))
    out = dag.new_vertex("kafka-out", write_kafka_p(properties(kafka_broker), sink, str, str))
    dag.edge(between(source, out))
    snapshots = DirectorySnapshotStore(str(tmp_path / "snapshots"))
    engine.new_job(dag, config(ExecutionMode.MICRO_BATCH), snapshot_store=snapshots).join(300)
    values = committed_values(kafka_broker, sink)
    assert duplicates(values) == {}
    assert sorted(values, key=int) == [str(n) for n in range(500)]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", [ExecutionMode.CONTINUOUS, ExecutionMode.MICRO_BATCH])
def test_a_broker_restarted_mid_job_loses_and_repeats_nothing(
    engine: Any, restartable_kafka_broker: Any, tmp_path: Any, mode: ExecutionMode
) -> None:
    broker = restartable_kafka_broker
    source, sink = topic_name("in"), topic_name("out")
    broker.create_topic(source, PARTITIONS)
    broker.create_topic(sink, 1)
    snapshots = DirectorySnapshotStore(str(tmp_path / "snapshots"))
    job = engine.new_job(copy_dag(broker, source, sink), config(mode), snapshot_store=snapshots)
    try:
        produce_numbers(broker, source, range(1000), PARTITIONS)
        wait_for_values(broker, sink, range(1000), job)
        broker.restart()
        produce_numbers(broker, source, range(1000, 2000), PARTITIONS)
        values = wait_for_values(broker, sink, range(2000), job)
    finally:
        job.cancel()
    assert duplicates(values) == {}
    assert sorted(map(int, values)) == list(range(2000))


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", [ExecutionMode.CONTINUOUS, ExecutionMode.MICRO_BATCH])
def test_a_process_killed_between_the_snapshot_commit_and_the_transaction_commit_changes_nothing(
    engine: Any, kafka_broker: Any, tmp_path: Any, monkeypatch: Any, mode: ExecutionMode
) -> None:
    """The sink's Python worker is SIGKILLed right before its first transaction commit: in
    CONTINUOUS after the snapshot that holds the epoch committed, in a micro-batch when the
    next batch publishes it (the class reaches the workers inside the DAG's tasks, pickled
    while it is patched in). The job restarts by itself, decides the epoch from the broker and
    writes every record once."""
    source, sink = topic_name("in"), topic_name("out")
    kafka_broker.create_topic(source, PARTITIONS)
    kafka_broker.create_topic(sink, 1)
    produce_numbers(kafka_broker, source, range(2000), PARTITIONS)
    store = DirectorySnapshotStore(str(tmp_path / "snapshots"))
    monkeypatch.setattr(kafka, "WriteKafkaP", DieBeforeTransactionCommit)
    job = engine.new_job(copy_dag(kafka_broker, source, sink), config(mode), snapshot_store=store)
    try:
        produce_numbers(kafka_broker, source, range(2000, 2500), PARTITIONS)
        values = wait_for_values(kafka_broker, sink, range(2500), job)
    finally:
        job.cancel()
    assert os.path.exists(died_marker(sink)), "no sink was killed before its commit"
    assert job.metrics.restarts == 1
    assert duplicates(values) == {}
    assert sorted(map(int, values)) == list(range(2500))
