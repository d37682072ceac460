"""The Kafka rows (issue 42): the stock-exchange job between two topics of a real broker.

Trades are records `ticker,price,timestamp` (ticker `T<n % 7>`, timestamp in epoch ms) in a
topic of PARTITIONS partitions, trade n in partition n % PARTITIONS. Each system counts them per
ticker in 1 s windows sliding by 100 ms, in event time (the trade's timestamp; watermarks
LAG_MILLIS behind it), and writes each window once as the record `ticker,start,count` to a
second topic:

- jetspark: `stream_kafka_p` (watermarks per partition, in the source) -> frame counts ->
  (distributed, by ticker) sliding windows -> `write_kafka_p`, on the run's SparkEngine,
  CONTINUOUS, 1 s snapshots into a DirectorySnapshotStore; exactly-once (a Kafka transaction
  per sink processor and snapshot), or at-least-once with an idempotent producer
  (`exactly_once=False`);
- Spark Structured Streaming: its Kafka source -> `groupBy(window(...), ticker).count()` with
  `withWatermark` of the same lag, append mode (each window once, when the watermark passes it)
  -> its Kafka sink (at-least-once: Spark has no transactional Kafka sink), micro-batches as
  fast as they go; the connector `spark-sql-kafka-0-10_2.13` resolved by `mvn` from
  `.ci/spark-kafka-connector.pom.xml` (the installed pyspark's version, or the newest release
  Maven Central has), in a child Python process with its own SparkSession (local[2]);
- Spark's Real-Time Mode (`trigger(realTime=...)`, update mode) on the same query, where Spark
  runs it; where it refuses, row 20b's note says why (pyspark 4.3 on local[2]: the query's
  pipelined stages need a slot per source partition and per shuffle partition at once, 6).

pyspark 4.3.0's connector is not on Maven Central; 4.1.1's fails on Spark 4.3 (a
NoSuchMethodError of HDFSMetadataLog's constructor); 4.2.0's runs: the row names the version.

Rows:

- 20a, throughput: a topic pre-filled with `trades` trades (plus one trade per partition far
  later, which closes every window and is in none), events per second from the job's submit
  (the query's start) until the last result record is visible to a read_committed consumer;
  jetspark exactly-once against Structured Streaming (goal: >= 2x).
- 20b, latency p99 at RATE trades/s: trades produced by this process at the rate, each one's
  timestamp its produce time (ms); a trade's latency is the moment its first window to close
  (the one ending at the next multiple of 100 ms after it) became visible to a read_committed
  consumer polling the sink topic in this process, less the moment `produce()` was called for
  the trade. Over the trades produced in the measured span (after WARM_UP_RATE until the first
  result came, then SETTLE_SECONDS at the rate). It holds, for every system alike, the wait
  for the window's end (up to 100 ms), the watermark's lag (LAG_MILLIS) and the next trade in
  every partition; exactly-once adds the wait for the snapshot that commits the transaction
  (up to LATENCY_SNAPSHOT_MILLIS: 100 ms snapshots here, where the throughput rows take 1 s
  ones). A fresh broker's transaction log is warmed first (WARM_TRANSACTIONAL_IDS). jetspark
  exactly-once against the fastest peer that delivered everything (goal: <= 1/10).
- 20c, the cost of exactly-once: jetspark at-least-once over jetspark exactly-once, throughput.

Before any figure the results are checked against the plain count (bench/plain_counts.py):
every window once, each count exact, none missing. A wrong or incomplete output gives no
figure: its round is left out, and the row says why.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.kafka_broker import copy_dependencies
from bench.plain_counts import SLIDE_MILLIS, WINDOW_MILLIS, window_counts, wrong_windows
from bench.report import Goal, Row
from bench.timing import Samples

TICKERS = 7
PARTITIONS = 4
"""Partitions of the trades topic (the results topic has 2)."""
START_MILLIS = 1_500_000_000_000
"""Event time of the pre-filled topic's first trade."""
TRADES_PER_MILLI = 200
"""Trades per ms of event time in the pre-filled topic (as the streaming rows' events)."""
LAG_MILLIS = 100
"""The watermark's lag behind the highest timestamp, in every system (Structured Streaming's
watermark is one for all partitions: a lag keeps a partition a little behind from being late)."""
SNAPSHOT_MILLIS = 1_000
"""jetspark's snapshot interval in the throughput rows (a result is visible at its commit)."""
LATENCY_SNAPSHOT_MILLIS = 100
"""jetspark's snapshot interval in the latency row: what a user who wants results early sets
(each sink processor then commits ten Kafka transactions a second)."""
WARM_TRANSACTIONAL_IDS = 16
"""Transactional ids initialised before the first round, so that every partition of a fresh
broker's transaction log is loaded (its first load made a producer's `init_transactions` wait
0.5-1 s, a cost of the broker's start that a running broker never shows)."""
RATE = 20_000
"""Trades per second of the latency row."""
WARM_UP_RATE = 1_000
"""Trades per second until the first result is visible."""
SETTLE_SECONDS = 1.0
TAIL_SECONDS = 1.5
"""Trades go on this long after the measured span, so that its windows close."""
PATIENCE_SECONDS = 300.0
"""The most a system may take to deliver its results (a failure bound, not a measure)."""
SPARK_KAFKA_FALLBACKS = ("4.2.0", "4.1.1")
"""The connector's versions to try, newest first, when the installed pyspark's is not on Maven
Central (pyspark 4.3.0's is not; 4.1.1's fails on Spark 4.3 with a NoSuchMethodError of
HDFSMetadataLog's constructor)."""
CONNECTOR_POM = Path(__file__).resolve().parent.parent / ".ci" / "spark-kafka-connector.pom.xml"

