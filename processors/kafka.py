"""Kafka: the manual's production source and sink (§5.5), Jet's `KafkaProcessors` with Python
names, on the confluent-kafka client (librdkafka).

Source, `stream_kafka_p`: one consumer per processor with manual partition assignment (the
`group.id` does not spread partitions): partition p of topic t goes to the processor of global
index `(murmur3(t) + p) % total parallelism`, over the processors of every member. Each processor
checks for partitions added to its topics every `partition_check_interval_ms` and reads new
ones from their start. With a processing guarantee, the next offset of each partition (and its
watermark) is a snapshot entry under a broadcast key, so a restore resumes right after the last
item the snapshot covers, at any parallelism or member count; without one, the emitted offsets
are committed to Kafka under the `group.id`, as Jet does. With an `EventTimePolicy`, watermarks
are kept per partition and coalesced in the source (event_time.py): a partition far ahead in
event time makes no other partition's events late, and a quiet partition (or a processor that
reads none) is marked idle.

Sink, `write_kafka_p`: with the exactly-once guarantee, a Kafka transaction per processor and
snapshot (docs/kafka.md, "Exactly-once"):

- the records of an epoch (the items between two snapshots) are produced into a transaction;
  at `save_to_snapshot()` a *marker* record (a random token) is produced into the same
  transaction on the marker topic, the transaction is flushed, and the snapshot saves the
  epoch's records with the token and the marker's offset; `snapshot_committed()` commits the
  transaction. Two transactional producers alternate, so the next epoch begins while the
  previous one waits for its commit (Jet 4 does the same);
- librdkafka cannot resume a prepared transaction of a crashed producer, so a restore decides
  from the broker: it first fences every transactional id the snapshot names (`init_transactions`
  aborts an open transaction and waits for a committing one), then reads the marker partition
  from the saved marker's offset with `read_committed`. The token there means the epoch is in
  Kafka; its absence means it is not, and the processor produces the saved records again, with
  the same token, in a transaction it commits before it processes anything else. A crash at any
  point of that is decided the same way on the next restore: nothing is lost or written twice.

`exactly_once=False`, or an at-least-once job: an idempotent producer, flushed at every
snapshot (at-least-once). Without a guarantee: the same producer, flushed at completion.

On SparkEngine's micro-batches a batch's task ends before the driver commits the batch, so the
sink only saves each epoch's records in the batch's snapshot; the next batch publishes them by
the restore path above before it writes anything new (one batch later, still exactly once).
The source in a micro-batch reads each partition up to the end offset (the last stable offset,
under `read_committed`) fixed in the previous batch's snapshot, in a fixed order, so a task run
again reads exactly the same records.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import ProcessorMetaSupplierContext
from jetspark.core.suppliers import (
    ProcessorMetaSupplier,
    ProcessorSupplier,
    reads_fixed_ranges,
    unbounded,
)
from jetspark.processors.event_time import EventTimePolicy, check_policy
from jetspark.processors.kafka_client import (
    KafkaSettingError,
    Properties,
    check_properties,
    ensure_marker_topic,
    wait_for_metadata,
)
from jetspark.processors.kafka_sink import Serializer, SinkSettings, WriteKafkaP, default_serializer
from jetspark.processors.kafka_source import (
    Deserializer,
    KafkaRecord,
    SourceSettings,
    StreamKafkaP,
    default_projection,
)

__all__ = [
    "DEFAULT_BROKER_WAIT_SECONDS",
    "DEFAULT_MARKER_TOPIC",
    "DEFAULT_PARTITION_CHECK_INTERVAL_MS",
    "EventTimePolicy",
    "KafkaRecord",
    "KafkaSettingError",
    "Properties",
    "StreamKafkaP",
    "WriteKafkaP",
    "default_serializer",
    "stream_kafka_p",
    "write_kafka_p",
]

DEFAULT_PARTITION_CHECK_INTERVAL_MS = 5_000
"""How often a source looks for partitions added to its topics (Jet 4: 5 s)."""

DEFAULT_BROKER_WAIT_SECONDS = 60.0
"""How long a job waits for a broker that does not answer before it fails."""

DEFAULT_MARKER_TOPIC = "jetspark-transaction-markers"
"""The topic holding the exactly-once sink's transaction markers (one partition)."""


