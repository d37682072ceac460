"""Kafka source and sink on LocalEngine against a real broker: records in, exact records out,
across restores, rescales and a crash between a snapshot's commit and its transaction's."""

from __future__ import annotations

import pytest
from kafka_jobs import (
    CrashBeforeTransactionCommit,
    committed_values,
    copy_dag,
    duplicates,
    produce_numbers,
    topic_name,
    wait_for_values,
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
        wait_for_values(kafka_broker, sink, range(3000))
        produce_numbers(kafka_broker, source, range(3000, 4000), partitions=3)
        values = wait_for_values(kafka_broker, sink, range(3000, 4000))
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
        values = wait_for_values(kafka_broker, sink, range(2000, 2500))
    finally:
        restored.cancel()
    assert duplicates(values) == {}
    assert sorted(map(int, values)) == list(range(2500))
    assert committed_values(kafka_broker, sink) == values
    assert "wrote again" in caplog.text  # the crashed epoch was decided lost and produced again
