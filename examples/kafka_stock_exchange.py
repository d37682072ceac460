"""The stock-exchange job between two Kafka topics, exactly-once (docs/kafka.md).

    kafka-trades (stream_kafka_p: a watermark per partition, in the source)
        -> drop-heartbeats (filter_p)
        -> sliding-stage-1 (accumulate_by_frame_p, over a local partitioned edge)
        -> sliding-stage-2 (combine_to_sliding_window_p, over a distributed partitioned edge)
        -> kafka-windows (write_kafka_p: a Kafka transaction per processor and snapshot)

Trades are JSON records (`{"ticker": "JET", "price": 101, "quantity": 7, "time": <epoch ms>}`)
keyed by ticker in a topic of several partitions; the job counts them per ticker in one-second
windows sliding by 100 ms, in event time (a trade's "time", up to 250 ms out of order; the
watermarks lag 300 ms behind), and writes each window as a JSON record (`{"ticker": ...,
"start": ..., "end": ..., "count": ...}`, keyed by ticker) to a second topic, exactly once.

The run is bounded. The example creates both topics (names with a random suffix, so runs never
mix), produces TRADES generated trades and then one *heartbeat* per partition, a record whose
time lies past the trades' last window: each partition's watermark passes every window of the
trades, and the heartbeats themselves are dropped before the windows. It starts the job on
LocalEngine (`--spark` or `--engine spark`: on SparkEngine, `local[*]` or `--master URL`),
reads the results back with a `read_committed` consumer, cancels the job once every expected
window is there, checks them against a plain Python count and prints a summary.

    python examples/kafka_stock_exchange.py [--bootstrap-servers HOST:PORT] [--spark]
        [--members N] [--trades COUNT] [--partitions P] [--keep-topics]

Without `--bootstrap-servers` it starts a broker of its own in a temporary directory
(bench/kafka_broker.py of a clone of the repository: Apache Kafka in KRaft mode on 127.0.0.1,
Java 17+, its jars fetched once with `python -m bench.kafka_broker fetch`, which needs `mvn`),
and stops it and removes the directory at the end. With `--bootstrap-servers` it uses that
broker and deletes the two topics it created at the end (unless `--keep-topics`); the sink's
marker topic `jetspark-transaction-markers` stays. Needs `pip install 'jetspark[kafka]'`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import secrets
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

from jetspark.core import DAG, Job, JobCancelledError, JobConfig, ProcessingGuarantee
from jetspark.core.cli import EngineSession, add_engine_arguments
from jetspark.edges import between
from jetspark.processors import (
    accumulate_by_frame_p,
    combine_to_sliding_window_p,
    entry_key,
    filter_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.kafka import (
    EventTimePolicy,
    KafkaRecord,
    stream_kafka_p,
    write_kafka_p,
)
from jetspark.processors.windowing import (
    KeyedWindowResult,
    TimestampKind,
    emit_by_frame,
    limiting_lag,
    sliding_window_policy,
)

TICKERS = ("AAPL", "GOOG", "HZC", "JET", "SPRK")
START_MILLIS = 1_500_000_000_000
"""Epoch milliseconds of the first trade."""
TRADE_SPACING_MILLIS = 5
MAX_DISORDER_MILLIS = 250
"""A trade's time is up to this much earlier than its place in the topic says."""
WINDOW_SIZE_MILLIS = 1_000
SLIDE_BY_MILLIS = 100
LAG_MILLIS = 300
TRADES = 3_000
"""Trades of a run by default: 15 s of trading."""
PARTITIONS = 3
"""Partitions of the trades topic by default (the windows topic has 2)."""
SNAPSHOT_INTERVAL_MILLIS = 500
"""How often the job takes a snapshot: each commits the sink's Kafka transactions."""
PATIENCE_SECONDS = 300.0
"""How long the run waits for the expected windows before it fails (a bound on failures, not
a measure of speed: a run on a 2-core machine takes seconds)."""

WINDOWS = sliding_window_policy(WINDOW_SIZE_MILLIS, SLIDE_BY_MILLIS)


class WindowCount(NamedTuple):
    """A window result as the job writes it: the window's end (epoch ms), the ticker, the
    number of trades."""

    end: int
    ticker: str
    trades: int


# --- the trades ---------------------------------------------------------------------------------