class _KafkaMetaSupplier(ProcessorMetaSupplier):
    """Checks the brokers and topics at submit (on the driver), then supplies the processors."""

    def __init__(self, make: Callable[[], AbstractProcessor], check: Callable[[str], None]):
        self._make = make
        self._check = check

    def preferred_local_parallelism(self) -> int:
        return 1

    def init(self, context: ProcessorMetaSupplierContext) -> None:
        self._check(context.vertex_name)

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], ProcessorSupplier]:
        supplier = ProcessorSupplier.of(self._make)
        return lambda member: supplier


def stream_kafka_p(
    properties: Properties,
    *topics: str,
    projection_fn: Callable[[KafkaRecord], Any] | None = None,
    event_time_policy: EventTimePolicy | None = None,
    key_deserializer: Deserializer | None = None,
    value_deserializer: Deserializer | None = None,
    on_error: str = "fail",
    partition_check_interval_ms: int = DEFAULT_PARTITION_CHECK_INTERVAL_MS,
    broker_wait_seconds: float = DEFAULT_BROKER_WAIT_SECONDS,
) -> ProcessorMetaSupplier:
    """An unbounded source of the records of `topics` (Jet's `KafkaProcessors.streamKafkaP`).

    Items are `(key, value)` tuples, or `projection_fn(record)` of each `KafkaRecord`; keys and
    values are the bytes Kafka holds unless a deserializer (bytes -> value) is given. A record
    that a deserializer or the projection cannot read fails the job naming topic, partition
    and offset, or with `on_error='skip'` is logged and skipped. `properties` are the
    confluent-kafka consumer's settings (librdkafka's names; `bootstrap.servers` required).
    """
    what = "stream_kafka_p"
    properties = check_properties(properties, what)
    if not topics or not all(isinstance(t, str) and t for t in topics):
        raise ValueError(f"{what}: give at least one topic name, got {topics!r}")
    if on_error not in ("fail", "skip"):
        raise ValueError(f"{what}: on_error must be 'fail' or 'skip', got {on_error!r}")
    check_policy(event_time_policy, what)
    if partition_check_interval_ms < 0:
        raise ValueError(f"{what}: partition_check_interval_ms must be >= 0")
    settings = SourceSettings(
        properties,
        tuple(dict.fromkeys(topics)),
        projection_fn if projection_fn is not None else default_projection,
        event_time_policy,
        key_deserializer,
        value_deserializer,
        on_error,
        partition_check_interval_ms,
        broker_wait_seconds,
    )

    def check(vertex: str) -> None:
        wait_for_metadata(properties, settings.topics, vertex, broker_wait_seconds)

    return reads_fixed_ranges(unbounded(_KafkaMetaSupplier(lambda: StreamKafkaP(settings), check)))


def write_kafka_p(
    properties: Properties,
    topic: str,
    key_fn: Callable[[Any], Any],
    value_fn: Callable[[Any], Any],
    exactly_once: bool = True,
    *,
    key_serializer: Serializer = default_serializer,
    value_serializer: Serializer = default_serializer,
    marker_topic: str = DEFAULT_MARKER_TOPIC,
    broker_wait_seconds: float = DEFAULT_BROKER_WAIT_SECONDS,
) -> ProcessorMetaSupplier:
    """A sink producing `(key_fn(item), value_fn(item))` to `topic` (Jet's
    `KafkaProcessors.writeKafkaP`). With the exactly-once guarantee and `exactly_once`, each
    snapshot's records are one Kafka transaction per processor, committed with the snapshot;
    otherwise an idempotent producer, at-least-once. Keys and values go through the
    serializers (default: bytes, str as UTF-8, None). `properties['transactional.id']`, if
    given, prefixes the transactional ids (one job at a time may use a prefix).
    """
    what = "write_kafka_p"
    properties = check_properties(properties, what)
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"{what}: topic must be a topic name, got {topic!r}")
    for name, fn in (("key_fn", key_fn), ("value_fn", value_fn)):
        if not callable(fn):
            raise TypeError(f"{what}: {name} must be callable, got {type(fn).__name__}")
    prefix = properties.pop("transactional.id", None) or f"jetspark-{secrets.token_hex(6)}"
    settings = SinkSettings(
        properties,
        topic,
        key_fn,
        value_fn,
        exactly_once,
        key_serializer,
        value_serializer,
        marker_topic,
        prefix,
    )

    def check(vertex: str) -> None:
        wait_for_metadata(properties, (topic,), vertex, broker_wait_seconds)
        if exactly_once:
            ensure_marker_topic(properties, marker_topic, vertex)

    return _KafkaMetaSupplier(lambda: WriteKafkaP(settings), check)
