"""The Kafka sink processor: transactions per snapshot for exactly-once, an idempotent
producer otherwise (processors/kafka.py tells how a crash is survived)."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.config import ProcessingGuarantee
from jetspark.core.context import Context
from jetspark.core.inbox import Inbox
from jetspark.core.outbox import Outbox
from jetspark.processors.kafka_client import Properties, asked_again, client_settings, log
from jetspark.processors.snapshots import ProcessorState

_TRANSACTIONS = ProcessorState("kafka_transactions")
_FLUSH_SECONDS = 120.0
"""How long a flush may wait for the brokers to take the records produced."""

Serializer = Callable[[Any], bytes | None]


def default_serializer(value: Any) -> bytes | None:
    """bytes as they are, str as UTF-8, None as None (a null key or a tombstone)."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(
        f"a {type(value).__name__} is not bytes or str: give write_kafka_p a key_serializer or "
        "value_serializer (such as lambda v: json.dumps(v).encode())"
    )


@dataclass(frozen=True)
class SinkSettings:
    properties: Properties
    topic: str
    key_fn: Callable[[Any], Any]
    value_fn: Callable[[Any], Any]
    exactly_once: bool
    key_serializer: Serializer
    value_serializer: Serializer
    marker_topic: str
    transactional_id_prefix: str


@dataclass(frozen=True)
class _Prepared:
    """An epoch's transaction, flushed but maybe not committed: what a restore decides on."""

    transactional_id: str
    token: str
    marker_partition: int
    marker_offset: int
    records: tuple[tuple[bytes | None, bytes | None], ...]


