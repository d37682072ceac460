"""The streaming rows: the manual's stock-exchange window (counts per ticker, 1 s windows
sliding by 100 ms, event time) on an endless stream, each system run for the same wall time in
this one process:

- SparkEngine on the run's context, exactly-once micro-batches of one snapshot interval (1 s),
  into transactional files;
- Spark Structured Streaming's own `groupBy(window(...), ticker).count()` on the
  `rate-micro-batch` source (JVM code generation, the moonshot);
- PySpark's Python stateful API, `transformWithStateInPandas`, counting per ticker (needs the
  `bench` extra: pandas and pyarrow; the row says so when they are missing);
- LocalEngine(1) on the same DAG over a bounded journal, with and without a guarantee.

Every system sees 200,000 events per second of event time and 7 tickers, as the rate source
makes them. Latency on SparkEngine: a window's result is published when the batch after the one
that read its newest event restores the sink, so an event read in batch k is published at most
the durations of batches k and k+1 later; the row reports that bound's p50 and p99 over the
batches, against the goal of 2 intervals.
"""

from __future__ import annotations

import contextlib
import itertools
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.report import Goal, Row
from bench.timing import Samples

EVENTS_PER_EVENT_SECOND = 200_000
TICKERS = 7
START_MILLIS = 1_500_000_000_000
WINDOW_MILLIS, SLIDE_MILLIS = 1_000, 100
BATCH_MILLIS = 1_000


