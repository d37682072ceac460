"""The Kafka client's side of jetspark's Kafka source and sink: the properties a user gives,
the brokers and topics checked at submit, the marker topic of the exactly-once sink."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger("jetspark.kafka")

Properties = dict[str, Any]
"""confluent-kafka's (librdkafka's) client settings; `bootstrap.servers` is required."""


class KafkaSettingError(ValueError):
    """A Kafka source or sink is misconfigured; the message names the vertex and the setting."""


def check_properties(properties: Any, what: str) -> Properties:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        raise ImportError(
            f"{what} needs the Kafka client confluent-kafka: pip install 'jetspark[kafka]'"
        ) from None
    if not isinstance(properties, dict):
        raise TypeError(f"{what}: properties must be a dict of Kafka client settings")
    if not properties.get("bootstrap.servers"):
        raise KafkaSettingError(
            f"{what}: the properties lack 'bootstrap.servers' (the brokers to connect to, "
            "such as {'bootstrap.servers': 'localhost:9092'})"
        )
    return dict(properties)


_CONSUMER_ONLY = (
    "group.",
    "auto.offset.reset",
    "auto.commit.",
    "enable.auto.",
    "enable.partition.eof",
    "isolation.level",
    "fetch.",
    "max.poll.interval.ms",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "queued.",
    "check.crcs",
    "allow.auto.create.topics",
    "consume.callback.max.messages",
)
_PRODUCER_ONLY = (
    "transactional.id",
    "transaction.timeout.ms",
    "enable.idempotence",
    "enable.gapless.guarantee",
    "acks",
    "request.required.acks",
    "linger.ms",
    "queue.buffering.",
    "batch.",
    "compression.",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "retries",
    "message.send.max.retries",
    "partitioner",
    "sticky.partitioning.linger.ms",
)
"""Prefixes of librdkafka settings of one role only (its CONFIGURATION.md marks them C or P):
the client of the other role would warn about each, so each client gets its own."""


def client_settings(properties: Properties, role: str) -> Properties:
    """librdkafka's settings for a client of `role` ("consumer", "producer" or "admin"): the
    user's, without those of another role, with warnings going to the `jetspark.kafka` log."""
    dropped = {
        "consumer": _PRODUCER_ONLY,
        "producer": _CONSUMER_ONLY,
        "admin": _CONSUMER_ONLY + _PRODUCER_ONLY,
    }[role]
    settings = {k: v for k, v in properties.items() if not k.startswith(dropped)}
    settings["logger"] = log
    return settings


def wait_for_metadata(
    properties: Properties, topics: Sequence[str], vertex: str, wait_seconds: float
) -> dict[str, int]:
    """Each topic's partition count, asked of the brokers; waits up to `wait_seconds` for
    them to answer (logging it) and fails naming the vertex and `bootstrap.servers`.

    A missing topic is an error, unless `allow.auto.create.topics` is true in the
    properties: it is then created with the broker's default partition count."""
    from confluent_kafka.admin import NewTopic

    admin = admin_client(properties)
    servers = properties["bootstrap.servers"]
    started = time.monotonic()
    next_notice = started + 10
    while True:
        try:
            metadata = admin.list_topics(timeout=5)
            if metadata.brokers:
                break
        except Exception as error:  # the brokers did not answer in time
            last = error
        now = time.monotonic()
        if now - started >= wait_seconds:
            raise KafkaSettingError(
                f"vertex '{vertex}': no Kafka broker at bootstrap.servers={servers!r} answered "
                f"within {wait_seconds:.0f} s (broker_wait_seconds); last error: {last}"
            ) from None
        if now >= next_notice:
            log.warning(
                "vertex '%s': waiting for a Kafka broker at %s (%.0f of %.0f s)",
                vertex,
                servers,
                now - started,
                wait_seconds,
            )
            next_notice = now + 10
    counts: dict[str, int] = {}
    missing = [t for t in topics if t not in metadata.topics or metadata.topics[t].error]
    if missing and str(properties.get("allow.auto.create.topics", "")).lower() == "true":
        futures = admin.create_topics([NewTopic(t, num_partitions=-1) for t in missing])
        for future in futures.values():
            try:
                future.result(60)
            except Exception as error:
                if "TOPIC_ALREADY_EXISTS" not in str(error):
                    raise
        return wait_for_metadata(properties, topics, vertex, wait_seconds)
    if missing:
        raise KafkaSettingError(
            f"vertex '{vertex}': topic {missing[0]!r} does not exist on {servers} (create it, "
            "or set 'allow.auto.create.topics': 'true' to have it created)"
        )
    for topic in topics:
        counts[topic] = len(metadata.topics[topic].partitions)
    return counts


def admin_client(properties: Properties) -> Any:
    """An admin client on the user's settings (its warnings about consumer- or producer-only
    settings go to the `jetspark.kafka` logger)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_settings(properties, "admin"))


def ensure_marker_topic(properties: Properties, topic: str, vertex: str) -> None:
    """Creates the marker topic (one partition) unless it exists; fails naming the setting."""
    from confluent_kafka.admin import NewTopic

    admin = admin_client(properties)
    if topic in admin.list_topics(timeout=30).topics:
        return
    future = admin.create_topics([NewTopic(topic, num_partitions=1)])[topic]
    try:
        future.result(60)
    except Exception as error:
        if "TOPIC_ALREADY_EXISTS" in str(error):
            return
        raise KafkaSettingError(
            f"vertex '{vertex}': the exactly-once sink needs its marker topic {topic!r} "
            f"and could not create it ({error}); create it with one partition, or name another "
            "with marker_topic="
        ) from error


_PASSING = frozenset(
    {
        "NOT_LEADER_FOR_PARTITION",
        "LEADER_NOT_AVAILABLE",
        "NOT_COORDINATOR",
        "COORDINATOR_NOT_AVAILABLE",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "_TIMED_OUT",
        "_TRANSPORT",
        "_ALL_BROKERS_DOWN",
        "_UNKNOWN_PARTITION",
    }
)
"""Errors of a cluster that is moving (a partition just added, a broker just started or
restarted: the client knows no leader of a partition it read before until its metadata is
renewed). The partitions asked about come from the brokers' metadata, so an unknown one is one
the client has not yet relearned."""

PASSING_PATIENCE_SECONDS = 60.0
"""How long a metadata or offsets request is asked again while the cluster is moving."""


def asked_again(request: Callable[[], Any], what: str) -> Any:
    """`request()`, asked again while it fails with an error of a moving cluster (a new
    partition without a leader yet, a coordinator loading), for up to a minute."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + PASSING_PATIENCE_SECONDS
    while True:
        try:
            return request()
        except KafkaException as exception:
            error = exception.args[0]
            passing = error.retriable() or error.name() in _PASSING
            if not passing or time.monotonic() > deadline:
                raise RuntimeError(f"{what}: {error.str()}") from exception
            time.sleep(0.1)