WindowKey = tuple[int, int]
"""(window start ms, ticker number)."""


# ------------------------------------------------------------------ trades and results


def trade_value(n: int, timestamp_ms: int) -> bytes:
    """Trade n as the record value `ticker,price,timestamp`."""
    return f"T{n % TICKERS},{100 + n % 13},{timestamp_ms}".encode()


def parse_trade(value: bytes | str) -> tuple[int, int]:
    """A trade record's value as (timestamp ms, ticker number)."""
    text = value.decode() if isinstance(value, bytes) else value
    ticker, _, timestamp = text.split(",")
    return int(timestamp), int(ticker[1:])


def parse_result(value: bytes | str) -> tuple[int, int, int]:
    """A result record's value `ticker,start,count` as (start ms, ticker number, count)."""
    text = value.decode() if isinstance(value, bytes) else value
    ticker, start, count = text.split(",")
    return int(start), int(ticker[1:]), int(count)


def first_window(timestamp_ms: np.ndarray) -> np.ndarray:
    """The start of the first window to close that holds each timestamp: the one ending at the
    next multiple of the slide after it."""
    end = np.asarray(timestamp_ms, dtype=np.int64) // SLIDE_MILLIS * SLIDE_MILLIS + SLIDE_MILLIS
    return end - WINDOW_MILLIS


def check_results(
    system: str, results: list[tuple[int, int, int]], expected: dict[WindowKey, int]
) -> None:
    """Fails, saying what is wrong, unless `results` are exactly `expected`'s windows."""
    problems = wrong_windows(results, expected)
    if problems:
        raise AssertionError(
            f"{system}: the windows differ from the plain count: " + "; ".join(problems)
        )


def check_covered(
    system: str,
    results: list[tuple[int, int, int]],
    expected: dict[WindowKey, int],
    required: set[WindowKey],
) -> None:
    """Fails unless every result is a window of `expected` with its count, once, and every
    window of `required` is among them (a paced stream's last windows may still be open)."""
    within = {key: n for key, n in expected.items() if key in required}
    outside = [r for r in results if (r[0], r[1]) not in required]
    problems = wrong_windows([r for r in results if (r[0], r[1]) in required], within)
    problems += [
        f"window {(start, ticker)}: {count} events, the plain count is {expected.get(key)}"
        for start, ticker, count in outside
        if (key := (start, ticker))
        if expected.get((start, ticker)) != count
    ][:5]
    if problems:
        raise AssertionError(
            f"{system}: the windows differ from the plain count: " + "; ".join(problems)
        )


