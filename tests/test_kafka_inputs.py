"""Kafka sources and sinks given bad input or unusual topics, on LocalEngine against a real
broker: each mistake gets an error naming the vertex and the setting, and odd but legal
layouts (new partitions, fewer partitions than processors, several topics, a broker restart)
lose and repeat nothing."""

from __future__ import annotations

import json
import logging

import pytest
from kafka_jobs import (
    committed_values,
    copy_dag,
    duplicates,
    expected_window_results,
    ordered_producer,
    produce_numbers,
    produce_window_closers,
    properties,
    topic_name,
    wait_for_results,
    wait_for_values,
    windowed_dag,
)

from bench.kafka_broker import free_port
from jetspark.core import DAG, JobConfig, JobFailedError, LocalEngine, ProcessingGuarantee
from jetspark.edges import between
from jetspark.processors import read_list_p, write_list_p
from jetspark.processors.kafka import KafkaSettingError, stream_kafka_p, write_kafka_p

pytestmark = pytest.mark.kafka

EXACTLY_ONCE = JobConfig(
    processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=100
)


def test_properties_without_bootstrap_servers_are_refused_naming_the_setting():
    with pytest.raises(KafkaSettingError, match=r"bootstrap\.servers"):
        stream_kafka_p({"group.id": "g"}, "trades")
    with pytest.raises(KafkaSettingError, match=r"bootstrap\.servers"):
        write_kafka_p({}, "out", str, str)


def test_a_topic_that_does_not_exist_fails_the_job_at_submit_naming_vertex_and_topic(
    kafka_broker,
):
    dag = copy_dag(kafka_broker, "no-such-topic", "no-such-out")
    with pytest.raises(JobFailedError, match=r"(?s)kafka-in.*'no-such-topic' does not exist"):
        LocalEngine().new_job(dag, EXACTLY_ONCE).join(60)


def test_a_topic_is_created_when_the_properties_allow_it(kafka_broker):
    source, sink = topic_name("created"), topic_name("out")
    kafka_broker.create_topic(sink, 1)
    allowing = {"allow.auto.create.topics": "true"}
    dag = copy_dag(kafka_broker, source, sink, source_properties=allowing)
    job = LocalEngine().new_job(dag, EXACTLY_ONCE)
    try:
        produce_numbers(kafka_broker, source, range(10))
        values = wait_for_values(kafka_broker, sink, range(10), job)
    finally:
        job.cancel()
    assert sorted(values, key=int) == [str(n) for n in range(10)]


def test_a_broker_that_does_not_answer_fails_the_job_after_the_wait_naming_the_servers():
    silent = {"bootstrap.servers": f"127.0.0.1:{free_port()}"}
    dag = DAG("silent")
    source = dag.new_vertex("kafka-in", stream_kafka_p(silent, "t", broker_wait_seconds=2))
    dag.edge(between(source, dag.new_vertex("sink", write_list_p("out"))))
    with pytest.raises(JobFailedError) as failure:
        LocalEngine().new_job(dag).join(60)
    message = str(failure.value)
    assert "kafka-in" in message and silent["bootstrap.servers"] in message, message
    assert "broker_wait_seconds" in message, message


def _unreadable_topic(broker) -> str:
    topic = topic_name("json")
    broker.create_topic(topic, 1)
    producer = ordered_producer(broker)
    for value in (b'{"n": 0}', b"not json", b'{"n": 2}'):
        producer.produce(topic, value, partition=0)
    producer.flush(30)
    return topic


def _json_dag(broker, topic: str, on_error: str) -> DAG:
    dag = DAG("json")
    source = dag.new_vertex(
        "kafka-in",
        stream_kafka_p(
            properties(broker),
            topic,
            value_deserializer=json.loads,
            projection_fn=lambda record: record.value["n"],
            on_error=on_error,
        ),
    )
    dag.edge(between(source, dag.new_vertex("sink", write_list_p("numbers"))))
    return dag


def test_an_unreadable_record_fails_the_job_naming_topic_partition_and_offset(kafka_broker):
    topic = _unreadable_topic(kafka_broker)
    job = LocalEngine().new_job(_json_dag(kafka_broker, topic, "fail"))
    with pytest.raises(JobFailedError) as failure:
        job.join(120)
    message = str(failure.value)
    assert f"topic {topic!r} partition 0 offset 1" in message, message
    assert "on_error='skip'" in message, message


def test_on_error_skip_logs_the_unreadable_record_and_reads_on(kafka_broker, caplog):
    topic = _unreadable_topic(kafka_broker)
    engine = LocalEngine()
    caplog.set_level(logging.WARNING, logger="jetspark.kafka")
    job = engine.new_job(_json_dag(kafka_broker, topic, "skip"))
    try:
        _wait_for(lambda: len(engine.get_list("numbers")) >= 2, job)
    finally:
        job.cancel()
    assert engine.get_list("numbers") == [0, 2]
    assert f"topic {topic!r} partition 0 offset 1" in caplog.text


def _wait_for(condition, job, patience: float = 120) -> None:
    import time

    deadline = time.monotonic() + patience
    while not condition():
        assert not job.status.is_terminal, job.status
        assert time.monotonic() < deadline
        time.sleep(0.1)


def _no_key(item):
    return None


