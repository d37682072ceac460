"""The streaming throughput rows: the manual's stock-exchange window (counts per ticker, 1 s
windows sliding by 100 ms, event time) on an endless stream, each system run for the same wall
time in this one process:

- SparkEngine on the run's context, exactly-once with 1 s snapshots into transactional files,
  CONTINUOUS (every member a long-running task) and MICRO_BATCH (a Spark job per snapshot
  interval): events per second of wall time, from the source's live counters, over `seconds`
  once the first events went through;
- Spark Structured Streaming's own `groupBy(window(...), ticker).count()` on the
  `rate-micro-batch` source (JVM code generation, the moonshot), in update mode, the event time
  computed from the row's `value` as jetspark's events compute theirs;
- PySpark's Python stateful API, `transformWithStateInPandas`, counting per ticker (needs the
  `bench` extra: pandas and pyarrow; the row says so when they are missing);
- LocalEngine(1) on the same DAG over a bounded journal, with and without a guarantee.

Every system sees 200,000 events per second of event time and 7 tickers: event n is at
START_MILLIS + n // 200 ms, of ticker n mod 7. No rate is reported before the system's output
was checked against the plain count (bench/plain_counts.py): jetspark's committed windows of the
timed run itself (every window once, each count exact, per ticker none missing up to its last
committed one); the Spark queries' in a run of CHECKED_BATCHES batches of the same query into a
`foreachBatch` collector (the timed runs write to the no-op sink).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.plain_counts import SLIDE_MILLIS, WINDOW_MILLIS, window_counts, wrong_windows
from bench.report import Goal, Row
from bench.timing import Samples

EVENTS_PER_EVENT_SECOND = 200_000
TICKERS = 7
START_MILLIS = 1_500_000_000_000
SNAPSHOT_MILLIS = 1_000
CHECKED_BATCHES = 3
"""Batches of the Structured Streaming queries whose output is checked before they are timed."""
_EVENTS_PER_MILLI = EVENTS_PER_EVENT_SECOND // 1000


def event(n: int) -> tuple[int, int]:
    """The n-th event, (timestamp ms, ticker)."""
    return (START_MILLIS + n // _EVENTS_PER_MILLI, n % TICKERS)


def expected_windows(count: int) -> dict[tuple[int, int], int]:
    """The plain count of events 0..count-1 per (window start, ticker)."""
    n = np.arange(count, dtype=np.int64)
    return window_counts(START_MILLIS + n // _EVENTS_PER_MILLI, n % TICKERS)


def _timestamp(e: tuple[int, int]) -> int:
    return e[0]


def _ticker(e: tuple[int, int]) -> int:
    return e[1]


def window_line(result: Any) -> str:
    """A window result as the line `start ticker count` (a KeyedWindowResult)."""
    return f"{result.start} {result.key} {result.value}"


def window_dag(
    source: Any,
    sink: Any,
    parse: Any = None,
    source_parallelism: int = -1,
    window: tuple[int, int] = (WINDOW_MILLIS, SLIDE_MILLIS),
) -> Any:
    """source [-> parse] -> watermarks -> frame counts -> (distributed, by ticker) sliding
    windows -> sink; `parse` (a processor supplier) turns the source's items into events
    `(timestamp ms, ticker)`; `window`: (size, slide) in ms."""
    from jetspark.core import DAG
    from jetspark.edges import between
    from jetspark.processors import (
        accumulate_by_frame_p,
        combine_to_sliding_window_p,
        entry_key,
        insert_watermarks_p,
    )
    from jetspark.processors.aggregate import counting
    from jetspark.processors.windowing import (
        TimestampKind,
        emit_by_frame,
        limiting_lag,
        sliding_window_policy,
    )

    policy = sliding_window_policy(*window)
    dag = DAG("stock-exchange-windows")
    events = dag.new_vertex("events", source, local_parallelism=source_parallelism)
    if parse is not None:
        parsed = dag.new_vertex("parse", parse, local_parallelism=source_parallelism)
        dag.edge(between(events, parsed).isolated())
        events = parsed
    watermarks = dag.new_vertex(
        "watermarks",
        insert_watermarks_p(_timestamp, limiting_lag(0), emit_by_frame(policy)),
        local_parallelism=source_parallelism,
    )
    frames = dag.new_vertex(
        "frames",
        accumulate_by_frame_p(_ticker, _timestamp, TimestampKind.EVENT, policy, counting()),
    )
    windows = dag.new_vertex("windows", combine_to_sliding_window_p(policy, counting()))
    out = dag.new_vertex("sink", sink)
    dag.edge(between(events, watermarks).isolated())
    dag.edge(between(watermarks, frames).partitioned(_ticker))
    dag.edge(between(frames, windows).distributed().partitioned(entry_key))
    dag.edge(between(windows, out))
    return dag


def exactly_once(mode: Any) -> Any:
    """The streaming rows' JobConfig: exactly-once, 1 s snapshots, in execution mode `mode`."""
    from jetspark.core import JobConfig, ProcessingGuarantee

    return JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=SNAPSHOT_MILLIS,
        execution_mode=mode,
    )


