"""Kafka source and sink on LocalEngine against a real broker: records in, exact records out,
across restores, rescales and a crash between a snapshot's commit and its transaction's."""

from __future__ import annotations

import pytest
from kafka_jobs import (
    EPOCH,
    CrashBeforeTransactionCommit,
    committed_values,
    copy_dag,
    duplicates,
    expected_window_results,
    ordered_producer,
    produce_numbers,
    produce_window_closers,
    topic_name,
    wait_for_results,
    wait_for_values,
    windowed_dag,
    windowed_pipeline,
)

from jetspark.core import JobConfig, JobFailedError, LocalEngine, ProcessingGuarantee
from jetspark.core.snapshot_store import InMemorySnapshotStore
from jetspark.processors import kafka

pytestmark = pytest.mark.kafka

EXACTLY_ONCE = JobConfig(
    processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=100
)


def test_a_topic_copied_exactly_once_gives_every_record_once(kafka_broker):
    source, sink = topic_name("in"), topic_name("out")
    kafka_broker.create_topic(source, 3)
    kafka_broker.create_topic(sink, 2)
    produce_numbers(kafka_broker, source, range(3000), partitions=3)
    job = LocalEngine(members=2).new_job(copy_dag(kafka_broker, source, sink), EXACTLY_ONCE)
    try:
        wait_for_values(kafka_broker, sink, range(3000), job)
        produce_numbers(kafka_broker, source, range(3000, 4000), partitions=3)
        values = wait_for_values(kafka_broker, sink, range(3000, 4000), job)
    finally:
        job.cancel()
    assert duplicates(values) == {}
    assert sorted(map(int, values)) == list(range(4000))


def test_a_crash_between_the_snapshot_commit_and_the_transaction_commit_loses_and_repeats_nothing(
    kafka_broker, monkeypatch, caplog
):
    source, sink = topic_name("in"), topic_name("out")
    kafka_broker.create_topic(source, 2)
    kafka_broker.create_topic(sink, 1)
    produce_numbers(kafka_broker, source, range(2000), partitions=2)
    write_kafka_p = kafka.WriteKafkaP
    monkeypatch.setattr(kafka, "WriteKafkaP", CrashBeforeTransactionCommit)
    store = InMemorySnapshotStore()
    engine = LocalEngine()
    dag = copy_dag(kafka_broker, source, sink)
    job = engine.new_job(dag, EXACTLY_ONCE, snapshot_store=store)
    with pytest.raises(JobFailedError, match="injected crash"):
        job.join(timeout=300)
    committed = store.latest()
    assert committed is not None
    produce_numbers(kafka_broker, source, range(2000, 2500), partitions=2)
    monkeypatch.setattr(kafka, "WriteKafkaP", write_kafka_p)
    caplog.set_level("INFO", logger="jetspark.kafka")
    restored = engine.new_job(dag, EXACTLY_ONCE, snapshot_store=store, restore_from=committed)
    try:
        values = wait_for_values(kafka_broker, sink, range(2000, 2500), restored)
    finally:
        restored.cancel()
    assert duplicates(values) == {}
    assert sorted(map(int, values)) == list(range(2500))
    assert committed_values(kafka_broker, sink) == values
    assert "wrote again" in caplog.text  # the crashed epoch was decided lost and produced again


def test_windows_over_partitions_far_apart_in_event_time_lose_no_event(kafka_broker):
    # partition 0 holds 0..1999, partition 1 holds 2000..3999: the source reads both at once,
    # and only per-partition watermarks keep partition 0's events from being late
    source, sink = topic_name("in"), topic_name("out")
    kafka_broker.create_topic(source, 2)
    kafka_broker.create_topic(sink, 1)
    producer = ordered_producer(kafka_broker)
    for n in range(4000):
        producer.produce(source, str(n).encode(), partition=n // 2000, timestamp=EPOCH + n)
    producer.flush(60)
    produce_window_closers(kafka_broker, source, 2, 10_000)
    expected = expected_window_results(range(4000))
    job = LocalEngine().new_job(  # one source processor reads both partitions
        windowed_dag(kafka_broker, source, sink, source_parallelism=1), EXACTLY_ONCE
    )
    try:
        results = wait_for_results(kafka_broker, sink, expected, job)
    finally:
        job.cancel()
    assert results == expected


def test_the_pipeline_form_puts_timestamps_into_the_source_and_gives_the_core_jobs_records(
    kafka_broker,
):
    source, core_sink, pipeline_sink = topic_name("in"), topic_name("core"), topic_name("pipe")
    kafka_broker.create_topic(source, 3)
    kafka_broker.create_topic(core_sink, 1)
    kafka_broker.create_topic(pipeline_sink, 1)
    produce_numbers(kafka_broker, source, range(2000), partitions=3)
    produce_window_closers(kafka_broker, source, 3, 5000)
    pipeline = windowed_pipeline(kafka_broker, source, pipeline_sink)
    names = [v.name for v in pipeline.to_dag().vertices()]
    assert not any("timestamps" in name or "watermarks" in name for name in names), names
    expected = expected_window_results(range(2000))
    engine = LocalEngine(members=2)
    results = {}
    for dag, sink in (
        (windowed_dag(kafka_broker, source, core_sink), core_sink),
        (pipeline, pipeline_sink),
    ):
        job = engine.new_job(dag, EXACTLY_ONCE)
        try:
            results[sink] = wait_for_results(kafka_broker, sink, expected, job)
        finally:
            job.cancel()
    assert results[pipeline_sink] == results[core_sink] == expected


def test_a_partition_without_records_is_marked_idle_in_the_pipelines_source(kafka_broker):
    """Every record in partition 0 of 2, one source processor reading both: partition 1 turns
    idle after the pipeline's idle_timeout, and every window closes on partition 0's watermark
    alone (without it, none would ever close)."""
    source, sink = topic_name("in"), topic_name("out")
    kafka_broker.create_topic(source, 2)
    kafka_broker.create_topic(sink, 1)
    produce_numbers(kafka_broker, source, range(0, 2000, 2), partitions=2)  # all even: p0
    produce_numbers(kafka_broker, source, range(5000, 5001), partitions=2)
    pipeline = windowed_pipeline(kafka_broker, source, sink, idle_timeout=200)
    job = LocalEngine().new_job(pipeline, EXACTLY_ONCE)
    expected = expected_window_results(range(0, 2000, 2))
    try:
        assert wait_for_results(kafka_broker, sink, expected, job) == expected
    finally:
        job.cancel()