def test_a_record_over_the_size_limit_fails_the_job_naming_vertex_and_size(kafka_broker):
    sink = topic_name("big")
    kafka_broker.create_topic(sink, 1)
    engine = LocalEngine()
    engine.get_list("big").append("x" * 2_000_000)
    dag = DAG("big")
    source = dag.new_vertex("source", read_list_p("big"))
    out = dag.new_vertex("kafka-out", write_kafka_p(properties(kafka_broker), sink, _no_key, str))
    dag.edge(between(source, out))
    with pytest.raises(JobFailedError) as failure:
        engine.new_job(dag).join(120)
    message = str(failure.value)
    assert "kafka-out" in message and "2000000 bytes" in message, message
    assert "message.max.bytes" in message, message


@pytest.mark.timeout(600)
def test_a_second_job_with_the_same_transactional_id_fences_the_first_naming_it(kafka_broker):
    source, sink = topic_name("in"), topic_name("out")
    kafka_broker.create_topic(source, 1)
    kafka_broker.create_topic(sink, 1)
    shared = properties(kafka_broker, **{"transactional.id": f"shared-{sink}"})
    engine = LocalEngine()
    first = engine.new_job(
        copy_dag(kafka_broker, source, sink, sink_properties=shared), EXACTLY_ONCE
    )
    produce_numbers(kafka_broker, source, range(100), partitions=1)
    wait_for_values(kafka_broker, sink, range(100), first)
    second = engine.new_job(
        copy_dag(kafka_broker, source, sink, sink_properties=shared), EXACTLY_ONCE
    )
    try:
        # the second job's producers have started once it wrote the records again (their
        # start waits until the broker aborted the first job's open transactions: up to
        # transaction.timeout.ms)
        _wait_for(lambda: len(committed_values(kafka_broker, sink)) >= 200, second, 300)
        produce_numbers(kafka_broker, source, range(100, 200), partitions=1)
        with pytest.raises(JobFailedError) as failure:
            first.join(300)
    finally:
        second.cancel()
    message = str(failure.value)
    assert "kafka-out" in message and "fenced" in message, message
    assert f"'shared-{sink}-kafka-out-" in message, message


def test_partitions_added_while_the_job_runs_are_read_from_their_start(kafka_broker):
    source, sink = topic_name("grows"), topic_name("out")
    kafka_broker.create_topic(source, 1)
    kafka_broker.create_topic(sink, 1)
    dag = copy_dag(kafka_broker, source, sink, partition_check_interval_ms=100)
    job = LocalEngine(members=2).new_job(dag, EXACTLY_ONCE)
    try:
        produce_numbers(kafka_broker, source, range(100), partitions=1)
        wait_for_values(kafka_broker, sink, range(100), job)
        kafka_broker.add_partitions(source, 4)
        produce_numbers(kafka_broker, source, range(100, 500), partitions=4)
        values = wait_for_values(kafka_broker, sink, range(500), job)
    finally:
        job.cancel()
    assert duplicates(values) == {}
    assert sorted(map(int, values)) == list(range(500))


def test_fewer_partitions_than_source_processors_still_close_every_window(kafka_broker):
    # one partition, four source processors: three read nothing and are idle at once
    source, sink = topic_name("narrow"), topic_name("out")
    kafka_broker.create_topic(source, 1)
    kafka_broker.create_topic(sink, 1)
    produce_numbers(kafka_broker, source, range(1000), partitions=1)
    produce_window_closers(kafka_broker, source, 1, 5000)
    expected = expected_window_results(range(1000))
    job = LocalEngine(members=2).new_job(windowed_dag(kafka_broker, source, sink), EXACTLY_ONCE)
    try:
        assert wait_for_results(kafka_broker, sink, expected, job) == expected
    finally:
        job.cancel()


def test_several_topics_are_read_as_one_stream(kafka_broker):
    first, second, sink = topic_name("a"), topic_name("b"), topic_name("out")
    for topic, partitions in ((first, 2), (second, 3), (sink, 1)):
        kafka_broker.create_topic(topic, partitions)
    produce_numbers(kafka_broker, first, range(0, 300), partitions=2)
    produce_numbers(kafka_broker, second, range(300, 600), partitions=3)
    job = LocalEngine(members=2).new_job(
        copy_dag(kafka_broker, (first, second), sink), EXACTLY_ONCE
    )
    try:
        values = wait_for_values(kafka_broker, sink, range(600), job)
    finally:
        job.cancel()
    assert sorted(map(int, values)) == list(range(600))


def test_a_broker_restarted_mid_job_loses_and_repeats_nothing(restartable_kafka_broker):
    broker = restartable_kafka_broker
    source, sink = topic_name("in"), topic_name("out")
    broker.create_topic(source, 2)
    broker.create_topic(sink, 1)
    job = LocalEngine(members=2).new_job(copy_dag(broker, source, sink), EXACTLY_ONCE)
    try:
        produce_numbers(broker, source, range(1000), partitions=2)
        wait_for_values(broker, sink, range(1000), job)
        broker.restart()
        produce_numbers(broker, source, range(1000, 2000), partitions=2)
        values = wait_for_values(broker, sink, range(2000), job)
    finally:
        job.cancel()
    assert duplicates(values) == {}
    assert sorted(map(int, values)) == list(range(2000))
