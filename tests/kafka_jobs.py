"""Topics, records and jobs for the Kafka tests (no tests here): numbered records produced
into a topic's partitions, a job reading them through `stream_kafka_p` into `write_kafka_p`,
and a read_committed reader of what a sink topic holds."""

from __future__ import annotations

import os
import secrets
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from jetspark.core import DAG
from jetspark.edges import between
from jetspark.processors import aggregate_to_sliding_window_p, map_p
from jetspark.processors.aggregate import counting
from jetspark.processors.kafka import (
    EventTimePolicy,
    KafkaRecord,
    WriteKafkaP,
    stream_kafka_p,
    write_kafka_p,
)
from jetspark.processors.windowing import TimestampKind, limiting_lag, sliding_window_policy

EPOCH = 1_000_000
"""Record n's Kafka timestamp is EPOCH + n (0 would mean "now" to the client)."""

READ_PATIENCE_SECONDS = 300.0
"""How long a reader waits for the records it expects before the test fails (a failure
bound, not a speed claim: nothing is asserted on how fast they come)."""


def topic_name(label: str) -> str:
    """A topic name no other test of the run uses."""
    return f"{label}-{secrets.token_hex(4)}"


def properties(broker: Any, **extra: Any) -> dict[str, Any]:
    """Client properties for `broker`, reading topics from their start."""
    return {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest", **extra}


def ordered_producer(broker: Any) -> Any:
    """A producer that keeps each partition in the order of production: idempotent, so a
    batch retried after an error (a new topic's leader not known yet) cannot land behind the
    batches sent after it, which would make its records late in event time."""
    from confluent_kafka import Producer

    settings = {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5}
    return Producer({**settings, "enable.idempotence": True})


def produce_numbers(broker: Any, topic: str, numbers: range, partitions: int | None = None) -> None:
    """Produces record n (key `k<n % 7>`, value `n`, timestamp EPOCH + n) for each n, into
    partition n % partitions when `partitions` is given (else by the key's hash)."""
    producer = ordered_producer(broker)
    for n in numbers:
        extra = {} if partitions is None else {"partition": n % partitions}
        producer.produce(topic, str(n).encode(), f"k{n % 7}".encode(), timestamp=EPOCH + n, **extra)
        if n % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def committed_values(broker: Any, topic: str) -> list[str]:
    """Every committed record value of `topic` now, read to the end of each partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"reader-{secrets.token_hex(4)}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        partitions = [TopicPartition(topic, p, 0) for p in metadata.partitions]
        consumer.assign(partitions)
        open_partitions = {p.partition for p in partitions}
        values = []
        deadline = time.monotonic() + READ_PATIENCE_SECONDS
        while open_partitions and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().name() == "_PARTITION_EOF":
                    open_partitions.discard(message.partition())
                continue
            values.append(message.value().decode())
        assert not open_partitions, f"{topic}: partitions {open_partitions} never reached the end"
        return values
    finally:
        consumer.close()


def _check_running(job: Any) -> None:
    """Raises the job's own error at once if it ended while results are awaited."""
    if job is not None and job.status.is_terminal:
        job.join(0)
        raise AssertionError(f"the job ended ({job.status}) before its results were there")


def wait_for_values(broker: Any, topic: str, numbers: range, job: Any = None) -> list[str]:
    """The committed values of `topic` once every one of `numbers` is among them (failing at
    once with `job`'s error if it ends first)."""
    deadline = time.monotonic() + READ_PATIENCE_SECONDS
    wanted = {str(n) for n in numbers}
    while True:
        _check_running(job)
        values = committed_values(broker, topic)
        missing = wanted.difference(values)
        if not missing:
            return values
        assert time.monotonic() < deadline, (
            f"{topic} holds {len(values)} committed records and lacks {len(missing)} of "
            f"{numbers}, such as {sorted(missing, key=int)[:5]}"
        )
        time.sleep(0.5)


def duplicates(values: list[str]) -> dict[str, int]:
    return {v: n for v, n in Counter(values).items() if n > 1}


def _number_key(n: int) -> str:
    return f"k{n % 7}"


def number_value(record: KafkaRecord) -> int:
    return int(record.value)


def copy_dag(
    broker: Any,
    source_topic: str | tuple[str, ...],
    sink_topic: str,
    *,
    source_parallelism: int = 2,
    exactly_once: bool = True,
    sink_properties: dict[str, Any] | None = None,
    source_properties: dict[str, Any] | None = None,
    **source_options: Any,
) -> DAG:
    """source topic(s) -> `n` -> sink topic: each number once, as its value."""
    dag = DAG("kafka-copy")
    topics = (source_topic,) if isinstance(source_topic, str) else source_topic
    source_options.setdefault("projection_fn", number_value)
    source = dag.new_vertex(
        "kafka-in",
        stream_kafka_p(properties(broker, **(source_properties or {})), *topics, **source_options),
    ).local_parallelism(source_parallelism)
    out = dag.new_vertex(
        "kafka-out",
        write_kafka_p(
            sink_properties or properties(broker), sink_topic, _number_key, str, exactly_once
        ),
    ).local_parallelism(2)
    dag.edge(between(source, out))
    return dag


class CrashBeforeTransactionCommit(WriteKafkaP):
    """A Kafka sink whose process "dies" after a snapshot committed, before its transaction
    does: the fault the exactly-once design must survive."""

    def snapshot_committed(self) -> None:
        prepared = self._prepared
        if prepared is not None and prepared.records:
            self._producers = []  # its open transaction stays open, as a killed process's
            raise RuntimeError("injected crash between the snapshot's and the transaction's commit")
        super().snapshot_committed()


class DieBeforeTransactionCommit(WriteKafkaP):
    """A Kafka sink whose process is killed (SIGKILL) at its first transaction commit, once per
    sink topic (`died_marker` records the death): in CONTINUOUS that commit follows a committed
    snapshot, in a micro-batch it publishes the previous batch's epoch, the hard case of each."""

    def _call(self, method: Callable[..., Any], *args: Any, what: str) -> Any:
        marker = died_marker(self._settings.topic)
        if what == "commit_transaction" and not os.path.exists(marker):
            with open(marker, "w") as died:
                died.write(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return super()._call(method, *args, what=what)


def died_marker(topic: str) -> str:
    """The file DieBeforeTransactionCommit writes before it kills its process."""
    return os.path.join(tempfile.gettempdir(), f"jetspark-died-before-commit-{topic}")


WINDOW = 100
"""The tumbling windows' size in the windowed job (event time: a record's number)."""


_WINDOWS = sliding_window_policy(WINDOW, WINDOW)


def windowed_dag(
    broker: Any,
    source_topic: str,
    sink_topic: str,
    fault: Callable[[Any], Any] = lambda n: n,
    *,
    source_parallelism: int = 2,
    idle_timeout_ms: int = 60_000,
) -> DAG:
    """source topic (event time: the records' Kafka timestamps, watermarks per partition)
    -> fault -> count per key (n % 7) in tumbling windows of WINDOW -> "end:key:count"."""
    dag = DAG("kafka-windows")
    policy = EventTimePolicy(None, limiting_lag(0), idle_timeout_ms=idle_timeout_ms)
    source = dag.new_vertex(
        "kafka-in",
        stream_kafka_p(
            properties(broker), source_topic, projection_fn=number_value, event_time_policy=policy
        ),
    ).local_parallelism(source_parallelism)
    faulty = dag.new_vertex("fault", map_p(fault))
    window = dag.new_vertex(
        "window",
        aggregate_to_sliding_window_p(_key, _number, TimestampKind.EVENT, _WINDOWS, counting()),
    )
    out = dag.new_vertex(
        "kafka-out",
        write_kafka_p(properties(broker), sink_topic, _result_key, _result_value),
    )
    dag.edge(between(source, faulty))
    dag.edge(between(faulty, window).distributed().partitioned(_key))
    dag.edge(between(window, out))
    return dag


def _key(n: int) -> int:
    return n % 7


def _number(n: int) -> int:
    return EPOCH + n


def _result_key(result: Any) -> str:
    return str(result.key)


def _result_value(result: Any) -> str:
    return f"{result.end}:{result.key}:{result.value}"


def produce_window_closers(broker: Any, topic: str, partitions: int, at: int) -> None:
    """A record of timestamp `at` in each partition: every window ending by `at` closes."""
    produce_numbers(broker, topic, range(at, at + partitions), partitions)


def expected_window_results(numbers: range) -> list[str]:
    """What windowed_dag writes for the records `numbers` once their windows closed."""
    counts = Counter((EPOCH + n // WINDOW * WINDOW + WINDOW, n % 7) for n in numbers)
    return sorted(f"{end}:{key}:{count}" for (end, key), count in counts.items())


def wait_for_results(broker: Any, topic: str, expected: list[str], job: Any = None) -> list[str]:
    """The committed values of `topic` once it holds as many as `expected`."""
    deadline = time.monotonic() + READ_PATIENCE_SECONDS
    while True:
        _check_running(job)
        values = committed_values(broker, topic)
        if len(values) >= len(expected):
            return sorted(values)
        assert time.monotonic() < deadline, (
            f"{topic} holds {len(values)} committed results, {len(expected)} expected"
        )
        time.sleep(0.5)


def windowed_pipeline(
    broker: Any, source_topic: str, sink_topic: str, idle_timeout: int = 60_000
) -> Any:
    """windowed_dag's job in the Pipeline API: the same result records."""
    from jetspark.core.pipeline import KafkaSinks, KafkaSources, Pipeline, WindowDefinition

    p = Pipeline.create()
    numbers = p.draw_from(
        KafkaSources.kafka(properties(broker), source_topic, projection_fn=number_value)
    )
    windows = numbers.add_timestamps(_number, 0, idle_timeout).grouping_key(_key)
    windows.window(WindowDefinition.tumbling(WINDOW)).aggregate(counting()).drain_to(
        KafkaSinks.kafka(properties(broker), sink_topic, _entry_key, _entry_value)
    )
    return p


def _entry_key(entry: Any) -> str:
    return str(entry.key)


def _entry_value(entry: Any) -> str:
    return f"{entry.timestamp}:{entry.key}:{entry.value}"