# ------------------------------------------------------------------ jetspark on Spark


def spark_engine_rate(spark: Any, mode: Any, seconds: float, pipeline: bool = False) -> float:
    """Events per second SparkEngine reads exactly-once in execution mode `mode` over
    `seconds` of wall time once its first events went through; its committed windows checked
    first. The job is the window DAG, or with `pipeline` the same count as a pipeline."""
    from jetspark.core import DirectorySnapshotStore
    from jetspark.processors import stream_journal_p, write_file_transactional_p

    with tempfile.TemporaryDirectory(prefix="jetspark-bench-stream-") as root:
        out = Path(root, "out")
        source = stream_journal_p(event, partition_count=16)
        sink = write_file_transactional_p(str(out), window_line)
        job = spark.engine.new_job(
            window_pipeline(source, sink) if pipeline else window_dag(source, sink),
            exactly_once(mode),
            snapshot_store=DirectorySnapshotStore(root + "/snapshots"),
        )
        counted = "add-timestamps" if pipeline else "watermarks"
        with cancelled_on_exit(job):
            rate = steady_rate(job, seconds, lambda: events_in(job, counted))
        check_committed_windows(out, f"{mode.name} on Spark")
    return rate


def window_pipeline(source: Any, sink: Any) -> Any:
    """The window DAG's count as a pipeline: the same source and sink, the planner's DAG."""
    from jetspark.core.pipeline import Pipeline, Sink, Source, WindowDefinition
    from jetspark.processors.aggregate import counting
    from jetspark.processors.windowing import KeyedWindowResult

    pipeline = Pipeline.create("stock-exchange-windows")
    (
        pipeline.draw_from(Source("events", source, bounded=False))
        .add_timestamps(_timestamp, 0)
        .grouping_key(_ticker)
        .window(WindowDefinition.sliding(WINDOW_MILLIS, SLIDE_MILLIS))
        .aggregate(counting(), KeyedWindowResult)
        .drain_to(Sink("sink", sink))
    )
    return pipeline


def events_in(job: Any, vertex: str = "watermarks") -> int:
    """Events the job's watermark vertex received so far (its live counters)."""
    return sum(sum(p.received_count.values()) for p in job.metrics.of_vertex(vertex))


@contextlib.contextmanager
def cancelled_on_exit(job: Any) -> Any:
    """The job, cancelled (and joined) on leaving."""
    from jetspark.core import JobCancelledError

    try:
        yield job
    finally:
        job.cancel()
        with contextlib.suppress(JobCancelledError):
            job.join(120)


def steady_rate(job: Any, seconds: float, count: Callable[[], int]) -> float:
    """`count()`'s growth per second over about `seconds`, measured between two moments it
    changed (so the counters' update period does not bias it), after it first grew."""
    first = _next_change(job, count, 0)
    started = time.monotonic()
    time.sleep(seconds)
    last = _next_change(job, count, count())
    return (last - first) / (time.monotonic() - started)


def _next_change(job: Any, count: Callable[[], int], since: int) -> int:
    deadline = time.monotonic() + 600
    while (value := count()) <= since:
        if job.status.is_terminal or time.monotonic() > deadline:
            job.join(0)
            raise RuntimeError(f"{job.name} ended or stalled before it ran")
        time.sleep(0.005)
    return value