def event(n: int) -> tuple[int, int]:
    """The n-th event, (timestamp ms, ticker): the rate-micro-batch source's rows, in Python."""
    return (START_MILLIS + n * 1000 // EVENTS_PER_EVENT_SECOND, n % TICKERS)


def _timestamp(e: tuple[int, int]) -> int:
    return e[0]


def _ticker(e: tuple[int, int]) -> int:
    return e[1]


def _key(entry: Any) -> Any:
    return entry[0]


def window_dag(source: Any, sink: Any) -> Any:
    """source -> watermarks -> frame counts -> (distributed) sliding windows -> sink."""
    from jetspark.core import DAG
    from jetspark.edges import between
    from jetspark.processors import (
        accumulate_by_frame_p,
        combine_to_sliding_window_p,
        insert_watermarks_p,
    )
    from jetspark.processors.aggregate import counting
    from jetspark.processors.windowing import (
        TimestampKind,
        emit_by_frame,
        limiting_lag,
        sliding_window_policy,
    )

    policy = sliding_window_policy(WINDOW_MILLIS, SLIDE_MILLIS)
    dag = DAG("stock-exchange-windows")
    events = dag.new_vertex("events", source)
    watermarks = dag.new_vertex(
        "watermarks", insert_watermarks_p(_timestamp, limiting_lag(0), emit_by_frame(policy))
    )
    frames = dag.new_vertex(
        "frames",
        accumulate_by_frame_p(_ticker, _timestamp, TimestampKind.EVENT, policy, counting()),
    )
    windows = dag.new_vertex("windows", combine_to_sliding_window_p(policy, counting()))
    out = dag.new_vertex("sink", sink)
    dag.edge(between(events, watermarks).isolated())
    dag.edge(between(watermarks, frames).partitioned(_ticker))
    dag.edge(between(frames, windows).distributed().partitioned(_key))
    dag.edge(between(windows, out))
    return dag


def spark_engine_rate(spark: Any, seconds: float) -> tuple[float, list[float]]:
    """Events per second SparkEngine reads exactly-once for `seconds` (first batch, which
    starts the workers, excluded), and the per-batch latency bounds in seconds."""
    from jetspark.core import (
        DirectorySnapshotStore,
        ExecutionMode,
        JobConfig,
        ProcessingGuarantee,
    )
    from jetspark.processors import stream_journal_p, write_file_transactional_p

    with tempfile.TemporaryDirectory(prefix="jetspark-bench-stream-") as root:
        dag = window_dag(
            stream_journal_p(event, partition_count=16), write_file_transactional_p(root + "/out")
        )
        config = JobConfig(
            processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
            snapshot_interval_millis=BATCH_MILLIS,
            execution_mode=ExecutionMode.MICRO_BATCH,
        )
        job = spark.engine.new_job(
            dag, config, snapshot_store=DirectorySnapshotStore(root + "/snapshots")
        )
        _run_for(job, seconds, lambda: len(job.metrics.batches) >= 2)
        reports = job.metrics.batches[1:]
    items = sum(r.input_items for r in reports)
    busy = sum(r.duration_seconds for r in reports)
    latencies = [a.duration_seconds + b.duration_seconds for a, b in itertools.pairwise(reports)]
    return items / busy if busy else 0.0, latencies


def _run_for(job: Any, seconds: float, started: Callable[[], bool]) -> None:
    from jetspark.core import JobCancelledError

    deadline = time.monotonic() + 600
    while not started():
        if job.status.is_terminal or time.monotonic() > deadline:
            job.join(0)
            raise RuntimeError(f"{job.name} ended before it ran")
        time.sleep(0.05)
    time.sleep(seconds)
    job.cancel()
    with contextlib.suppress(JobCancelledError):
        job.join(120)


def structured_streaming_rate(spark: Any, seconds: float) -> float:
    """Rows per second of Structured Streaming's own sliding-window count (first batch out)."""
    from pyspark.sql import functions as f

    session = _tuned_session(spark)
    with tempfile.TemporaryDirectory(prefix="jetspark-bench-sss-") as checkpoint:
        rows = (
            session.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", EVENTS_PER_EVENT_SECOND)
            .option("advanceMillisPerBatch", 1000)
            .option("numPartitions", 2)
            .load()
        )
        counts = (
            rows.withColumn("ticker", f.col("value") % TICKERS)
            .withWatermark("timestamp", "0 seconds")
            .groupBy(
                f.window(
                    "timestamp", f"{WINDOW_MILLIS} milliseconds", f"{SLIDE_MILLIS} milliseconds"
                ),
                "ticker",
            )
            .count()
        )
        return _query_rate(counts, "append", checkpoint, seconds)


def _tuned_session(spark: Any) -> Any:
    """The run's SparkSession with as many shuffle partitions as local[2] has cores (the
    default, 200, gives every micro-batch 200 state-store tasks: no one benchmarks that)."""
    session = spark.session
    session.conf.set("spark.sql.shuffle.partitions", str(spark.context.defaultParallelism))
    return session


def _query_rate(counts: Any, output_mode: str, checkpoint: str, seconds: float) -> float:
    """Rows per second of the streaming DataFrame `counts` written to Spark's no-op sink as
    fast as it goes for `seconds` (its first batch, which compiles and warms up, left out)."""
    query = (
        counts.writeStream.format("noop")
        .outputMode(output_mode)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )
    deadline = time.monotonic() + 600
    while len(query.recentProgress) < 2:
        if time.monotonic() > deadline:
            raise RuntimeError("the streaming query made no progress")
        time.sleep(0.05)
    time.sleep(seconds)
    progress = query.recentProgress[1:]
    query.stop()
    rows = sum(p["numInputRows"] for p in progress)
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    return rows / busy if busy else 0.0


def transform_with_state_rate(spark: Any, seconds: float) -> float | None:
    """Rows per second of transformWithStateInPandas counting per ticker; None without the
    bench extra (pandas, pyarrow)."""
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return None
    from pyspark import cloudpickle
    from pyspark.sql import functions as f

    from bench import stateful_count

    cloudpickle.register_pickle_by_value(stateful_count)  # bench/ is not on the workers

    session = _tuned_session(spark)
    session.conf.set(
        "spark.sql.streaming.stateStore.providerClass",
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    )
    with tempfile.TemporaryDirectory(prefix="jetspark-bench-tws-") as checkpoint:
        rows = (
            session.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", EVENTS_PER_EVENT_SECOND)
            .option("numPartitions", 2)
            .load()
            .withColumn("ticker", f.col("value") % TICKERS)
            .select("ticker")
        )
        counts = rows.groupBy("ticker").transformWithStateInPandas(
            statefulProcessor=stateful_count.CountPerKey(),
            outputStructType="ticker long, count long",
            outputMode="Update",
            timeMode="None",
        )
        return _query_rate(counts, "update", checkpoint, seconds)


def local_engine_rates(count: int) -> tuple[float, float]:
    """Events per second of LocalEngine(1) on the window DAG over a bounded journal of `count`
    precomputed events: without a guarantee, and exactly-once (1 s snapshots)."""
    from jetspark.core import JobConfig, LocalEngine, ProcessingGuarantee
    from jetspark.processors import noop_p, read_journal_p

    rates = []
    for guarantee in (ProcessingGuarantee.NONE, ProcessingGuarantee.EXACTLY_ONCE):
        engine = LocalEngine(1)
        engine.get_list("events").extend(event(n) for n in range(count))
        dag = window_dag(read_journal_p("events"), noop_p())
        config = JobConfig(processing_guarantee=guarantee, snapshot_interval_millis=BATCH_MILLIS)
        started = time.perf_counter()
        engine.new_job(dag, config).join()
        rates.append(count / (time.perf_counter() - started))
    return rates[0], rates[1]


def _p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def streaming(spark: Any, seconds: float, rounds: int, local_events: int) -> list[Row]:
    """The streaming rows (module docstring), `rounds` times each, `seconds` per run."""
    engine_rates, latencies, jvm_rates, tws_rates = [], [], [], []
    local_none, local_exactly = [], []
    for _ in range(rounds):
        rate, batch_latencies = spark_engine_rate(spark, seconds)
        engine_rates.append(rate)
        latencies.extend(batch_latencies)
        jvm_rates.append(structured_streaming_rate(spark, seconds))
        tws = transform_with_state_rate(spark, seconds)
        if tws is not None:
            tws_rates.append(tws)
        none, exactly = local_engine_rates(local_events)
        local_none.append(none)
        local_exactly.append(exactly)
    subject = Samples(tuple(engine_rates))
    latency = {
        "latency_bound_p50_seconds": statistics.median(latencies) if latencies else None,
        "latency_bound_p99_seconds": _p99(latencies),
        "batch_seconds": BATCH_MILLIS / 1000,
    }
    rows = [
        Row.compare(
            "13a",
            "stock-exchange windows, SparkEngine local[2] exactly-once vs Structured Streaming "
            "(JVM) window count, rate-micro-batch",
            "events/s",
            subject,
            Samples(tuple(jvm_rates)),
            goal=Goal(">=", 0.5),
            extra=latency,
        )
    ]
    if tws_rates:
        rows.append(
            Row.compare(
                "13b",
                "same, SparkEngine vs transformWithStateInPandas count per ticker",
                "events/s",
                subject,
                Samples(tuple(tws_rates)),
                goal=Goal(">=", 3.0),
            )
        )
    rows.append(
        Row.compare(
            "13c",
            "window DAG on LocalEngine(1), bounded journal: exactly-once vs no guarantee",
            "events/s",
            Samples(tuple(local_exactly)),
            Samples(tuple(local_none)),
            goal=Goal(">=", 400_000, "events/s"),
        )
    )
    return rows
