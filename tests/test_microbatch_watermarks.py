"""Watermarks across micro-batches: a processor with two inputs, one of which goes quiet once
its events reached 30,000, coalesces its watermark to 30,000 when the other input gets there,
on LocalEngine as in micro-batches (where each batch builds the processors again: without the
queues' last watermarks carried from batch to batch, the quiet input held it back for good).

And a source that emits a watermark itself before each item (as stream_kafka_p does with an
event-time policy) is not asked to complete() while its outbox holds output the queue downstream
has no room for: a source that had handed all it read to the outbox would poll for more input on
every such call (stream_kafka_p waits 50 ms in a micro-batch) while the next processor takes a
watermark at a time, and the batch crawled on for minutes."""

from __future__ import annotations

import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from microbatch_jobs import guaranteed

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    JobCancelledError,
    LocalEngine,
)
from jetspark.core.context import Context
from jetspark.core.outbox import Outbox
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.core.suppliers import ProcessorMetaSupplier, reads_fixed_ranges, unbounded
from jetspark.core.watermark import Watermark
from jetspark.edges import between, from_
from jetspark.processors import (
    aggregate_to_sliding_window_p,
    insert_watermarks_p,
    map_p,
    stream_journal_p,
    write_list_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.watermark_policies import limiting_lag
from jetspark.processors.windowing import TimestampKind, sliding_window_policy

FAST = [(t, "fast") for t in range(0, 30_001, 100)]
"""Events of the input that reaches 30,000 over many batches (50 events per batch)."""
SLOW = [(10_000, "slow"), (20_000, "slow"), (30_000, "slow")]
"""Events of the input that reaches 30,000 in the first batch, then stays quiet."""


class TwoInputs(AbstractProcessor):
    """Emits ("fast", time) for each event of ordinal 0 and ("wm", time) for each coalesced
    watermark it receives."""

    def try_process0(self, event: Any) -> bool:
        return self.try_emit(("fast", event[0]))

    def try_process1(self, event: Any) -> bool:
        return True

    def try_process_watermark(self, watermark: Watermark) -> bool:
        return self.try_emit(("wm", watermark.timestamp))


def _time(event: tuple[int, str]) -> int:
    return event[0]


def two_inputs_dag() -> DAG:
    dag = DAG("two-inputs")
    fast = dag.new_vertex("fast", stream_journal_p("fast", partition_count=1))
    slow = dag.new_vertex("slow", stream_journal_p("slow", partition_count=1))
    fast_wm = dag.new_vertex("fast-wm", insert_watermarks_p(_time, limiting_lag(0)))
    slow_wm = dag.new_vertex("slow-wm", insert_watermarks_p(_time, limiting_lag(0)))
    both = dag.new_vertex("both", TwoInputs)
    sink = dag.new_vertex("sink", write_list_p("seen"))
    dag.edge(between(fast, fast_wm)).edge(between(slow, slow_wm))
    dag.edge(between(fast_wm, both)).edge(from_(slow_wm).to(both, 1))
    dag.edge(between(both, sink))
    return dag


@pytest.fixture(params=["local", pytest.param("micro_batch", marks=pytest.mark.spark)])
def engine(request: pytest.FixtureRequest) -> Any:
    if request.param == "local":
        return LocalEngine(1, snapshot_clock=jobs.TickClock())
    from jetspark.core.spark import SparkEngine

    context = request.getfixturevalue("spark_engine").context
    return SparkEngine(context, members=1, batch_items=50)


def test_a_quiet_input_does_not_hold_the_coalesced_watermark_back(engine: Any) -> None:
    engine.get_list("fast").extend(FAST)
    engine.get_list("slow").extend(SLOW)
    job = engine.new_job(two_inputs_dag(), guaranteed())
    seen = engine.get_list("seen")
    deadline = time.monotonic() + 300
    while sum(1 for kind, _ in seen if kind == "fast") < len(FAST):  # every event processed
        assert not job.status.is_terminal and time.monotonic() < deadline, job
        time.sleep(0.05)
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(120)
    watermarks = [value for kind, value in seen if kind == "wm"]
    assert max(watermarks) == 30_000
    assert watermarks == sorted(set(watermarks))  # rising, never the same one twice


EVENTS = 3_000
"""Events of WatermarkingSource: 750 per processor on 2 members at local parallelism 2, which
with a watermark before each are more than the queue to the next processor holds (1,024)."""
READ = 1_024
"""Events WatermarkingSource reads per call, as a consumer's poll returns a batch of records."""


class WatermarkingSource(AbstractProcessor):
    """Emits Watermark(n), then the event (n, n % 7), for its share of range(EVENTS): it reads
    up to READ events per `complete()` into a list of its own and offers that to the outbox, as
    stream_kafka_p does. A call with nothing left to read or emit stands for a poll that waits
    for more input; on every save the processor appends how many it made to a file of its own
    in `directory`. Its snapshot holds the next event to emit."""

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._pending: deque[Any] = deque()
        self._idle_calls = 0

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._index = context.global_processor_index
        self._step = context.total_parallelism
        self._next = self._read = self._index

    def complete(self) -> bool:
        if not self._flush():
            return False
        while self._read < EVENTS and len(self._pending) < 2 * READ:
            self._pending.extend((Watermark(self._read), (self._read, self._read % 7)))
            self._read += self._step
        if not self._pending:
            self._idle_calls += 1
        self._flush()
        return False

    def _flush(self) -> bool:
        pending = self._pending
        while pending:
            if not self.try_emit(pending[0]):
                return False
            entry = pending.popleft()
            if type(entry) is not Watermark:
                self._next = entry[0] + self._step
        return True

    def save_to_snapshot(self) -> bool:
        with open(Path(self._directory) / f"idle-calls-{self._index}", "a") as calls:
            calls.write(f"{self._idle_calls}\n")
        self._idle_calls = 0
        return self.try_emit_to_snapshot(broadcast_key(("next", self._index)), self._next)

    def restore_from_snapshot_entry(self, key: Any, value: int) -> None:
        if key.key == ("next", self._index):
            self._next = self._read = value


def _event_time(event: tuple[int, int]) -> int:
    return event[0]


def _event_key(event: tuple[int, int]) -> int:
    return event[1]


def _unchanged(event: tuple[int, int]) -> tuple[int, int]:
    return event


def _window(result: Any) -> tuple[int, int, int]:
    return (result.end, result.key, result.value)


def watermarking_dag(directory: str, fixed_ranges: bool) -> DAG:
    """WatermarkingSource -> map -> count per key in tumbling windows of 100 -> "windows"."""
    supplier = unbounded(ProcessorMetaSupplier.of(lambda: WatermarkingSource(directory)))
    if fixed_ranges:  # unbudgeted in micro-batches, as stream_kafka_p
        reads_fixed_ranges(supplier)
    dag = DAG("watermarking-source")
    source = dag.new_vertex("source", supplier).local_parallelism(2)
    unchanged = dag.new_vertex("map", map_p(_unchanged))
    windows = dag.new_vertex(
        "windows",
        aggregate_to_sliding_window_p(
            _event_key,
            _event_time,
            TimestampKind.EVENT,
            sliding_window_policy(100, 100),
            counting(),
        ),
    )
    results = dag.new_vertex("results", map_p(_window))
    sink = dag.new_vertex("sink", write_list_p("windows"))
    dag.edge(between(source, unchanged))
    dag.edge(between(unchanged, windows).distributed().partitioned(_event_key))
    dag.edge(between(windows, results)).edge(between(results, sink))
    return dag


@pytest.mark.spark
@pytest.mark.parametrize("fixed_ranges", [False, True], ids=["budgeted", "fixed-ranges"])
def test_a_source_is_not_asked_to_complete_while_its_watermarked_output_waits(
    spark_engine: Any, tmp_path: Path, fixed_ranges: bool
) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2)
    store = DirectorySnapshotStore(str(tmp_path / "snapshots"))
    job = engine.new_job(
        watermarking_dag(str(tmp_path), fixed_ranges), guaranteed(), snapshot_store=store
    )
    counts = Counter((n // 100 * 100 + 100, n % 7) for n in range(EVENTS))
    # the last windows stay open: no watermark reaches EVENTS
    expected = sorted((end, key, count) for (end, key), count in counts.items() if end < EVENTS)
    seen = engine.get_list("windows")
    deadline = time.monotonic() + 300
    while len(seen) < len(expected):
        assert not job.status.is_terminal and time.monotonic() < deadline, job
        time.sleep(0.05)
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(120)
    assert sorted(seen) == expected
    idle_calls = [
        int(calls) for path in tmp_path.glob("idle-calls-*") for calls in path.read_text().split()
    ]
    # one call per batch finds nothing to read, and ends the source's input for the batch;
    # before, complete() was called all the while the map took the 1,500 entries in its
    # outbox and queue one watermark at a time: about 700 calls, each a poll waiting for input
    assert idle_calls and max(idle_calls) == 1, idle_calls
