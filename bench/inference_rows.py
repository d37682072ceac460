"""The inference rows: digits classified by the softmax model of examples/digits_inference.py.

- 14a, LocalEngine(1): the model through `map_batched_using_context_p` (one matrix product per
  batch of up to 256 items) vs through `map_using_context_p` (one per item), items/s;
- 14b, Spark local[2]: jetspark (`stream_journal_p` of digit events -> `map_using_model_p`,
  exactly-once, in the execution mode SparkEngine picks) vs Structured Streaming
  (`rate-micro-batch` -> `predict_batch_udf`, the image looked up from the row's value), rows/s
  over `seconds` of each running as fast as it goes (first batch or second out);
- 14c, the same pair fed at a fixed `LATENCY_RATE` events/s (jetspark: a paced source of its own;
  Spark: the `rate` source): the latency of an event, from the moment it is due to the moment its
  prediction reaches the sink (wall clock, in the executor: jetspark's `LatencyLinesP` takes it
  as the prediction arrives, a `foreach` writer's `process` as the row does; both sinks are
  at-least-once, the job's state exactly-once), p99 over the events due in the `seconds` that
  start SETTLE_SECONDS after the system caught up with the stream (within 2 s of it).

Both sides predict with the same weights and the same numpy code, checked first on 2,000 digits
against numpy called directly. 14b and 14c need the `bench` extra (pandas, pyarrow) for
`predict_batch_udf`; without it they are left out, saying so.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from bench.report import Goal, Row
from bench.streaming_rows import _query_rate, _tuned_session, cancelled_on_exit
from bench.timing import Samples, alternate
from bench.wordcount import load_example
from jetspark.core import (
    DAG,
    DirectorySnapshotStore,
    Job,
    JobConfig,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.suppliers import ProcessorMetaSupplier
from jetspark.edges import between, from_
from jetspark.processors import (
    ContextFactory,
    map_batched_using_context_p,
    map_using_context_p,
    map_using_model_p,
    noop_p,
    read_journal_p,
    read_list_p,
    stream_journal_p,
    write_list_p,
)
from jetspark.processors.functions import drain
from jetspark.processors.snapshots import ProcessorState

MAX_BATCH_SIZE = 256
CHECKED = 2_000
"""Digits whose predictions every system must get right (equal to numpy's) before timing."""
LATENCY_RATE = 1_000
"""Events a second in row 14c."""
ROWS_PER_BATCH = 100_000
"""Structured Streaming's rate-micro-batch rows per batch in row 14b."""
SNAPSHOT_INTERVAL_MILLIS = 1_000
"""jetspark's snapshot interval (the batch length if it runs as micro-batches)."""


def example() -> ModuleType:
    """examples/digits_inference.py, loaded once."""
    return load_example("digits_inference")


class DigitEvents:
    """Event n of an endless stream: digit n mod 1,797 as the example's (n, label, pixels)."""

    def __init__(self, pixels: np.ndarray, labels: np.ndarray) -> None:
        self.pixels, self.labels = pixels, labels

    def __call__(self, n: int) -> tuple[int, int, bytes]:
        index = n % len(self.labels)
        return n, int(self.labels[index]), self.pixels[index].tobytes()


class Workload:
    """The model (trained as the example trains v2) and the digits, on the driver."""

    def __init__(self, directory: Path) -> None:
        ex = example()
        digits = ex.Digits.shuffled()
        self.model = ex.train("v2", digits, ex.V2_IMAGES, ex.V2_EPOCHS)
        self.reference = self.model.save(directory)
        self.events = DigitEvents(digits.pixels, digits.labels)

    def expected(self, count: int) -> list[int]:
        """numpy's predictions of events 0..count-1, called directly."""
        indexes = np.arange(count) % len(self.events.labels)
        return self.model.predict(self.events.pixels[indexes]).tolist()


# ------------------------------------------------------------------ 14a: LocalEngine


def _local_predictions(workload: Workload, batched: bool, count: int) -> list[int]:
    """Events 0..count-1 classified on LocalEngine(1); their predicted labels in order."""
    reference, load_model, predict_batch = (
        workload.reference,
        example().load_model,
        example().predict_batch,
    )
    factory = ContextFactory(lambda context: load_model(reference))
    classify = (
        map_batched_using_context_p(factory, predict_batch, MAX_BATCH_SIZE)
        if batched
        else map_using_context_p(factory, lambda model, event: predict_batch(model, [event])[0])
    )
    dag = DAG("classify-digits")
    source = dag.new_vertex(
        "events", read_journal_p(workload.events, count=count, partition_count=1)
    )
    model = dag.new_vertex("classify", classify)
    sink = dag.new_vertex("sink", write_list_p("predictions"))
    dag.edge(between(source, model)).edge(between(model, sink))
    engine = LocalEngine(1)
    engine.new_job(dag).join()
    return [predicted for _, _, predicted, _ in engine.get_list("predictions")]


def batched_vs_per_item(workload: Workload, count: int, rounds: int) -> Row:
    """Row 14a."""
    times, results = alternate(
        {
            "batched": lambda: _local_predictions(workload, True, count),
            "per item": lambda: _local_predictions(workload, False, count),
        },
        rounds,
    )
    expected = workload.expected(count)
    for name, predictions in results.items():
        if predictions != expected:
            raise AssertionError(f"14a: the {name} predictions differ from numpy's")
    rates = {name: samples.map(lambda s: count / s) for name, samples in times.items()}
    return Row.compare(
        "14a",
        f"digits on LocalEngine(1), {count:,} events: map_batched_using_context_p (batches of "
        f"{MAX_BATCH_SIZE}) vs map_using_context_p, same numpy model",
        "items/s",
        rates["batched"],
        rates["per item"],
        goal=Goal(">=", 5.0),
    )


# -------------------------------------------------------------- 14b, 14c: on Spark


class Pace(NamedTuple):
    """Event n is due at wall-clock time `start + n / rate`."""

    start: float
    rate: float

    def due(self, n: int) -> float:
        return self.start + n / self.rate

    def latency_line(self, prediction: tuple[int, int, int, str]) -> str:
        """`due latency` of a prediction reaching the sink now: the sink's line."""
        due = self.due(prediction[0])
        return f"{due} {time.time() - due}"


_PACED = ProcessorState("paced_events")


class PacedEventsP(AbstractProcessor):
    """A source emitting event n once it is due (`pace`): processor i of T takes the n with
    n mod T == i; its next n is its snapshot state."""

    def __init__(self, events: DigitEvents, pace: Pace) -> None:
        self._events, self._pace = events, pace
        self._next = -1

    def complete(self) -> bool:
        context = self.context
        if self._next < 0:
            self._next = context.global_processor_index
        now = time.time()
        while self._pace.due(self._next) <= now:
            if not self.try_emit(self._events(self._next)):
                return False
            self._next += context.total_parallelism
        return False

    def save_to_snapshot(self) -> bool:
        return self.try_emit_to_snapshot(*_PACED.entry(self.context, self._next))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        saved = _PACED.saved(key, value)
        if _PACED.is_own(self.context, saved):
            self._next = saved.value


def _jetspark_job(spark: Any, workload: Workload, source: Any, sink: Any, root: str) -> Job:
    """source -> classify (map_using_model_p, the model's path on ordinal 1) -> sink, started
    exactly-once on the run's SparkEngine, in the execution mode it picks."""
    engine = spark.engine
    models = f"inference-bench-models-{root.rsplit('/', 1)[-1]}"
    engine.get_list(models).append(workload.reference)
    dag = DAG("inference-bench")
    events = dag.new_vertex("events", source, local_parallelism=1)
    references = dag.new_vertex("models", read_list_p(models), local_parallelism=1)
    classify = dag.new_vertex(
        "classify",
        map_using_model_p(example().load_model, example().predict_batch),
        local_parallelism=1,
    )
    out = dag.new_vertex("sink", sink, local_parallelism=1)
    dag.edge(between(events, classify))
    dag.edge(from_(references).to(classify, 1).distributed().broadcast())
    dag.edge(between(classify, out))
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=SNAPSHOT_INTERVAL_MILLIS,
    )
    return engine.new_job(
        dag, config, snapshot_store=DirectorySnapshotStore(str(Path(root) / "snapshots"))
    )


