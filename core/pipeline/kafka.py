"""Kafka in the Pipeline API (manual §5.5): `KafkaSources.kafka` and `KafkaSinks.kafka`, Jet's
`KafkaSources`/`KafkaSinks` with Python names, over the Core processors of
`jetspark.processors.kafka`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jetspark.core.pipeline.connectors import Sink, StreamSource
from jetspark.processors.event_time import EventTimePolicy
from jetspark.processors.kafka import KafkaRecord, Properties, stream_kafka_p, write_kafka_p


class KafkaSources:
    """Kafka topics as pipeline sources."""

    @staticmethod
    def kafka(
        properties: Properties,
        *topics: str,
        projection_fn: Callable[[KafkaRecord], Any] | None = None,
        **options: Any,
    ) -> StreamSource:
        """The records of `topics`, unbounded (a StreamStage): `(key, value)` tuples, or
        `projection_fn(record)`. `add_timestamps` right after it goes into the source, which
        keeps a watermark per partition and marks quiet ones idle. `options` are those of
        `stream_kafka_p` (deserializers, `on_error`, ...)."""

        def with_event_time(policy: EventTimePolicy) -> Any:
            options["event_time_policy"] = policy
            return stream_kafka_p(properties, *topics, projection_fn=projection_fn, **options)

        supplier = stream_kafka_p(properties, *topics, projection_fn=projection_fn, **options)
        options = dict(options)
        name = f"kafkaSource({', '.join(topics)})"
        return StreamSource(name, supplier, with_event_time=with_event_time)


def _entry_key(entry: tuple[Any, Any]) -> Any:
    return entry[0]


def _entry_value(entry: tuple[Any, Any]) -> Any:
    return entry[1]


def _no_key(item: Any) -> None:
    return None


def _whole_item(item: Any) -> Any:
    return item


class KafkaSinks:
    """A Kafka topic as a pipeline sink."""

    @staticmethod
    def kafka(
        properties: Properties,
        topic: str,
        key_fn: Callable[[Any], Any] | None = None,
        value_fn: Callable[[Any], Any] | None = None,
        **options: Any,
    ) -> Sink:
        """Writes each item to `topic`: `(key, value)` entries as they are when neither
        function is given, else the record `(key_fn(item), value_fn(item))` (no key without
        `key_fn`, the item itself without `value_fn`). Exactly-once when the job is: one
        transaction per processor and snapshot. `options` are those of `write_kafka_p`."""
        if key_fn is None and value_fn is None:
            key_fn, value_fn = _entry_key, _entry_value
        supplier = write_kafka_p(
            properties, topic, key_fn or _no_key, value_fn or _whole_item, **options
        )
        return Sink(f"kafkaSink({topic})", supplier)
