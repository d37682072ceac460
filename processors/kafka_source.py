"""The Kafka source processor: one consumer per processor (processors/kafka.py tells how
partitions, offsets, watermarks and micro-batches work)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import mmh3

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.config import ProcessingGuarantee
from jetspark.core.context import Context
from jetspark.core.outbox import Outbox
from jetspark.core.snapshot_keys import BroadcastKey, broadcast_key
from jetspark.processors.event_time import EventTimeMapper, EventTimePolicy
from jetspark.processors.kafka_client import (
    KafkaSettingError,
    Properties,
    asked_again,
    client_settings,
    log,
)
from jetspark.processors.watermark_policies import MIN_TIMESTAMP, monotonic_ms

_OFFSET_KEY = "kafka_offset"
_POLL_BATCH = 1024
"""Records a source takes from its consumer per call."""
_BATCH_PATIENCE_SECONDS = 300.0
"""How long a micro-batch's source waits for the records below its limits before failing."""
_COMMIT_INTERVAL_MS = 5_000
"""Without a guarantee, how often a source commits its offsets to Kafka."""
FETCH_QUEUE_BACKOFF_MS = 10
"""The consumer's `fetch.queue.backoff.ms` unless the properties give one: librdkafka's 1 s
default postpones a partition's next fetch once its local queue is full, and a source that
empties the queue faster than that waits (docs/kafka.md: 4.6x the records per second)."""
_CHECK_TIMEOUT_SECONDS = 1.0
"""How long a periodic partition check waits for the brokers' answer (the loop waits too)."""

Deserializer = Callable[[bytes], Any]