def check_committed_windows(directory: Path, system: str) -> None:
    """The windows a cancelled run published are exactly the plain count's, per ticker up to
    its last published window (a ticker's windows are one processor's, published in order)."""
    results = [
        tuple(map(int, line.split()))
        for path in sorted(directory.glob("part-*"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    last = {ticker: start for start, ticker, _ in sorted(results)}
    if len(last) < TICKERS:
        raise AssertionError(f"{system}: windows of only {len(last)} tickers were committed")
    newest_event = max(last.values()) + WINDOW_MILLIS - START_MILLIS
    expected = expected_windows((newest_event + 1) * _EVENTS_PER_MILLI)
    within = {key: n for key, n in expected.items() if key[0] <= last[key[1]]}
    check_windows(system, results, within)


def check_windows(
    system: str, results: list[tuple[int, ...]], expected: dict[tuple[int, int], int]
) -> None:
    """Fails, saying what is wrong, unless `results` are exactly `expected`'s windows."""
    problems = wrong_windows(results, expected)  # type: ignore[arg-type]
    if problems:
        raise AssertionError(
            f"{system}: the windows differ from the plain count: " + "; ".join(problems)
        )


# ------------------------------------------------------- Structured Streaming baselines


def _tuned_session(spark: Any) -> Any:
    """The run's SparkSession with as many shuffle partitions as local[2] has cores (the
    default, 200, gives every micro-batch 200 state-store tasks: no one benchmarks that)."""
    session = spark.session
    session.conf.set("spark.sql.shuffle.partitions", str(spark.context.defaultParallelism))
    return session


def _rate_events(session: Any, rows_per_batch: int) -> Any:
    """The rate-micro-batch rows as jetspark's events: (time, ticker) from `value`."""
    from pyspark.sql import functions as f

    rows = (
        session.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", 2)
        .load()
    )
    return rows.select(
        f.expr(f"timestamp_millis({START_MILLIS} + value div {_EVENTS_PER_MILLI})").alias("time"),
        (f.col("value") % TICKERS).alias("ticker"),
    )


def sss_window_counts(spark: Any, rows_per_batch: int) -> Any:
    """Structured Streaming's sliding-window count per ticker, event time from `value`."""
    from pyspark.sql import functions as f

    window = f.window("time", f"{WINDOW_MILLIS} milliseconds", f"{SLIDE_MILLIS} milliseconds")
    return (
        _rate_events(_tuned_session(spark), rows_per_batch)
        .withWatermark("time", "0 seconds")
        .groupBy(window, "ticker")
        .count()
        .select(f.expr("unix_millis(window.start)").alias("start"), "ticker", "count")
    )


def tws_counts(spark: Any, rows_per_batch: int) -> Any | None:
    """transformWithStateInPandas counting per ticker (RocksDB state); None without the bench
    extra (pandas, pyarrow)."""
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return None
    from pyspark import cloudpickle

    from bench import stateful_count

    cloudpickle.register_pickle_by_value(stateful_count)  # bench/ is not on the workers
    session = _tuned_session(spark)
    session.conf.set(
        "spark.sql.streaming.stateStore.providerClass",
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    )
    return (
        _rate_events(session, rows_per_batch)
        .select("ticker")
        .groupBy("ticker")
        .transformWithStateInPandas(
            statefulProcessor=stateful_count.CountPerKey(),
            outputStructType="ticker long, count long",
            outputMode="Update",
            timeMode="None",
        )
    )


def query_rate(counts: Any, seconds: float) -> float:
    """Rows per second of the streaming DataFrame `counts` in update mode (`_query_rate`)."""
    with tempfile.TemporaryDirectory(prefix="jetspark-bench-sss-") as checkpoint:
        return _query_rate(counts, "update", checkpoint, seconds)


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
    try:
        wait_for_query(query, lambda: len(query.recentProgress) >= 2)
        time.sleep(seconds)
        progress = query.recentProgress[1:]
    finally:
        query.stop()
    rows = sum(p["numInputRows"] for p in progress)
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    return rows / busy if busy else 0.0


def wait_for_query(query: Any, condition: Callable[[], bool]) -> None:
    """Waits until `condition()`; fails if the streaming query stopped first (saying why), or
    after 10 minutes."""
    deadline = time.monotonic() + 600
    while not condition():
        if not query.isActive:
            raise RuntimeError(f"the streaming query stopped: {query.exception()}")
        if time.monotonic() > deadline:
            raise RuntimeError("the streaming query made no progress in 10 minutes")
        time.sleep(0.05)


def checked_query_output(counts: Any, key_columns: int) -> tuple[dict[tuple[int, ...], int], int]:
    """Runs `counts` for CHECKED_BATCHES batches into a `foreachBatch` collector, update mode;
    returns each key's last count (the key: the first `key_columns` columns) and the input
    rows those batches read."""
    finals: dict[tuple[int, ...], int] = {}
    done: list[int] = []

    def collect(frame: Any, batch_id: int) -> None:
        if batch_id < CHECKED_BATCHES:
            for row in frame.collect():
                finals[tuple(row[:key_columns])] = row[key_columns]
            done.append(batch_id)

    with tempfile.TemporaryDirectory(prefix="jetspark-bench-sss-check-") as checkpoint:
        query = (
            counts.writeStream.foreachBatch(collect)
            .outputMode("update")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds")
            .start()
        )
        try:
            wait_for_query(
                query,
                lambda: (
                    len(done) >= CHECKED_BATCHES
                    and any(p["batchId"] == CHECKED_BATCHES - 1 for p in query.recentProgress)
                ),
            )
            progress = query.recentProgress
        finally:
            query.stop()
    rows = sum(p["numInputRows"] for p in progress if p["batchId"] < CHECKED_BATCHES)
    return finals, rows


def check_sss_windows(spark: Any, rows_per_batch: int) -> None:
    """Structured Streaming's window counts after CHECKED_BATCHES batches are the plain
    count's."""
    finals, rows = checked_query_output(sss_window_counts(spark, rows_per_batch), 2)
    results = [(start, ticker, count) for (start, ticker), count in finals.items()]
    check_windows("Structured Streaming", results, expected_windows(rows))


def check_tws_counts(spark: Any, counts: Any) -> None:
    """transformWithStateInPandas's counts per ticker after CHECKED_BATCHES batches are the
    plain count's."""
    finals, rows = checked_query_output(counts, 1)
    tickers = np.bincount(np.arange(rows) % TICKERS, minlength=TICKERS)
    expected = {(ticker,): int(n) for ticker, n in enumerate(tickers)}
    if finals != expected:
        raise AssertionError(
            f"transformWithStateInPandas: counts per ticker {finals} after {rows} rows, the "
            f"plain count is {expected}"
        )


# ------------------------------------------------------------------ LocalEngine


def local_engine_rates(count: int) -> tuple[float, float]:
    """Events per second of LocalEngine(1) on the window DAG over a bounded journal of `count`
    precomputed events: without a guarantee, and exactly-once (1 s snapshots); both runs'
    windows checked against the plain count."""
    from jetspark.core import JobConfig, LocalEngine, ProcessingGuarantee
    from jetspark.processors import read_journal_p, write_list_p

    expected = expected_windows(count)
    rates = []
    for guarantee in (ProcessingGuarantee.NONE, ProcessingGuarantee.EXACTLY_ONCE):
        engine = LocalEngine(1)
        engine.get_list("events").extend(event(n) for n in range(count))
        dag = window_dag(read_journal_p("events"), write_list_p("windows"))
        config = JobConfig(processing_guarantee=guarantee, snapshot_interval_millis=SNAPSHOT_MILLIS)
        started = time.perf_counter()
        engine.new_job(dag, config).join()
        rates.append(count / (time.perf_counter() - started))
        windows = [(w.start, w.key, w.value) for w in engine.get_list("windows")]
        check_windows(f"LocalEngine, {guarantee.name}", windows, expected)
    return rates[0], rates[1]


# ------------------------------------------------------------------ the rows


def streaming(
    spark: Any, seconds: float, rounds: int, local_events: int, rows_per_batch: int
) -> list[Row]:
    """The streaming throughput rows (module docstring), `rounds` times each, `seconds` per
    run; the Structured Streaming queries read `rows_per_batch` rows a batch."""
    from jetspark.core import ExecutionMode

    check_sss_windows(spark, rows_per_batch)
    tws = tws_counts(spark, rows_per_batch)
    if tws is not None:
        check_tws_counts(spark, tws)
    continuous, micro_batch, jvm, pandas_state = [], [], [], []
    local_none, local_exactly = [], []
    for _ in range(rounds):
        continuous.append(spark_engine_rate(spark, ExecutionMode.CONTINUOUS, seconds))
        micro_batch.append(spark_engine_rate(spark, ExecutionMode.MICRO_BATCH, seconds))
        jvm.append(query_rate(sss_window_counts(spark, rows_per_batch), seconds))
        if tws is not None:
            pandas_state.append(query_rate(tws, seconds))
        none, exactly = local_engine_rates(local_events)
        local_none.append(none)
        local_exactly.append(exactly)
    subject = Samples(tuple(continuous))
    title = "stock-exchange windows, SparkEngine local[2] CONTINUOUS exactly-once vs"
    against = [
        ("13a", "Structured Streaming (JVM) window count, rate-micro-batch, update mode", jvm, 0.5),
        ("13b", "transformWithStateInPandas count per ticker", pandas_state, 3.0),
        ("13e", "MICRO_BATCH (a Spark job per 1 s snapshot)", micro_batch, 1.5),
    ]
    rows = [
        Row.compare(
            number,
            f"{title} {baseline}",
            "events/s",
            subject,
            Samples(tuple(rates)),
            goal=Goal(">=", goal),
        )
        for number, baseline, rates, goal in against
        if rates  # 13b needs the bench extra
    ]
    local = Row.compare(
        "13c",
        "window DAG on LocalEngine(1), bounded journal: exactly-once vs no guarantee",
        "events/s",
        Samples(tuple(local_exactly)),
        Samples(tuple(local_none)),
        goal=Goal(">=", 400_000, "events/s"),
    )
    return sorted([*rows, local], key=lambda row: row.number)