def _wait_for(condition: Callable[[], bool], job: Job | None = None) -> None:
    """Waits until `condition()`; fails if `job` ended first, or after 10 minutes."""
    deadline = time.monotonic() + 600
    while not condition():
        if (job is not None and job.status.is_terminal) or time.monotonic() > deadline:
            if job is not None:
                job.join(0)
            raise RuntimeError("the benchmark's job or query ended or stalled before it ran")
        time.sleep(0.05)


def _classified(job: Job) -> int:
    return sum(p.received_count.get(0, 0) for p in job.metrics.of_vertex("classify"))


def jetspark_rate(spark: Any, workload: Workload, seconds: float) -> tuple[float, str]:
    """Events per second jetspark classifies from an endless journal, once the first events
    went through (start-up out), over `seconds`; and the job's execution mode."""
    with tempfile.TemporaryDirectory(prefix="jetspark-bench-infer-") as root:
        source = stream_journal_p(workload.events)
        job = _jetspark_job(spark, workload, source, noop_p(), root)
        with cancelled_on_exit(job):
            _wait_for(lambda: _classified(job) > 0, job)
            started, before = time.monotonic(), _classified(job)
            time.sleep(seconds)
            rate = (_classified(job) - before) / (time.monotonic() - started)
        return rate, job.metrics.execution_mode