class WriteKafkaP(AbstractProcessor):
    """Produces `(key_fn(item), value_fn(item))` records to one topic (module docstring)."""

    def __init__(self, settings: SinkSettings) -> None:
        self._settings = settings
        self._transactional = False
        self._producers: list[Any] = []
        self._ids: list[str] = []
        self._current = 0
        self._in_transaction = False
        self._epoch: list[tuple[bytes | None, bytes | None]] = []
        self._prepared: _Prepared | None = None
        self._adopted: list[Any] = []
        """Saved states of old processors this one took over in a restore."""
        self._delivery_error: Any = None
        self._fatal: Any = None
        """The client's fatal error (fenced, say), from its error callback: what explains
        the delivery errors (records purged) that come with it."""
        self._defer = False
        self._markers: Any = None
        self._lineage = "start"
        """The token of the last epoch this processor restored: names its last batch's."""
        self._scan_from = 0
        """Where in the marker partition a marker of this run's epochs can be (micro-batches)."""

    def is_cooperative(self) -> bool:
        return False  # blocking flushes and transaction commits

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        settings = self._settings
        self._transactional = (
            settings.exactly_once
            and context.processing_guarantee is ProcessingGuarantee.EXACTLY_ONCE
        )
        self._defer = self._transactional and getattr(context.stores, "driver_publishes", False)
        if self._transactional:
            base = f"{settings.transactional_id_prefix}-{context.vertex_name}"
            index = context.global_processor_index
            self._ids = [f"{base}-{index}-{k}" for k in (0, 1)]
            if not self._defer:
                self._producers = self._transactional_producers(self._ids)
        else:
            producer_settings = client_settings(settings.properties, "producer")
            producer_settings.setdefault("enable.idempotence", True)
            self._producers = [self._producer(producer_settings)]

    def _producer(self, producer_settings: Properties) -> Any:
        from confluent_kafka import Producer

        producer_settings.setdefault("linger.ms", 5)
        producer_settings["error_cb"] = self._on_client_error
        return Producer(producer_settings)

    def _on_client_error(self, error: Any) -> None:
        """librdkafka's errors of the client itself: a fatal one (fenced, say) ends the job."""
        if error.fatal() and self._fatal is None:
            self._fatal = error

    def _transactional_producers(self, transactional_ids: Sequence[str]) -> list[Any]:
        """A producer of each of `transactional_ids`, its earlier incarnations fenced off (an
        open transaction of theirs is aborted, a committing one completed). Their
        `init_transactions` run at once, each a round trip to its transaction coordinator
        that can wait for it: in turn, they delayed a job's first record by their sum."""
        producers = []
        for transactional_id in transactional_ids:
            producer_settings = client_settings(self._settings.properties, "producer")
            producer_settings["transactional.id"] = transactional_id
            producers.append(self._producer(producer_settings))

        def init(pair: tuple[Any, str]) -> None:
            producer, transactional_id = pair
            what = f"init_transactions({transactional_id})"
            self._call(producer.init_transactions, 60, what=what)

        if len(producers) == 1:
            init((producers[0], transactional_ids[0]))
        elif producers:
            with ThreadPoolExecutor(len(producers), "jetspark-kafka-init") as pool:
                list(pool.map(init, zip(producers, transactional_ids, strict=True)))
        return producers

    def _call(self, method: Callable[..., Any], *args: Any, what: str) -> Any:
        """Calls a transactional method, retrying what librdkafka calls retriable and naming
        the vertex and transactional id in every other failure."""
        from confluent_kafka import KafkaException

        for attempt in range(10):
            try:
                return method(*args)
            except KafkaException as exception:
                error = exception.args[0]
                if error.retriable() and attempt < 9:
                    time.sleep(min(2.0, 0.1 * 2**attempt))
                    continue
                raise self._client_failure(error, what) from exception
        raise AssertionError("unreachable")

    def _client_failure(self, error: Any, what: str) -> RuntimeError:
        """The error a job fails with when Kafka refused `what`: fenced, or the client's own."""
        if _fenced(error):
            return self._fenced_error(what)
        return RuntimeError(
            f"vertex '{self.context.vertex_name}': Kafka {what} failed: {error.str()}"
        )

    def _fenced_error(self, what: str) -> RuntimeError:
        ids = " or ".join(repr(i) for i in self._ids)
        return RuntimeError(
            f"vertex '{self.context.vertex_name}': {what} was fenced: another producer with "
            f"transactional id {ids} started (another job, or another run of this one); give "
            "each job its own prefix with the 'transactional.id' property"
        )

    def _on_delivery(self, error: Any, message: Any) -> None:
        if error is not None and self._delivery_error is None:
            self._delivery_error = (error, message.topic())

    def _check_delivery(self) -> None:
        failed = self._delivery_error
        if self._fatal is not None:
            failed = (self._fatal, self._settings.topic)
        if failed is not None:
            error, topic = failed
            if _fenced(error):
                raise self._fenced_error(f"a record for topic {topic!r}")
            raise RuntimeError(
                f"vertex '{self.context.vertex_name}': Kafka did not take a record for topic "
                f"{topic!r}: {error.str()}"
                + (
                    " (the broker's message.max.bytes / the topic's max.message.bytes, or the "
                    "client's 'message.max.bytes', bound a record's size)"
                    if "LARGE" in error.name()
                    else ""
                )
            )

    def process(self, ordinal: int, inbox: Inbox) -> None:
        with self._explained_failures():
            self._process(ordinal, inbox)

    def complete(self) -> bool:
        with self._explained_failures():
            return self._complete()

    def save_to_snapshot(self) -> bool:
        with self._explained_failures():
            return self._save_to_snapshot()

    def snapshot_committed(self) -> None:
        with self._explained_failures():
            self._snapshot_committed()

    def _reported_fatal(self) -> Any:
        """The fatal error the clients' error callbacks report, served for up to a second."""
        from confluent_kafka import KafkaException

        for _ in range(10):
            if self._fatal is not None:
                return self._fatal
            for producer in self._producers:
                try:
                    producer.poll(0.1)
                except KafkaException as exception:
                    return exception.args[0]
                except SystemError:
                    continue
        return self._fatal

    @contextlib.contextmanager
    def _explained_failures(self) -> Iterator[None]:
        """confluent-kafka 2.16 now and then raises SystemError from a call (flush, poll) on a
        client that met a fatal error (fenced, say): the error its callback reported is raised
        instead."""
        try:
            yield
        except SystemError as exception:
            fatal = _kafka_error_in(exception) or self._reported_fatal()
            if fatal is None:
                raise
            raise self._client_failure(fatal, "a call of the Kafka client") from exception

    def _process(self, ordinal: int, inbox: Inbox) -> None:
        settings = self._settings
        key_fn, value_fn = settings.key_fn, settings.value_fn
        key_serializer, value_serializer = settings.key_serializer, settings.value_serializer
        records = []
        while (item := inbox.poll()) is not None:
            try:
                records.append((key_serializer(key_fn(item)), value_serializer(value_fn(item))))
            except TypeError as error:
                raise TypeError(f"vertex '{self.context.vertex_name}': {error}") from error
        if self._transactional:
            self._epoch.extend(records)
            if self._defer:
                return
            self._begin()
        self._produce(self._producers[self._current], records)
        self._check_delivery()

    def _begin(self) -> None:
        if not self._in_transaction:
            self._call(self._producers[self._current].begin_transaction, what="begin_transaction")
            self._in_transaction = True

    def _produce(self, producer: Any, records: Sequence[tuple[Any, Any]]) -> None:
        topic = self._settings.topic
        for key, value in records:
            self._send(producer, topic, key, value, None, self._on_delivery)
        producer.poll(0)

    def _send(
        self,
        producer: Any,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        delivered: Callable[[Any, Any], None],
    ) -> None:
        """Produces one record, waiting while the client's queue is full; a refusal is
        raised naming the vertex (and why: fenced, too large, ...)."""
        from confluent_kafka import KafkaError, KafkaException

        where = {} if partition is None else {"partition": partition}
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=delivered, **where)
                return
            except BufferError:  # the client's queue is full: let it send
                producer.poll(0.05)
                continue
            except KafkaException as exception:
                refusal = exception
            break
        # outside the handler: serving the client's callbacks with an exception being handled
        # gave SystemError
        error = refusal.args[0]
        if error.code() == KafkaError._FATAL:
            error = self._fatal_error(producer, error)
        if _fenced(error):
            raise self._fenced_error(f"a record for topic {topic!r}") from refusal
        size = len(value or b"") + len(key or b"")
        hint = (
            " (the client's 'message.max.bytes' and the broker's limits bound a record's size)"
            if "LARGE" in error.name()
            else ""
        )
        raise ValueError(
            f"vertex '{self.context.vertex_name}': a record of {size} bytes for topic "
            f"{topic!r} was refused: {error.str()}{hint}"
        ) from refusal

    def _fatal_error(self, producer: Any, error: Any) -> Any:
        """Which fatal error a producer met: serving its callbacks reports (or raises) it."""
        from confluent_kafka import KafkaException

        try:
            producer.poll(0)
        except KafkaException as exception:
            return exception.args[0]
        except SystemError:  # confluent-kafka 2.16, now and then, once the client is fatal
            pass
        return self._fatal if self._fatal is not None else error

    def _flush(self, producer: Any) -> None:
        """Waits until every record produced is delivered; a failure (a fatal one, such as
        being fenced, included) is raised as soon as it is reported."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + _FLUSH_SECONDS
        while True:
            try:
                remaining = producer.flush(0.5)
            except KafkaException as exception:  # a fatal error of the client
                error = self._fatal if self._fatal is not None else exception.args[0]
                raise self._client_failure(error, "a flush") from exception
            if not remaining:
                break
            self._check_delivery()
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"vertex '{self.context.vertex_name}': {remaining} records were not "
                    f"delivered to topic {self._settings.topic!r} within {_FLUSH_SECONDS:.0f} s"
                )
        self._check_delivery()

    def _complete(self) -> bool:
        if not self._transactional:
            self._flush(self._producers[0])
        elif self._defer and self._epoch:
            self._publish_last_batch()
        return True

    def _publish_last_batch(self) -> None:
        """A micro-batch job's last batch has no next one to publish its records, so they are
        published here, under a token derived from the restored state: a task of this batch
        run again finds its marker and publishes nothing twice."""
        index = self.context.global_processor_index
        token = hashlib.sha256(f"{self._lineage}:{index}:last".encode()).hexdigest()[:32]
        records = tuple(self._epoch)
        last = _Prepared(self._ids[0], token, 0, self._scan_from, records)
        self._producers = self._transactional_producers(self._ids)
        try:
            if not self._in_kafka(last):
                self._republish([last])
        finally:
            self._close_producers()
        self._epoch = []

    def _save_to_snapshot(self) -> bool:
        if not self._transactional:
            self._flush(self._producers[0])
            return True
        if self._prepared is not None:
            raise AssertionError("a Kafka sink saved twice without a commit in between")
        prepared = self._prepare() if self._epoch else None
        state = (tuple(self._ids), prepared)
        if not self.try_emit_to_snapshot(*_TRANSACTIONS.entry(self.context, state)):
            raise AssertionError("the snapshot refused a Kafka sink's one entry")
        self._prepared = prepared
        self._epoch = []
        return True

    def _prepare(self) -> _Prepared:
        """Ends the epoch's transaction (flushed, with its marker), uncommitted; in a
        micro-batch only notes where its marker will have to be looked for."""
        transactional_id = self._ids[self._current]
        token = secrets.token_hex(16)
        records = tuple(self._epoch)
        if self._defer:
            return _Prepared(transactional_id, token, 0, self._marker_end(), records)
        producer = self._producers[self._current]
        self._begin()
        marker: dict[str, int] = {}

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                marker["partition"], marker["offset"] = message.partition(), message.offset()
            else:
                self._on_delivery(error, message)

        self._produce_marker(producer, transactional_id, token, None, delivered)
        self._flush(producer)
        self._in_transaction = False
        self._current = 1 - self._current
        return _Prepared(transactional_id, token, marker["partition"], marker["offset"], records)

    def _produce_marker(
        self,
        producer: Any,
        transactional_id: str,
        token: str,
        partition: int | None,
        delivered: Callable[[Any, Any], None],
    ) -> None:
        key, value = transactional_id.encode(), token.encode()
        self._send(producer, self._settings.marker_topic, key, value, partition, delivered)

    def _snapshot_committed(self) -> None:
        prepared = self._prepared
        self._prepared = None
        if prepared is None or self._defer:
            return
        producer = self._producers[self._ids.index(prepared.transactional_id)]
        self._call(producer.commit_transaction, 120, what="commit_transaction")

    # restore: decide each prepared transaction from the broker (module docstring)

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        saved = _TRANSACTIONS.saved(key, value)
        if ProcessorState.owns(self.context, saved):
            self._adopted.append(saved.value)
            prepared = saved.value[1]
            if ProcessorState.is_own(self.context, saved) and prepared is not None:
                self._lineage, self._scan_from = prepared.token, prepared.marker_offset

    def finish_snapshot_restore(self) -> bool:
        with self._explained_failures():
            return self._finish_snapshot_restore()

    def _finish_snapshot_restore(self) -> bool:
        if not self._transactional:
            return True
        if self._defer:
            self._producers = self._transactional_producers(self._ids)
        own = set(self._ids)
        undecided = [prepared for _, prepared in self._adopted if prepared is not None]
        others = [i for ids, _ in self._adopted for i in ids if i not in own]
        for fencing in self._transactional_producers(list(dict.fromkeys(others))):
            fencing.flush(0)  # an old processor's producers, fenced by the init
        self._adopted = []
        lost = [p for p in undecided if not self._in_kafka(p)]
        if lost:
            self._republish(lost)
        if self._defer:  # this batch's own epoch is published by the next batch
            self._close_producers()
        return True

    def _marker_consumer(self) -> Any:
        """A read_committed consumer of the marker topic (made once)."""
        if self._markers is None:
            from confluent_kafka import Consumer

            client = client_settings(self._settings.properties, "consumer")
            client.update(
                {
                    "group.id": f"jetspark-markers-{secrets.token_hex(4)}",
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                }
            )
            self._markers = Consumer(client)
        return self._markers

    def _marker_end(self) -> int:
        """The marker partition's end offset now: a marker produced later lies above it."""
        from confluent_kafka import TopicPartition

        partition = TopicPartition(self._settings.marker_topic, 0)
        consumer = self._marker_consumer()
        offsets = asked_again(
            lambda: consumer.get_watermark_offsets(partition, timeout=60),
            f"vertex '{self.context.vertex_name}': the end of marker topic "
            f"{self._settings.marker_topic!r}",
        )
        return offsets[1]  # type: ignore[no-any-return]

    def _in_kafka(self, prepared: _Prepared) -> bool:
        """True when a committed transaction holds `prepared`'s marker token: the marker
        partition read with read_committed from where that marker is (or would be) to its end."""
        from confluent_kafka import TopicPartition

        consumer = self._marker_consumer()
        topic = self._settings.marker_topic
        start = TopicPartition(topic, prepared.marker_partition, prepared.marker_offset)
        consumer.assign([start])
        key, token = prepared.transactional_id.encode(), prepared.token.encode()
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is None:
                    continue
                if message.error() is not None:
                    if message.error().code() == _partition_eof():
                        return False
                    continue
                if message.key() == key and message.value() == token:
                    return True
        finally:
            consumer.unassign()
        raise RuntimeError(
            f"vertex '{self.context.vertex_name}': could not read the marker topic {topic!r} "
            "to its end within 120 s (a transaction left open by a producer that is not "
            "fenced holds read_committed readers back until transaction.timeout.ms)"
        )

    def _republish(self, lost: list[_Prepared]) -> None:
        """Produces the records of epochs that never reached Kafka, each with its marker token,
        in one transaction committed at once (the snapshot that holds them is committed)."""
        producer = self._producers[self._current]
        self._call(producer.begin_transaction, what="begin_transaction")
        for prepared in lost:
            self._produce(producer, prepared.records)
            self._produce_marker(
                producer,
                prepared.transactional_id,
                prepared.token,
                prepared.marker_partition,
                self._on_delivery,
            )
        self._flush(producer)
        self._call(producer.commit_transaction, 120, what="commit_transaction")
        log.info(
            "vertex '%s' processor %d: wrote again %d records of %d epochs whose transaction "
            "a failure left uncommitted",
            self.context.vertex_name,
            self.context.global_processor_index,
            sum(len(p.records) for p in lost),
            len(lost),
        )

    def _close_producers(self) -> None:
        for producer in self._producers:
            # closing after a failure: the job's error is what matters
            with contextlib.suppress(Exception):
                producer.flush(10)
        self._producers = []

    def close(self) -> None:
        self._close_producers()
        if self._markers is not None:
            self._markers.close()
            self._markers = None


def _kafka_error_in(exception: BaseException) -> Any:
    """The KafkaError among the causes of `exception` (the one a SystemError hides), if any."""
    from confluent_kafka import KafkaException

    seen: BaseException | None = exception
    while seen is not None:
        if isinstance(seen, KafkaException):
            return seen.args[0]
        seen = seen.__cause__ or seen.__context__
    return None


def _fenced(error: Any) -> bool:
    """True for the error of a producer whose transactional id another producer took over."""
    from confluent_kafka import KafkaError

    fenced = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    return error.code() in fenced or "fenced" in error.str().lower()


def _partition_eof() -> int:
    from confluent_kafka import KafkaError

    return KafkaError._PARTITION_EOF