class KafkaRecord(NamedTuple):
    """A consumed record, as `projection_fn` receives it (Kafka's `ConsumerRecord`; a named
    tuple: made for every record, it costs a third of a frozen dataclass)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    """Milliseconds since the epoch: the producer's create time or the broker's log time."""
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes], ...]


_new_record = tuple.__new__
"""Builds a KafkaRecord from its fields' tuple without the named tuple's Python __new__."""


def owner_of(topic: str, partition: int, total_parallelism: int) -> int:
    """The global index of the source processor that reads `partition` of `topic`."""
    return ((mmh3.hash(topic, signed=False)) + partition) % total_parallelism


def default_projection(record: KafkaRecord) -> Any:
    return (record.key, record.value)


class StreamKafkaP(AbstractProcessor):
    """One consumer reading its share of the topics' partitions (see the module docstring)."""

    def __init__(self, settings: SourceSettings) -> None:
        self._settings = settings
        self._consumer: Any = None
        self._owned: list[tuple[str, int]] = []
        """(topic, partition) this processor reads, in the order found: its index in the
        event-time mapper."""
        self._index_of: dict[tuple[str, int], int] = {}
        self._next: dict[tuple[str, int], int] = {}
        """Next offset to emit of each owned partition (after the last emitted record)."""
        self._limits: dict[tuple[str, int], int] = {}
        """In a micro-batch: the end offset each partition is read to in this batch."""
        self._known: dict[str, int] = {}
        """Partition count of each topic when last checked."""
        self._pending: deque[tuple[Any, tuple[str, int] | None, int]] = deque()
        """Consumed but not yet emitted: (item or watermark, its partition or None, next
        offset after it)."""
        self._mapper: EventTimeMapper | None = None
        self._restored: dict[tuple[str, int], tuple[int, int]] = {}
        self._restored_limits: dict[tuple[str, int], int] = {}
        self._checked_at = 0
        self._started = False
        self._group = ""
        """True once the partitions of the job's start were assigned (restored or not)."""
        self._committed_at = 0
        self._batch = False
        self._guarantee = ProcessingGuarantee.NONE

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        from confluent_kafka import Consumer

        settings = self._settings
        self._guarantee = context.processing_guarantee
        self._batch = getattr(context.stores, "driver_publishes", False)
        client = client_settings(settings.properties, "consumer")
        client.setdefault("group.id", f"jetspark-{context.vertex_name}")
        self._group = client["group.id"]
        client["enable.auto.commit"] = False
        client["enable.auto.offset.store"] = False
        client.setdefault("enable.partition.eof", False)
        client.setdefault("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS)
        self._consumer = Consumer(client)
        if settings.event_time_policy is not None:
            self._mapper = EventTimeMapper(settings.event_time_policy)
        self._checked_at = self._committed_at = monotonic_ms()
        metadata = self._consumer.list_topics(timeout=30)
        self._find_partitions(self._partition_counts(metadata, strict=True))

    def _partition_counts(self, metadata: Any, strict: bool) -> dict[str, int]:
        """Each topic's partition count in `metadata`; a topic it lacks fails the job when
        `strict` (at the start), or is left for the next check otherwise (a broker restarting)."""
        counts = {}
        for topic in self._settings.topics:
            described = metadata.topics.get(topic)
            if described is not None and described.error is None:
                counts[topic] = len(described.partitions)
            elif strict:
                raise KafkaSettingError(
                    f"vertex '{self.context.vertex_name}': topic {topic!r} is not on "
                    f"{self._settings.properties['bootstrap.servers']} "
                    f"({described.error if described is not None else 'unknown topic'})"
                )
        return counts

    def _check_partitions(self) -> None:
        """The periodic look for new partitions: a short question, and a cluster that does not
        answer it now (a broker restarting) is asked again at the next check."""
        from confluent_kafka import KafkaException

        try:
            metadata = self._consumer.list_topics(timeout=_CHECK_TIMEOUT_SECONDS)
        except KafkaException as error:
            log.debug("vertex '%s': partition check skipped (%s)", self.context.vertex_name, error)
            return
        self._find_partitions(self._partition_counts(metadata, strict=False))

    def _find_partitions(self, counts: dict[str, int]) -> None:
        """Takes the partitions of `counts` this processor owns that it does not read yet.

        Those of the job's start wait for `_start_reading` (a restore, or the first
        `complete()`, decides where they start); one found later is read from its start."""
        total = self.context.total_parallelism
        index = self.context.global_processor_index
        added = []
        for topic, count in counts.items():
            for partition in range(self._known.get(topic, 0), count):
                if owner_of(topic, partition, total) == index:
                    added.append((topic, partition))
            self._known[topic] = max(count, self._known.get(topic, 0))
        if not added:
            return
        for tp in added:
            self._index_of[tp] = len(self._owned)
            self._owned.append(tp)
        if self._mapper is not None:
            self._mapper.add_partitions(len(added))
        if self._started:
            log.info(
                "vertex '%s' processor %d: reading new partitions %s from their start",
                self.context.vertex_name,
                self.context.global_processor_index,
                added,
            )
            self._assign(dict(zip(added, self._start_offsets(added, False), strict=True)))

    def _assign(self, offsets: dict[tuple[str, int], int]) -> None:
        """Reads each partition of `offsets` from its offset on."""
        from confluent_kafka import TopicPartition

        self._next.update(offsets)
        self._consumer.incremental_assign([TopicPartition(*tp, o) for tp, o in offsets.items()])

    def _start_reading(self) -> None:
        """A job's start without a snapshot: where the group's offsets or the reset policy say."""
        self._started = True
        owned = self._owned
        self._assign(dict(zip(owned, self._start_offsets(owned, True), strict=True)))

    def _start_offsets(self, partitions: list[tuple[str, int]], initial: bool) -> list[int]:
        """Where reading each partition starts: a partition found while the job runs at its
        start (Jet's rule); one there at the start at the offset the `group.id` committed,
        else where `auto.offset.reset` says (librdkafka's default: the end)."""
        from confluent_kafka import TopicPartition

        if not partitions:
            return []
        committed = [-1] * len(partitions)
        if initial:
            committed = self._committed([TopicPartition(*tp) for tp in partitions])
        reset = str(self._settings.properties.get("auto.offset.reset", "latest")).lower()
        from_start = not initial or reset in ("earliest", "smallest", "beginning")
        offsets = []
        for tp, stored in zip(partitions, committed, strict=True):
            if stored >= 0:
                offsets.append(stored)
                continue
            low, high = self._end_offsets(tp)
            offsets.append(low if from_start else high)
        return offsets

    def _end_offsets(self, tp: tuple[str, int]) -> tuple[int, int]:
        """A partition's first offset and its end (the last stable offset, read_committed)."""
        from confluent_kafka import TopicPartition

        return asked_again(  # type: ignore[no-any-return]
            lambda: self._consumer.get_watermark_offsets(TopicPartition(*tp), timeout=10),
            f"vertex '{self.context.vertex_name}': the offsets of {tp[0]!r} partition {tp[1]}",
        )

    def _committed(self, partitions: list[Any]) -> list[int]:
        """The offsets the `group.id` committed for `partitions` (negative: none)."""
        committed = asked_again(
            lambda: self._consumer.committed(partitions, timeout=10),
            f"vertex '{self.context.vertex_name}': the offsets of group {self._group!r}",
        )
        return [tp.offset for tp in committed]

    def complete(self) -> bool:
        if not self._started:
            self._start_reading()
        if self._pending and not self._flush():
            return False
        now = monotonic_ms()
        if now - self._checked_at >= self._settings.partition_check_interval_ms:
            self._checked_at = now
            self._check_partitions()
        if self._guarantee is ProcessingGuarantee.NONE:
            self._commit_offsets(now)
        if self._batch:
            return self._complete_batch()
        messages = self._consumer.consume(_POLL_BATCH, 0)
        if messages:
            self._take(messages)
        else:
            self._tick()
        self._flush()
        return False

    def _tick(self) -> None:
        """Nothing new: the event-time mapper may advance or mark partitions idle."""
        if self._mapper is not None:
            tick = self._mapper.on_tick()
            if tick is not None:
                self._pending.append((tick, None, 0))

    def _complete_batch(self) -> bool:
        """In a micro-batch: emits the records below the batch's limits, waiting for them
        rather than returning with nothing emitted (which ends the batch's input) until every
        partition is read to its limit."""
        consumer = self._consumer
        waited_since = time.monotonic()
        wait = 0.0  # blocks only while records below the limits are still to come
        while True:
            messages = consumer.consume(_POLL_BATCH, wait)
            wait = 0.05
            if messages:
                self._take(messages)
            if self._pending:
                self._flush()
                return False
            if self._read_to_limits():
                self._tick()
                self._flush()
                return False
            if time.monotonic() - waited_since > _BATCH_PATIENCE_SECONDS:
                raise RuntimeError(
                    f"vertex '{self.context.vertex_name}': the records below this batch's "
                    f"end offsets did not come within {_BATCH_PATIENCE_SECONDS:.0f} s "
                    f"(partitions and end offsets: {self._limits})"
                )

    def _read_to_limits(self) -> bool:
        """True when every owned partition was read up to its limit for this batch."""
        from confluent_kafka import TopicPartition

        limits, next_offsets = self._limits, self._next
        short = [tp for tp in self._owned if next_offsets[tp] < limits.get(tp, 0)]
        if not short:
            return True
        # past the limit there may be only a transaction's control record, which the
        # consumer's position steps over but no record shows
        positions = self._consumer.position([TopicPartition(*tp) for tp in short])
        return all(p.offset >= limits[(p.topic, p.partition)] for p in positions)

    def _take(self, messages: list[Any]) -> None:
        """Turns consumed messages into pending items (and watermarks)."""
        pending = self._pending
        mapper = self._mapper
        limits = self._limits if self._batch else None
        if mapper is not None:  # one clock reading for the batch of messages
            now = mapper.now()
            policy = self._settings.event_time_policy
            timestamp_fn = policy.timestamp_fn if policy is not None else None
        for message in messages:
            error = message.error()
            if error is not None:
                self._consumer_error(error)
                continue
            tp = (message.topic(), message.partition())
            offset = message.offset()
            if limits is not None and offset >= limits.get(tp, 0):
                self._pause_at_limit(tp)
                continue
            item = self._project(message)
            if item is _SKIPPED:
                pending.append((_SKIPPED, tp, offset + 1))
                continue
            if mapper is not None:
                timestamp = (
                    timestamp_fn(item) if timestamp_fn is not None else message.timestamp()[1]
                )
                watermark = mapper.on_event(self._index_of[tp], timestamp, now)
                if watermark is not None:
                    pending.append((watermark, None, 0))
            pending.append((item, tp, offset + 1))

    def _project(self, message: Any) -> Any:
        settings = self._settings
        try:
            key, value = message.key(), message.value()
            if settings.key_deserializer is not None and key is not None:
                key = settings.key_deserializer(key)
            if settings.value_deserializer is not None and value is not None:
                value = settings.value_deserializer(value)
            fields = (
                message.topic(),
                message.partition(),
                message.offset(),
                message.timestamp()[1],
                key,
                value,
                tuple(message.headers() or ()),
            )
            return settings.projection_fn(_new_record(KafkaRecord, fields))
        except Exception as error:
            where = (
                f"vertex '{self.context.vertex_name}': the record at topic {message.topic()!r} "
                f"partition {message.partition()} offset {message.offset()} could not be read "
                f"({type(error).__name__}: {error})"
            )
            if settings.on_error == "skip":
                log.warning("%s; skipped (on_error='skip')", where)
                return _SKIPPED
            raise ValueError(f"{where}; on_error='skip' skips such records") from error

    def _consumer_error(self, error: Any) -> None:
        from confluent_kafka import KafkaError

        if error.code() == KafkaError._PARTITION_EOF:
            return
        if error.fatal() or error.code() in (
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
            KafkaError._UNKNOWN_TOPIC,
        ):
            raise RuntimeError(
                f"vertex '{self.context.vertex_name}': the Kafka consumer failed: {error.str()}"
            )
        # transient (a broker restarting, a leader moving): librdkafka retries by itself
        log.warning("vertex '%s': Kafka: %s", self.context.vertex_name, error.str())

    def _flush(self) -> bool:
        """Emits pending items in order; False when the outbox refused one."""
        pending = self._pending
        offer = self.outbox.offer
        next_offsets = self._next
        while pending:
            item, tp, after = pending[0]
            if item is not _SKIPPED and not offer(item):
                return False
            pending.popleft()
            if tp is not None:
                next_offsets[tp] = after
        return True

    def _pause_at_limit(self, tp: tuple[str, int]) -> None:
        from confluent_kafka import TopicPartition

        self._consumer.pause([TopicPartition(*tp)])

    def _commit_offsets(self, now: int) -> None:
        """Without a guarantee: commits what was emitted to the `group.id`, now and then."""
        if now - self._committed_at >= _COMMIT_INTERVAL_MS and self._next:
            self._committed_at = now
            self._consumer.commit(offsets=self._emitted_offsets(), asynchronous=True)

    def _emitted_offsets(self) -> list[Any]:
        from confluent_kafka import TopicPartition

        return [TopicPartition(t, p, offset) for (t, p), offset in self._next.items()]

    # snapshots: (next offset, watermark) per owned partition, under broadcast keys

    def save_to_snapshot(self) -> bool:
        if not self._started:
            self._start_reading()
        return self.emit_from_traverser_to_snapshot(self._snapshot_entries())

    def _snapshot_entries(self) -> list[tuple[BroadcastKey, Any]]:
        entries = []
        limits = self._next_batch_limits() if self._batch else {}
        for tp in self._owned:
            watermark = (
                self._mapper.watermark(self._index_of[tp])
                if self._mapper is not None
                else MIN_TIMESTAMP
            )
            entry = (self._next[tp], watermark, limits.get(tp))
            entries.append((broadcast_key((_OFFSET_KEY, *tp)), entry))
        return entries

    def _next_batch_limits(self) -> dict[tuple[str, int], int]:
        """The end offsets (last stable offsets under read_committed) the next batch reads to."""

        limits = {}
        for tp in self._owned:
            _, high = self._end_offsets(tp)
            limits[tp] = high
        return limits

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if not isinstance(key, BroadcastKey) or key.key[0] != _OFFSET_KEY:
            raise ValueError(f"unexpected snapshot entry {key!r}: expected a Kafka offset")
        _, topic, partition = key.key
        offset, watermark, limit = value
        self._restored[(topic, partition)] = (offset, watermark)
        if limit is not None:
            self._restored_limits[(topic, partition)] = limit

    def finish_snapshot_restore(self) -> bool:
        self._started = True
        owned = self._owned
        # a partition the snapshot lacks was added after it: read from its start
        added = [tp for tp in owned if tp not in self._restored]
        offsets = dict(zip(added, self._start_offsets(added, False), strict=True))
        for tp, (offset, watermark) in self._restored.items():
            if tp in self._index_of:
                offsets[tp] = offset
                if self._mapper is not None:
                    self._mapper.restore_watermark(self._index_of[tp], watermark)
        self._assign(offsets)
        if self._batch:
            self._limits = {tp: self._restored_limits.get(tp, 0) for tp in owned}
        self._restored, self._restored_limits = {}, {}
        return True

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        try:
            if self._guarantee is ProcessingGuarantee.NONE and self._next:
                consumer.commit(offsets=self._emitted_offsets(), asynchronous=False)
        finally:
            consumer.close()


_SKIPPED = object()
"""Stands for a record `on_error='skip'` dropped: it advances its partition's offset only."""


@dataclass(frozen=True)
class SourceSettings:
    properties: Properties
    topics: tuple[str, ...]
    projection_fn: Callable[[KafkaRecord], Any]
    event_time_policy: EventTimePolicy | None
    key_deserializer: Deserializer | None
    value_deserializer: Deserializer | None
    on_error: str
    partition_check_interval_ms: int
    broker_wait_seconds: float