CAUGHT_UP_SECONDS = 2.0
"""A system is caught up with the stream once it is less than this much of it behind."""
SETTLE_SECONDS = 5.0
"""How long each system runs on after it caught up before the measured span starts: the
backlog of its start-up is worked off by then (without it, a system with a latency of a few
milliseconds still shows its last second of backlog as its p99)."""


def jetspark_latencies(spark: Any, workload: Workload, seconds: float) -> tuple[list[float], str]:
    """Latencies (s) of the events due in the `seconds` after the job caught up with the
    stream, at LATENCY_RATE events/s; and the job's execution mode."""
    with tempfile.TemporaryDirectory(prefix="jetspark-bench-latency-") as root:
        events, pace = workload.events, Pace(time.time(), LATENCY_RATE)

        def source() -> PacedEventsP:
            return PacedEventsP(events, pace)

        published = Latencies(Path(root, "out"))
        published.directory.mkdir()
        directory = str(published.directory)
        sink = ProcessorMetaSupplier.of(lambda: LatencyLinesP(directory, pace))
        job = _jetspark_job(spark, workload, source, sink, root)
        with cancelled_on_exit(job):
            behind = CAUGHT_UP_SECONDS * LATENCY_RATE

            def caught_up() -> bool:
                return _classified(job) >= pace.rate * (time.time() - pace.start) - behind

            _wait_for(caught_up, job)
            time.sleep(SETTLE_SECONDS)
            window = (time.time(), time.time() + seconds)
            _wait_for(lambda: published.refresh() >= window[1], job)  # written past it
        return published.within(*window), job.metrics.execution_mode