def trade_latencies_us(
    produced_us: np.ndarray,
    timestamps_ms: np.ndarray,
    tickers: np.ndarray,
    visible_us: dict[WindowKey, int],
) -> np.ndarray:
    """Each trade's latency: when its first window to close became visible, less when it was
    produced (µs). Fails if a trade's window never became visible."""
    starts = first_window(timestamps_ms)
    latencies = np.empty(len(produced_us), dtype=np.int64)
    for i, (start, ticker) in enumerate(
        zip(starts.tolist(), np.asarray(tickers).tolist(), strict=True)
    ):
        seen = visible_us.get((start, ticker))
        if seen is None:
            raise AssertionError(f"the window {(start, ticker)} of a measured trade never came")
        latencies[i] = seen - int(produced_us[i])
    return latencies


def p99_ms(latencies_us: np.ndarray) -> float:
    """The 99th percentile, in ms."""
    return float(np.percentile(latencies_us, 99)) / 1000


def closing_time(last_ms: int) -> int:
    """A timestamp whose watermark closes every window of trades up to `last_ms`, with no window
    holding both it and such a trade."""
    return last_ms + WINDOW_MILLIS + LAG_MILLIS + 2 * SLIDE_MILLIS


# ------------------------------------------------------------------ the broker side


def _now_us() -> int:
    return time.time_ns() // 1000


class Reader:
    """A read_committed consumer of the results topic in a thread of this process: each result
    record and the wall-clock moment (µs) a poll returned it."""

    def __init__(self, servers: str, topic: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.results: list[tuple[int, int, int]] = []
        self.visible_us: list[int] = []
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": f"bench-reader-{secrets.token_hex(4)}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 5,
            }
        )
        partitions = self._consumer.list_topics(topic, timeout=30).topics[topic].partitions
        self._consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        self._thread = threading.Thread(target=self._run, name="kafka-bench-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for message in self._consumer.consume(10_000, 0.05):
                if message.error() is None:
                    self.results.append(parse_result(message.value()))
                    self.visible_us.append(_now_us())

    def first_seen(self) -> dict[WindowKey, int]:
        """Each window's first visible moment."""
        seen: dict[WindowKey, int] = {}
        for (start, ticker, _), moment in zip(
            list(self.results), list(self.visible_us), strict=False
        ):
            seen.setdefault((start, ticker), moment)
        return seen

    def wait_for(self, keys: set[WindowKey], alive: Callable[[], None], patience: float) -> bool:
        """Waits until every window of `keys` was seen (`alive()` raises if the system died);
        False after `patience` seconds."""
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            alive()
            if keys <= {(r[0], r[1]) for r in list(self.results)}:
                return True
            time.sleep(0.02)
        return False

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


def _producer(servers: str) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": servers,
            "linger.ms": 1,
            "enable.idempotence": True,
            "queue.buffering.max.messages": 1_000_000,
        }
    )


def _produce(producer: Any, topic: str, value: bytes, partition: int) -> None:
    """Produces, waiting for room while the client's queue is full."""
    while True:
        try:
            producer.produce(topic, value, partition=partition)
            return
        except BufferError:
            producer.poll(0.05)


def prefill(servers: str, topic: str, trades: int) -> dict[WindowKey, int]:
    """Produces `trades` trades (TRADES_PER_MILLI per ms of event time) and a closing trade per
    partition; returns the plain count of the trades."""
    producer = _producer(servers)
    n = np.arange(trades, dtype=np.int64)
    stamps = START_MILLIS + n // TRADES_PER_MILLI
    for i, stamp in enumerate(stamps.tolist()):
        _produce(producer, topic, trade_value(i, stamp), i % PARTITIONS)
        if i % 10_000 == 0:
            producer.poll(0)
    closer = closing_time(int(stamps[-1]))
    for p in range(PARTITIONS):
        _produce(producer, topic, trade_value(0, closer), p)
    if producer.flush(120):
        raise RuntimeError(f"the trades did not all reach {topic}")
    return window_counts(stamps, n % TICKERS)