def trades(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """`count` trades, the same for the same seed: about one every 5 ms of event time, each up
    to 250 ms earlier than that."""
    rng = random.Random(seed)
    return [
        {
            "ticker": rng.choice(TICKERS),
            "price": rng.randint(90, 110),
            "quantity": rng.randint(1, 100),
            "time": START_MILLIS + n * TRADE_SPACING_MILLIS - rng.randrange(MAX_DISORDER_MILLIS),
        }
        for n in range(count)
    ]


def heartbeat_time(count: int) -> int:
    """The time of the heartbeats after `count` trades: once a partition's watermark (a lag
    behind it) passes, every window of the trades can close."""
    last_end = START_MILLIS + count * TRADE_SPACING_MILLIS + WINDOW_SIZE_MILLIS
    return last_end + LAG_MILLIS + SLIDE_BY_MILLIS


def expected_windows(items: Sequence[dict[str, Any]]) -> list[WindowCount]:
    """Plain Python: the trade count of every (window end, ticker) a trade falls into."""
    counts: Counter[tuple[int, str]] = Counter()
    for t in items:
        first_end = t["time"] - t["time"] % SLIDE_BY_MILLIS + SLIDE_BY_MILLIS
        for end in range(first_end, first_end + WINDOW_SIZE_MILLIS, SLIDE_BY_MILLIS):
            counts[end, t["ticker"]] += 1
    return sorted(WindowCount(end, ticker, n) for (end, ticker), n in counts.items())


# --- the job -------------------------------------------------------------------------------------


def trade_of(record: KafkaRecord) -> dict[str, Any]:
    """The projection: a record's value, already decoded by the value deserializer."""
    return record.value


def trade_time(t: dict[str, Any]) -> int:
    return t["time"]


def trade_ticker(t: dict[str, Any]) -> str:
    return t["ticker"]


def is_trade(t: dict[str, Any]) -> bool:
    return "ticker" in t


def window_key(result: KeyedWindowResult) -> str:
    return result.key


def window_json(result: KeyedWindowResult) -> bytes:
    record = {"ticker": result.key, "start": result.start, "end": result.end}
    return json.dumps({**record, "count": result.value}).encode()


def build_dag(kafka: dict[str, Any], trades_topic: str, windows_topic: str) -> DAG:
    """The stock-exchange DAG from `trades_topic` to `windows_topic` on the brokers `kafka`
    (librdkafka's properties)."""
    event_time = EventTimePolicy(trade_time, limiting_lag(LAG_MILLIS), emit_by_frame(WINDOWS))
    dag = DAG("kafka-stock-exchange")
    source = dag.new_vertex(
        "kafka-trades",
        stream_kafka_p(
            kafka,
            trades_topic,
            projection_fn=trade_of,
            event_time_policy=event_time,
            value_deserializer=json.loads,
        ),
    )
    drop_heartbeats = dag.new_vertex("drop-heartbeats", filter_p(is_trade))
    stage_1 = dag.new_vertex(
        "sliding-stage-1",
        accumulate_by_frame_p(trade_ticker, trade_time, TimestampKind.EVENT, WINDOWS, counting()),
    )
    stage_2 = dag.new_vertex("sliding-stage-2", combine_to_sliding_window_p(WINDOWS, counting()))
    sink = dag.new_vertex(
        "kafka-windows", write_kafka_p(kafka, windows_topic, window_key, window_json)
    )
    dag.edge(between(source, drop_heartbeats))
    dag.edge(between(drop_heartbeats, stage_1).partitioned(trade_ticker))
    dag.edge(between(stage_1, stage_2).distributed().partitioned(entry_key))
    dag.edge(between(stage_2, sink))
    return dag


# --- the broker, the topics, the records --------------------------------------------------------


@contextlib.contextmanager
def own_broker() -> Iterator[str]:
    """A Kafka broker of this run's own in a temporary directory; yields its address, then stops
    it and removes the directory."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/ of the clone
    from bench.kafka_broker import KafkaBroker  # type: ignore[import-not-found]  # the clone's

    directory = Path(tempfile.mkdtemp(prefix="kafka-stock-exchange-"))
    broker = KafkaBroker(directory)
    try:
        print(f"starting a Kafka broker in {directory} ...", flush=True)
        broker.start()
        print(f"Kafka on {broker.bootstrap_servers}", flush=True)
        yield broker.bootstrap_servers
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def topics(servers: str, partitions: int, keep: bool) -> Iterator[tuple[str, str]]:
    """Creates the trades and windows topics (fresh names); deletes them at the end unless
    `keep`."""
    from confluent_kafka.admin import AdminClient, NewTopic

    suffix = secrets.token_hex(4)
    names = (f"trades-{suffix}", f"trade-windows-{suffix}")
    admin = AdminClient({"bootstrap.servers": servers})
    created = admin.create_topics(
        [NewTopic(names[0], num_partitions=partitions), NewTopic(names[1], num_partitions=2)]
    )
    for future in created.values():
        future.result(60)
    try:
        yield names
    finally:
        if not keep:
            for future in admin.delete_topics(list(names)).values():
                with contextlib.suppress(Exception):  # the run's own error matters more
                    future.result(60)


def produce_trades(servers: str, topic: str, items: Sequence[dict[str, Any]]) -> None:
    """The trades keyed by ticker (so a ticker's trades stay in one partition, in order), then,
    once they are all in, a heartbeat in every partition: each partition's last record.

    The producer is idempotent: one that is not retries a failed batch (a partition's leader not
    known yet, just after the topic's creation) behind the batches sent after it, and a trade
    that lands behind later ones is late for the windows."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, "enable.idempotence": True})
    for t in items:
        producer.produce(topic, json.dumps(t).encode(), t["ticker"].encode())
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError(f"the trades did not all reach {topic} within 60 s")
    partitions = producer.list_topics(topic, timeout=30).topics[topic].partitions
    beat = json.dumps({"time": heartbeat_time(len(items))}).encode()
    for partition in partitions:
        producer.produce(topic, beat, partition=partition)
    if producer.flush(60):
        raise RuntimeError(f"the heartbeats did not all reach {topic} within 60 s")


def read_windows(servers: str, topic: str, wanted: int, job: Job) -> list[WindowCount]:
    """The committed window results of `topic` (read_committed: no record of an open or
    aborted transaction), read until there are `wanted` of them. Raises the job's error if it
    ends first."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"kafka-stock-exchange-reader-{secrets.token_hex(4)}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        windows: list[WindowCount] = []
        deadline = time.monotonic() + PATIENCE_SECONDS
        while len(windows) < wanted:
            if job.status.is_terminal:
                job.join()  # raises its error
                raise RuntimeError("the job ended before its windows were all written")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{topic} holds {len(windows)} of {wanted} windows after "
                    f"{PATIENCE_SECONDS:.0f} s"
                )
            for message in consumer.consume(1000, 0.2):
                payload = message.value()
                if message.error() is None and payload is not None:
                    value = json.loads(payload)
                    windows.append(WindowCount(value["end"], value["ticker"], value["count"]))
        return sorted(windows)
    finally:
        consumer.close()


def format_window(w: WindowCount) -> str:
    end = datetime.fromtimestamp(w.end / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    return f"{end[:-3]} {w.ticker:>5} {w.trades:4d}"


# --- the run -------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT",
        help="the Kafka brokers to use (default: start one in a temporary directory)",
    )
    parser.add_argument(
        "--spark",
        dest="engine",
        action="store_const",
        const="spark",
        help="run on SparkEngine (the same as --engine spark)",
    )
    add_engine_arguments(parser, default_engine="local", members=2)
    parser.add_argument("--trades", type=int, default=TRADES, metavar="COUNT")
    parser.add_argument("--partitions", type=int, default=PARTITIONS, metavar="P")
    parser.add_argument(
        "--keep-topics", action="store_true", help="keep the topics on --bootstrap-servers"
    )
    return parser


def main(argv: Sequence[str] | None = None, spark: Any = None) -> list[WindowCount]:
    """Runs the example; returns the window results read back from Kafka."""
    args = _parser().parse_args(argv)
    if args.trades < 1 or args.partitions < 1:
        raise SystemExit("--trades and --partitions must be at least 1")
    with contextlib.ExitStack() as stack:
        servers = args.bootstrap_servers or stack.enter_context(own_broker())
        return run(args, servers, stack, spark)
    raise AssertionError("unreachable")


def run(
    args: argparse.Namespace, servers: str, stack: contextlib.ExitStack, spark: Any
) -> list[WindowCount]:
    trades_topic, windows_topic = stack.enter_context(
        topics(servers, args.partitions, args.keep_topics or not args.bootstrap_servers)
    )
    items = trades(args.trades)
    produce_trades(servers, trades_topic, items)
    expected = expected_windows(items)
    print(
        f"{len(items):,} trades and a heartbeat per partition in {trades_topic} "
        f"({args.partitions} partitions); {len(expected):,} windows expected in {windows_topic}",
        flush=True,
    )
    kafka = {"bootstrap.servers": servers, "auto.offset.reset": "earliest"}
    config = JobConfig(
        name="kafka-stock-exchange",
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=SNAPSHOT_INTERVAL_MILLIS,
    )
    session = stack.enter_context(EngineSession.of(args, spark))
    job = session.engine.new_job(build_dag(kafka, trades_topic, windows_topic), config)
    try:
        windows = read_windows(servers, windows_topic, len(expected), job)
    finally:
        job.cancel()
        with contextlib.suppress(JobCancelledError):
            job.join()
    ended = "exactly-once, cancelled once its windows were in"
    print(f"kafka-stock-exchange: {session.ran(job)}, {ended}")
    for w in windows[:5]:
        print(f"  {format_window(w)}")
    print(f"  ... {len(windows):,} windows read with read_committed from {windows_topic}")
    duplicates = sum(n - 1 for n in Counter((w.end, w.ticker) for w in windows).values())
    if windows != expected:
        raise SystemExit(
            f"the windows differ from a plain Python count ({duplicates} written twice): "
            f"{sorted(set(windows) ^ set(expected))[:10]}"
        )
    print("  none twice, none missing: they match a plain Python count")
    return windows


if __name__ == "__main__":
    main()