class LatencyLinesP(AbstractProcessor):
    """Row 14c's jetspark sink: a `due latency` line per prediction, its latency taken as it
    arrives (as Structured Streaming's foreach writer takes it), a file per processor, flushed
    after every inbox. Non-cooperative (file writes)."""

    def __init__(self, directory: str, pace: Pace) -> None:
        super().__init__()
        self._directory, self._pace = directory, pace
        self._file: Any = None

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: Any, context: Any) -> None:
        super().init(outbox, context)
        name = f"{self._directory}/part-{context.global_processor_index}-{os.getpid()}"
        self._file = open(name, "a", encoding="ascii")  # noqa: SIM115

    def process(self, ordinal: int, inbox: Any) -> None:
        line = self._pace.latency_line
        self._file.write("".join(line(prediction) + "\n" for prediction in drain(inbox)))
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class Latencies:
    """The `due latency` lines of the files in `directory`, read as they grow (whole lines
    only: a file may be read while it is written)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._offsets: dict[Path, int] = {}
        self._pairs: list[tuple[float, float]] = []

    def refresh(self) -> float:
        """Reads the lines written since the last call; returns the latest due time so far."""
        for path in sorted(self.directory.glob("part-*")):
            with path.open("rb") as file:
                file.seek(self._offsets.get(path, 0))
                data = file.read()
            whole = data[: data.rfind(b"\n") + 1]
            self._offsets[path] = self._offsets.get(path, 0) + len(whole)
            self._pairs += [
                (float(due), float(latency))
                for due, latency in (line.split() for line in whole.decode().splitlines())
            ]
        return max((due for due, _ in self._pairs), default=0.0)

    def within(self, start: float, end: float) -> list[float]:
        """The latencies of the events due from `start` to `end`."""
        self.refresh()
        return [latency for due, latency in self._pairs if start <= due <= end]


def _predict_udf(workload: Workload) -> Any:
    """predict_batch_udf over the `value` column: the digit value mod 1,797, classified."""
    from pyspark.ml.functions import predict_batch_udf
    from pyspark.sql.types import IntegerType

    model, pixels = workload.model, workload.events.pixels

    def make_predict_fn() -> Callable[[np.ndarray], np.ndarray]:
        def predict(values: np.ndarray) -> np.ndarray:
            return model.predict(pixels[values % len(pixels)]).astype(np.int32)

        return predict

    return predict_batch_udf(make_predict_fn, return_type=IntegerType(), batch_size=MAX_BATCH_SIZE)


def _rate_rows(spark: Any, source: str, **options: int) -> Any:
    """The streaming rows of one of Spark's rate sources over two partitions, on the run's
    session with as many shuffle partitions as cores."""
    reader = _tuned_session(spark).readStream.format(source).option("numPartitions", 2)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def structured_streaming_rate(spark: Any, workload: Workload, seconds: float) -> float:
    """Rows per second of rate-micro-batch -> predict_batch_udf -> noop (first batch out)."""
    from pyspark.sql import functions as f

    predict = _predict_udf(workload)
    with tempfile.TemporaryDirectory(prefix="jetspark-bench-sss-infer-") as checkpoint:
        rows = _rate_rows(spark, "rate-micro-batch", rowsPerBatch=ROWS_PER_BATCH)
        return _query_rate(
            rows.select(predict(f.col("value")).alias("digit")), "append", checkpoint, seconds
        )


class LatencyWriter:
    """Structured Streaming's foreach sink of row 14c: `due latency` lines, a file per
    partition and epoch."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self._file = open(f"{self.directory}/part-{partition_id}-{epoch_id}", "w")  # noqa: SIM115
        return True

    def process(self, row: Any) -> None:
        self._file.write(f"{row.due} {time.time() - row.due}\n")

    def close(self, error: BaseException | None) -> None:
        self._file.close()


def structured_streaming_latencies(spark: Any, workload: Workload, seconds: float) -> list[float]:
    """Latencies (s) of the rate source's rows (due at their timestamp) through
    predict_batch_udf to a foreach writer, at LATENCY_RATE rows/s, due in the `seconds` after
    it caught up with the stream (a batch of under CAUGHT_UP_SECONDS of rows), as for
    jetspark."""
    from pyspark.sql import functions as f

    predict = _predict_udf(workload)
    with tempfile.TemporaryDirectory(prefix="jetspark-bench-sss-latency-") as root:
        rows = _rate_rows(spark, "rate", rowsPerSecond=LATENCY_RATE).select(
            f.col("timestamp").cast("double").alias("due"), predict(f.col("value")).alias("digit")
        )
        query = (
            rows.writeStream.foreach(LatencyWriter(root))
            .option("checkpointLocation", root + "/checkpoint")
            .trigger(processingTime="0 seconds")
            .start()
        )
        try:
            behind = CAUGHT_UP_SECONDS * LATENCY_RATE
            _wait_for(lambda: 0 < (query.lastProgress or {}).get("numInputRows", 0) < behind)
            time.sleep(SETTLE_SECONDS)
            window = (time.time(), time.time() + seconds)
            time.sleep(seconds)
            last = query.lastProgress["batchId"]
            _wait_for(lambda: query.lastProgress["batchId"] >= last + 2)  # one began after it
        finally:
            query.stop()
        return Latencies(Path(root)).within(*window)