@dataclass
class Paced:
    """What a paced run produced: every trade's produce moment (µs) and timestamp (ms), and the
    measured span's trades."""

    produced_us: list[int] = field(default_factory=list)
    stamps_ms: list[int] = field(default_factory=list)
    measured: slice = field(default_factory=lambda: slice(0, 0))


def produce_paced(
    servers: str, topic: str, reader: Reader, alive: Callable[[], None], seconds: float
) -> Paced:
    """Trades at WARM_UP_RATE until the first result is visible, then at RATE for
    SETTLE_SECONDS, `seconds` measured and TAIL_SECONDS; each trade's timestamp is the moment
    it was produced."""
    producer = _producer(servers)
    paced = Paced()
    deadline = time.monotonic() + PATIENCE_SECONDS

    def send(rate: int, until: Callable[[], bool]) -> None:
        begun, sent = time.monotonic(), 0
        while not until():
            due = begun + sent / rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            burst = max(1, int((time.monotonic() - begun) * rate) - sent)
            for _ in range(burst):
                moment = _now_us()
                n = len(paced.produced_us)
                stamp = moment // 1000
                _produce(producer, topic, trade_value(n, stamp), n % PARTITIONS)
                paced.produced_us.append(moment)
                paced.stamps_ms.append(stamp)
            sent += burst
            producer.poll(0)

    def warmed() -> bool:
        alive()
        if time.monotonic() > deadline:
            raise RuntimeError("no result came within the patience while warming up")
        return bool(reader.results)

    send(WARM_UP_RATE, warmed)
    settled = time.monotonic() + SETTLE_SECONDS
    send(RATE, lambda: time.monotonic() >= settled)
    first = len(paced.produced_us)
    measured = time.monotonic() + seconds
    send(RATE, lambda: time.monotonic() >= measured)
    paced.measured = slice(first, len(paced.produced_us))
    tail = time.monotonic() + TAIL_SECONDS
    send(RATE, lambda: time.monotonic() >= tail)
    if producer.flush(60):
        raise RuntimeError(f"the trades did not all reach {topic}")
    return paced


# ------------------------------------------------------------------ the systems