def check_spark_outputs(spark: Any, workload: Workload) -> None:
    """Both Spark systems classify digits 0..CHECKED-1 as numpy does (bounded runs)."""
    from pyspark.sql import functions as f

    expected = workload.expected(CHECKED)
    frame = _tuned_session(spark).range(CHECKED, numPartitions=2)
    rows = frame.select("id", _predict_udf(workload)(f.col("id")).alias("digit")).collect()
    if [digit for _, digit in sorted(rows)] != expected:
        raise AssertionError("14b: predict_batch_udf's predictions differ from numpy's")
    engine = spark.engine
    engine.get_list("inference-check-models").append(workload.reference)
    engine.get_list("inference-check").clear()
    dag = DAG("inference-check")
    events = dag.new_vertex("events", read_journal_p(workload.events, count=CHECKED))
    models = dag.new_vertex("models", read_list_p("inference-check-models"), local_parallelism=1)
    classify = dag.new_vertex(
        "classify", map_using_model_p(example().load_model, example().predict_batch)
    )
    sink = dag.new_vertex("sink", write_list_p("inference-check"))
    dag.edge(between(events, classify)).edge(between(classify, sink))
    dag.edge(from_(models).to(classify, 1).distributed().broadcast().priority(-1))
    engine.new_job(dag).join()
    predicted = sorted((n, p) for n, _, p, _ in engine.get_list("inference-check"))
    if [p for _, p in predicted] != expected:
        raise AssertionError("14b: jetspark's predictions differ from numpy's")


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def inference(spark: Any, local_items: int, seconds: float, rounds: int) -> list[Row]:
    """Rows 14a-c (module docstring), `rounds` times each."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(example())  # for the baseline's UDF and foreach sink
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with tempfile.TemporaryDirectory(prefix="jetspark-bench-model-") as directory:
        workload = Workload(Path(directory))
        rows = [batched_vs_per_item(workload, local_items, rounds)]
        try:
            import pandas  # noqa: F401
            import pyarrow  # noqa: F401
        except ImportError:
            print("[bench] rows 14b-c left out: predict_batch_udf needs the bench extra")
            return rows
        check_spark_outputs(spark, workload)
        jet_rates, spark_rates, jet_p99, spark_p99 = [], [], [], []
        jet_latencies, spark_latencies, modes = [], [], set()
        for _ in range(rounds):
            rate, mode = jetspark_rate(spark, workload, seconds)
            jet_rates.append(rate)
            modes.add(mode)
            spark_rates.append(structured_streaming_rate(spark, workload, seconds))
            jet, mode = jetspark_latencies(spark, workload, seconds)
            modes.add(mode)
            sss = structured_streaming_latencies(spark, workload, seconds)
            jet_p99.append(_p99(jet))
            spark_p99.append(_p99(sss))
            jet_latencies += jet
            spark_latencies += sss
    rows.append(
        Row.compare(
            "14b",
            "digits stream classified on Spark local[2]: jetspark map_using_model_p "
            "exactly-once vs Structured Streaming predict_batch_udf, rate-micro-batch",
            "rows/s",
            Samples(tuple(jet_rates)),
            Samples(tuple(spark_rates)),
            goal=Goal(">=", 1.0),
            extra={"execution_mode": sorted(modes)},
        )
    )
    rows.append(
        Row.compare(
            "14c",
            f"same, {LATENCY_RATE:,} events/s: p99 latency from due to sink, jetspark vs "
            "Structured Streaming (rate source, foreach sink)",
            "s",
            Samples(tuple(jet_p99)),
            Samples(tuple(spark_p99)),
            goal=Goal("<=", 0.1),
            extra={
                "jetspark_p50_seconds": statistics.median(jet_latencies),
                "baseline_p50_seconds": statistics.median(spark_latencies),
                "events_measured": [len(jet_latencies), len(spark_latencies)],
            },
        )
    )
    return rows