class System:
    """A running job or query reading `source` and writing `sink`; `alive()` raises its error
    if it ended; `stop()` ends it."""

    def alive(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


def _trade(record: Any) -> tuple[int, int]:
    return parse_trade(record.value)


def _timestamp(trade: tuple[int, int]) -> int:
    return trade[0]


def _ticker(trade: tuple[int, int]) -> int:
    return trade[1]


def _result_key(result: Any) -> str:
    return f"T{result.key}"


def _result_value(result: Any) -> str:
    return f"T{result.key},{result.start},{result.value}"


def kafka_window_dag(servers: str, source: str, sink: str, exactly_once: bool) -> Any:
    """stream_kafka_p -> frame counts -> (distributed, by ticker) sliding windows ->
    write_kafka_p."""
    from jetspark.core import DAG
    from jetspark.edges import between
    from jetspark.processors import accumulate_by_frame_p, combine_to_sliding_window_p, entry_key
    from jetspark.processors.aggregate import counting
    from jetspark.processors.kafka import EventTimePolicy, stream_kafka_p, write_kafka_p
    from jetspark.processors.windowing import (
        TimestampKind,
        emit_by_frame,
        limiting_lag,
        sliding_window_policy,
    )

    policy = sliding_window_policy(WINDOW_MILLIS, SLIDE_MILLIS)
    properties = {"bootstrap.servers": servers, "auto.offset.reset": "earliest"}
    event_time = EventTimePolicy(_timestamp, limiting_lag(LAG_MILLIS), emit_by_frame(policy))
    dag = DAG("kafka-stock-exchange")
    trades = dag.new_vertex(
        "kafka-trades",
        stream_kafka_p(properties, source, projection_fn=_trade, event_time_policy=event_time),
    )
    frames = dag.new_vertex(
        "frames",
        accumulate_by_frame_p(_ticker, _timestamp, TimestampKind.EVENT, policy, counting()),
    )
    windows = dag.new_vertex("windows", combine_to_sliding_window_p(policy, counting()))
    out = dag.new_vertex(
        "kafka-windows",
        write_kafka_p(
            {"bootstrap.servers": servers}, sink, _result_key, _result_value, exactly_once
        ),
    )
    dag.edge(between(trades, frames).partitioned(_ticker))
    dag.edge(between(frames, windows).distributed().partitioned(entry_key))
    dag.edge(between(windows, out))
    return dag


class JetsparkJob(System):
    """The window DAG on the run's SparkEngine, CONTINUOUS, exactly-once or at-least-once."""

    def __init__(
        self,
        spark: Any,
        servers: str,
        source: str,
        sink: str,
        exactly_once: bool,
        snapshot_millis: int = SNAPSHOT_MILLIS,
    ):
        from jetspark.core import (
            DirectorySnapshotStore,
            ExecutionMode,
            JobConfig,
            ProcessingGuarantee,
        )

        guarantee = (
            ProcessingGuarantee.EXACTLY_ONCE if exactly_once else ProcessingGuarantee.AT_LEAST_ONCE
        )
        config = JobConfig(
            processing_guarantee=guarantee,
            execution_mode=ExecutionMode.CONTINUOUS,
            snapshot_interval_millis=snapshot_millis,
        )
        self._root = tempfile.TemporaryDirectory(prefix="jetspark-bench-kafka-")
        store = DirectorySnapshotStore(self._root.name + "/snapshots")
        dag = kafka_window_dag(servers, source, sink, exactly_once)
        self.job = spark.engine.new_job(dag, config, snapshot_store=store)

    def alive(self) -> None:
        if self.job.status.is_terminal:
            self.job.join(0)
            raise RuntimeError(f"the jetspark job ended ({self.job.status})")

    def stop(self) -> None:
        from jetspark.core import JobCancelledError

        self.job.cancel()
        with contextlib.suppress(JobCancelledError):
            self.job.join(120)
        self._root.cleanup()


class SparkChild:
    """A child Python process with its own SparkSession (local[2], the connector's jars) that
    runs the Structured Streaming query on command (`python -m bench.kafka_rows child`)."""

    def __init__(self, jars: list[Path]) -> None:
        environment = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.kafka_rows", "child", ",".join(map(str, jars))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
            env=environment,
        )
        self._ready = False
        """The session starts while the parent does other work; the first command waits."""

    def _answer(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            if line.startswith("@@ "):
                return json.loads(line[3:])
        raise RuntimeError(f"the Spark child process ended (exit {self._process.wait()})")

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self._process.stdin is not None
        if not self._ready:
            self._answer()
            self._ready = True
        self._process.stdin.write(json.dumps(command) + "\n")
        self._process.stdin.flush()
        answer = self._answer()
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ask(command="exit")
        try:
            self._process.wait(60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


class SparkQuery(System):
    """The Structured Streaming query (micro-batches, or Real-Time Mode) in the child."""

    def __init__(self, child: SparkChild, servers: str, source: str, sink: str, trigger: str):
        self._child = child
        child.ask(command="start", servers=servers, source=source, sink=sink, trigger=trigger)

    def alive(self) -> None:
        self._child.ask(command="alive")

    def stop(self) -> None:
        self._child.ask(command="stop")


# ------------------------------------------------------------------ the child's side


def _sss_query(session: Any, servers: str, source: str, sink: str, trigger: str, root: str) -> Any:
    from pyspark.sql import functions as f

    fields = f.split(f.col("value").cast("string"), ",")
    trades = (
        session.readStream.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select(
            f.timestamp_millis(fields.getItem(2).cast("long")).alias("time"),
            fields.getItem(0).alias("ticker"),
        )
    )
    window = f.window("time", f"{WINDOW_MILLIS} milliseconds", f"{SLIDE_MILLIS} milliseconds")
    counts = (
        trades.withWatermark("time", f"{LAG_MILLIS} milliseconds")
        .groupBy(window, "ticker")
        .count()
        .select(
            f.col("ticker").alias("key"),
            f.concat_ws(
                ",",
                "ticker",
                f.expr("unix_millis(window.start)").cast("string"),
                f.col("count").cast("string"),
            ).alias("value"),
        )
    )
    writer = (
        counts.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("topic", sink)
        .option("checkpointLocation", tempfile.mkdtemp(dir=root))
    )
    if trigger == "realTime":
        writer = writer.outputMode("update").trigger(realTime="5 minutes")
    else:
        writer = writer.outputMode("append").trigger(processingTime="0 seconds")
    return writer.start()


def child_main(jars: str) -> int:
    """The child: starts a SparkSession, then runs commands (JSON lines) from stdin."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("bench-kafka-structured-streaming")
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    root = tempfile.mkdtemp(prefix="jetspark-bench-sss-kafka-")
    query = None

    def answer(**fields: Any) -> None:
        print("@@ " + json.dumps(fields), flush=True)

    answer(ready=True)
    for line in sys.stdin:
        command = json.loads(line)
        try:
            if command["command"] == "start":
                query = _sss_query(
                    session,
                    command["servers"],
                    command["source"],
                    command["sink"],
                    command["trigger"],
                    root,
                )
                answer(started=True)
            elif command["command"] == "alive":
                if query is None or not query.isActive:
                    error = query.exception() if query is not None else None
                    answer(error=f"the streaming query stopped: {error}")
                else:
                    answer(alive=True)
            elif command["command"] == "stop":
                if query is not None:
                    query.stop()
                query = None
                answer(stopped=True)
            else:
                answer(bye=True)
                break
        except Exception as error:  # the parent reports it
            answer(
                error=f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            )
    session.stop()
    return 0


# ------------------------------------------------------------------ the connector's jars


def connector_directory(version: str) -> Path:
    return Path.home() / ".cache" / "jetspark" / f"spark-sql-kafka-{version}"


def fetch_connector() -> tuple[Path, str]:
    """Resolves `spark-sql-kafka-0-10_2.13` with `mvn` (the installed pyspark's version, else
    SPARK_KAFKA_FALLBACKS) into a cache directory unless already there: (directory, version)."""
    import pyspark

    failures = []
    for version in dict.fromkeys((pyspark.__version__, *SPARK_KAFKA_FALLBACKS)):
        directory = connector_directory(version)
        if any(directory.glob("spark-sql-kafka-*.jar")):
            return directory, version
        done = copy_dependencies(CONNECTOR_POM, directory, **{"connector.version": version})
        if done.returncode == 0 and any(directory.glob("spark-sql-kafka-*.jar")):
            return directory, version
        failures.append(f"{version}: {(done.stdout + done.stderr).strip().splitlines()[:1]}")
    raise RuntimeError("mvn could not resolve spark-sql-kafka-0-10_2.13: " + "; ".join(failures))


def connector_jars(directory: Path) -> list[Path]:
    """The connector's jars less those pyspark ships itself (by artifact name)."""
    import pyspark

    def artifact(name: str) -> str:
        return name.rsplit("-", 1)[0]

    shipped = {artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(p for p in directory.glob("*.jar") if artifact(p.name) not in shipped)


# ------------------------------------------------------------------ the runs


@contextlib.contextmanager
def _running(make: Callable[[], System]) -> Iterator[System]:
    system = make()
    try:
        yield system
    finally:
        system.stop()


def warm_transactions(servers: str) -> None:
    """Initialises WARM_TRANSACTIONAL_IDS throwaway transactional producers at once."""
    from concurrent.futures import ThreadPoolExecutor

    from confluent_kafka import Producer

    def init(n: int) -> None:
        producer = Producer({"bootstrap.servers": servers, "transactional.id": f"warm-{n}"})
        producer.init_transactions(120)

    with ThreadPoolExecutor(WARM_TRANSACTIONAL_IDS) as pool:
        list(pool.map(init, range(WARM_TRANSACTIONAL_IDS)))


def throughput(
    broker: Any,
    source: str,
    expected: dict[WindowKey, int],
    trades: int,
    name: str,
    make: Callable[[str, str], System],
) -> float:
    """Trades per second from the system's start until its last result is visible, its results
    checked first."""
    sink = f"windows-{secrets.token_hex(4)}"
    broker.create_topic(sink, 2)
    reader = Reader(broker.bootstrap_servers, sink)
    try:
        started_us = _now_us()
        with _running(lambda: make(source, sink)) as system:
            if not reader.wait_for(set(expected), system.alive, PATIENCE_SECONDS):
                raise AssertionError(
                    f"{name}: not every window came within {PATIENCE_SECONDS:.0f} s"
                )
        last_us = max(reader.first_seen()[key] for key in expected)
        check_results(name, list(reader.results), expected)
    finally:
        reader.close()
    return trades / ((last_us - started_us) / 1e6)


def latency(broker: Any, name: str, make: Callable[[str, str], System], seconds: float) -> float:
    """The p99 latency (ms) of the trades of a paced run's measured span, its results checked
    first."""
    source, sink = f"trades-{secrets.token_hex(4)}", f"windows-{secrets.token_hex(4)}"
    broker.create_topic(source, PARTITIONS)
    broker.create_topic(sink, 2)
    reader = Reader(broker.bootstrap_servers, sink)
    try:
        with _running(lambda: make(source, sink)) as system:
            paced = produce_paced(broker.bootstrap_servers, source, reader, system.alive, seconds)
            stamps = np.asarray(paced.stamps_ms, dtype=np.int64)
            tickers = np.arange(len(stamps)) % TICKERS
            expected = window_counts(stamps, tickers)
            measured = stamps[paced.measured]
            required = {
                key for key in expected if measured[0] - WINDOW_MILLIS < key[0] <= measured[-1]
            }
            if not reader.wait_for(required, system.alive, PATIENCE_SECONDS):
                raise AssertionError(
                    f"{name} did not keep up: windows missing after {PATIENCE_SECONDS:.0f} s"
                )
        check_covered(name, list(reader.results), expected, required)
        latencies = trade_latencies_us(
            np.asarray(paced.produced_us, dtype=np.int64)[paced.measured],
            measured,
            tickers[paced.measured],
            reader.first_seen(),
        )
    finally:
        reader.close()
    return p99_ms(latencies)


NAMES = {
    "eo": "jetspark exactly-once",
    "alo": "jetspark at-least-once",
    "sss": "Structured Streaming",
    "eo_p99": "jetspark exactly-once",
    "sss_p99": "Structured Streaming",
    "rtm_p99": "Real-Time Mode",
}


def _attempt(fn: Callable[[], float], notes: dict[str, str], key: str) -> float:
    """fn(), or NaN with the reason in `notes[key]` (the first round's)."""
    try:
        return fn()
    except Exception as error:  # a peer that fails is a note, not a crash of the run
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        notes.setdefault(key, f"{NAMES[key]}: {reason[:200]}")
        return math.nan


def kafka(
    spark: Any, trades: int, seconds: float, rounds: int, log: Callable[[str], None] = print
) -> list[Row]:
    """Rows 20a-c (see the module docstring)."""
    from bench.kafka_broker import KafkaBroker, fetch_jars

    fetch_jars()
    directory, version = fetch_connector()
    notes: dict[str, str] = {}
    if version != __import__("pyspark").__version__:
        notes["connector"] = (
            f"spark-sql-kafka {version}: pyspark's own version is not on Maven Central"
        )
    measured: dict[str, list[float]] = {
        k: [] for k in ("eo", "alo", "sss", "eo_p99", "sss_p99", "rtm_p99")
    }
    with tempfile.TemporaryDirectory(prefix="jetspark-bench-broker-") as root:
        broker = KafkaBroker(Path(root)).start()
        child = None
        try:
            servers = broker.bootstrap_servers
            log(f"kafka: broker on {servers}; starting the Structured Streaming child")
            warm_transactions(servers)
            child = SparkChild(connector_jars(directory))

            def jet(
                exactly_once: bool, snapshot_millis: int = SNAPSHOT_MILLIS
            ) -> Callable[[str, str], System]:
                return lambda source, sink: JetsparkJob(
                    spark, servers, source, sink, exactly_once, snapshot_millis
                )

            def sss(trigger: str) -> Callable[[str, str], System]:
                return lambda source, sink: SparkQuery(child, servers, source, sink, trigger)

            for round_ in range(rounds):
                source = f"trades-{secrets.token_hex(4)}"
                broker.create_topic(source, PARTITIONS)
                expected = prefill(servers, source, trades)
                log(f"kafka: round {round_ + 1}, {trades:,} trades in {source}")
                order = [("eo", jet(True)), ("alo", jet(False)), ("sss", sss("microBatch"))]
                order = order[round_ % 3 :] + order[: round_ % 3]
                for key, make in order:
                    run = functools.partial(throughput, broker, source, expected, trades, key, make)
                    measured[key].append(_attempt(run, notes, key))
                    log(f"kafka: {key} {measured[key][-1]:,.0f} trades/s")
                latency_order = (
                    ("eo_p99", jet(True, LATENCY_SNAPSHOT_MILLIS)),
                    ("sss_p99", sss("microBatch")),
                    ("rtm_p99", sss("realTime")),
                )
                for key, make in latency_order:
                    run = functools.partial(latency, broker, key, make, seconds)
                    measured[key].append(_attempt(run, notes, key))
                    log(f"kafka: {key} {measured[key][-1]:.1f} ms")
        finally:
            if child is not None:
                child.close()
            broker.stop()
    return _rows(measured, notes, trades, seconds)


def fastest_peer(peers: dict[str, list[float]]) -> tuple[str, list[float]]:
    """The peer of the lowest median p99 among those that delivered every round."""
    kept = {
        name: values
        for name, values in peers.items()
        if values and not any(map(math.isnan, values))
    }
    if not kept:
        first = next(iter(peers))
        return first, peers[first]
    return min(kept.items(), key=lambda item: float(np.median(item[1])))


def _rows(
    measured: dict[str, list[float]], notes: dict[str, str], trades: int, seconds: float
) -> list[Row]:
    def s(key: str) -> Samples:
        return Samples(tuple(measured[key]))

    peer, values = fastest_peer(
        {"Structured Streaming": measured["sss_p99"], "Real-Time Mode": measured["rtm_p99"]}
    )

    def note(*keys: str) -> str:
        return "; ".join(notes[key] for key in keys if key in notes)

    extra = {
        "trades": trades,
        "rate": RATE,
        "seconds": seconds,
        "samples": measured,
        "notes": notes,
    }
    return [
        Row.compare(
            "20a",
            "Kafka → sliding-window count → Kafka, exactly-once CONTINUOUS vs Structured Streaming",
            "trades/s",
            s("eo"),
            s("sss"),
            goal=Goal(">=", 2.0),
            note=note("connector", "eo", "sss"),
            extra=extra,
        ),
        Row.compare(
            "20b",
            f"Kafka window latency p99 at {RATE:,} trades/s, exactly-once with "
            f"{LATENCY_SNAPSHOT_MILLIS} ms snapshots vs {peer}",
            "ms",
            s("eo_p99"),
            Samples(tuple(values)),
            goal=Goal("<=", 0.1),
            note=note("eo_p99", "sss_p99", "rtm_p99"),
            extra=extra,
        ),
        Row.compare(
            "20c",
            "Kafka windows: at-least-once ÷ exactly-once (the cost of exactly-once)",
            "trades/s",
            s("alo"),
            s("eo"),
            note=note("alo"),
            extra=extra,
        ),
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        sys.exit(child_main(sys.argv[2]))
    if sys.argv[1:2] == ["fetch"]:
        print(fetch_connector())
        sys.exit(0)
    print("usage: python -m bench.kafka_rows child JARS | fetch", file=sys.stderr)
    sys.exit(2)
