"""What the ported pipeline tests share (Jet's PipelineTestSupport and
PipelineStreamTestSupport): running a pipeline, waiting for a stream's output, and comparing
outputs as bags (multisets), since a distributed job emits in no particular order."""

from __future__ import annotations

import socketserver
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from jetspark.core import JobCancelledError
from jetspark.core.job import Job, JobStatus
from jetspark.core.pipeline import Pipeline, Sinks, Source, Sources
from jetspark.processors.journal import DEFAULT_JOURNAL_PARTITIONS

ITEM_COUNT = 256
"""Items per batch test (Jet: 1,000); even, as the rolling-aggregate tests need."""

STREAM_ITEM_COUNT = 128
"""Items per stream test (Jet: 16 per IMap partition)."""

MAX_LAG = STREAM_ITEM_COUNT // 2
"""The allowed lag of the windowing tests' timestamps (Jet: half the item count)."""

CLOSING_ITEMS = [16 * STREAM_ITEM_COUNT] * DEFAULT_JOURNAL_PARTITIONS
"""Appended after a windowing test's input: one item per journal partition, far in the future
of every timestamp, so every source processor's watermark closes every window of the input
(Jet's `closingItems`)."""

WAIT_SECONDS = 60.0
"""Bounds the wait for a stream's output: only a hang ever reaches it."""


def execute(engine: Any, pipeline: Pipeline) -> Job:
    """Runs a batch pipeline to its end (Jet's `execute()`)."""
    job = engine.new_job(pipeline)
    job.join(120)
    return job


def run_until(engine: Any, pipeline: Pipeline, sink: str, count: int) -> list[Any]:
    """Starts a streaming pipeline, waits until the list `sink` holds `count` items, cancels
    the job and returns the list's items (Jet's `assertTrueEventually` on the sink)."""
    job = engine.new_job(pipeline)
    wait_for(engine.get_list(sink), count, job)
    cancel(job)
    return list(engine.get_list(sink))


def wait_for(items: list[Any], count: int, job: Job) -> None:
    """Waits until `items` holds `count` items; fails if the job ends first or on a hang."""
    deadline = time.monotonic() + WAIT_SECONDS
    while len(items) < count:
        if job.status.is_terminal:
            job.join(1)  # raises the job's failure, if any
            raise AssertionError(f"the job ended with {len(items)} of {count} items")
        assert time.monotonic() < deadline, f"{len(items)} of {count} items in {WAIT_SECONDS} s"
        time.sleep(0.01)


def cancel(job: Job) -> None:
    """Cancels a streaming job and waits until it ended."""
    job.cancel()
    try:
        job.join(120)
    except JobCancelledError:
        return
    assert job.status is JobStatus.COMPLETED


EARLY_RESULTS_PERIOD = 200
"""Milliseconds between the early results of the early-results tests (Jet: 200)."""

EARLY_LAG = 32 * STREAM_ITEM_COUNT
"""An allowed lag that keeps every window of the input open, so only early results show
them (Jet's `streamStageFromList(input, EARLY_RESULTS_PERIOD)`)."""


def latest_results_until(
    engine: Any,
    pipeline: Pipeline,
    expected: dict[Any, Any],
    window_of: Callable[[Any], Any],
    value_of: Callable[[Any], Any],
    sink: str = "sink",
) -> list[Any]:
    """Starts a streaming pipeline, waits until the latest result of each window in the list
    `sink` (`window_of(result) -> value_of(result)`) is `expected`, cancels the job and
    returns every result (Jet's `streamToString(..., distinctKeyFn)` asserted eventually)."""
    job = engine.new_job(pipeline)
    results = engine.get_list(sink)
    deadline = time.monotonic() + WAIT_SECONDS
    latest: dict[Any, Any] = {}
    while latest != expected:
        assert not job.status.is_terminal, f"the job ended with {len(latest)} windows"
        assert time.monotonic() < deadline, (
            f"{len(latest)} of {len(expected)} windows in {WAIT_SECONDS} s, "
            f"wrong: {[(w, v) for w, v in latest.items() if expected.get(w) != v][:5]}"
        )
        time.sleep(0.02)
        latest = {window_of(result): value_of(result) for result in list(results)}
    cancel(job)
    return list(results)


def assert_same_bag(actual: Iterable[Any], expected: Iterable[Any]) -> None:
    """`actual` holds exactly the items of `expected`, each as many times, in any order."""
    actual, expected = list(actual), list(expected)
    try:
        missing = list((Counter(expected) - Counter(actual)).elements())
        unexpected = list((Counter(actual) - Counter(expected)).elements())
    except TypeError:  # unhashable items (lists, sets): match them one by one
        unexpected, missing = list(actual), []
        for item in expected:
            if item in unexpected:
                unexpected.remove(item)
            else:
                missing.append(item)
    if missing or unexpected:
        raise AssertionError(
            f"{len(missing)} missing, e.g. {missing[:5]}; "
            f"{len(unexpected)} unexpected, e.g. {unexpected[:5]}"
        )


def assert_stage_named(source: Source) -> None:
    """`set_name` names the stage of `source` and the vertex it plans to (Jet's `setName`)."""
    p = Pipeline.create()
    stage = p.draw_from(source)
    stage.set_name("my-stage")
    stage.drain_to(Sinks.list("sink"))
    assert stage.name == "my-stage"
    assert p.to_dag().get_vertex("my-stage") is not None


def assert_stage_parallelism_set(source: Source) -> None:
    """`set_local_parallelism` sets the local parallelism of the vertex the stage of `source`
    plans to (Jet's `setLocalParallelism`)."""
    p = Pipeline.create()
    stage = p.draw_from(source)
    stage.set_local_parallelism(10)
    stage.drain_to(Sinks.list("sink"))
    assert p.to_dag().get_vertex(stage.name).get_local_parallelism() == 10


def window_sums(items: list[int], size: int, slide: int) -> dict[tuple[int, int], int]:
    """(start, end) -> the sum of the items in [start, end) (each item its own timestamp),
    for every sliding window of `size` advancing by `slide` that holds an item."""
    sums: dict[tuple[int, int], int] = {}
    for item in items:
        first = item - item % slide - size + slide
        for start in range(first, item + 1, slide):
            sums[(start, start + size)] = sums.get((start, start + size), 0) + item
    return sums


def sequence(count: int) -> list[int]:
    """0, 1, ..., count - 1 (Jet's `sequence`)."""
    return list(range(count))


class WindowRun:
    """How a windowing test feeds its sources and runs its job.

    Streaming (LocalEngine): each source is a journal over an engine list, followed for ever,
    its input followed by CLOSING_ITEMS; the job runs until the sink holds the expected number
    of items, then it is cancelled. Bounded (SparkEngine): each source is the list read to its
    end; `add_timestamps` on it gives a stream stage that ends with the source, every window
    emitted then, and the job is joined.
    """

    def __init__(self, engine: Any, streaming: bool) -> None:
        self.engine = engine
        self.streaming = streaming

    def source(self, pipeline: Pipeline, name: str, items: list[Any]) -> Any:
        """The stage of the source `name` emitting `items`."""
        feed = self.engine.get_list(name)
        feed.extend(items)
        if self.streaming:
            feed.extend(CLOSING_ITEMS)
            return pipeline.draw_from(Sources.stream_journal(name))
        return pipeline.draw_from(Sources.list(name))

    def run(self, pipeline: Pipeline, expected_count: int, sink: str = "sink") -> list[Any]:
        """Runs the job until the list `sink` holds `expected_count` items (streaming) or to
        its end (bounded); the sink's items."""
        if self.streaming:
            return run_until(self.engine, pipeline, sink, expected_count)
        execute(self.engine, pipeline)
        return list(self.engine.get_list(sink))

    def run_expecting(self, pipeline: Pipeline, expected: list[Any], sink: str = "sink") -> None:
        """Runs the job and compares the sink's items with `expected`, as a bag."""
        assert_same_bag(self.run(pipeline, len(expected), sink), expected)


@contextmanager
def serving(server: socketserver.BaseServer) -> Iterator[None]:
    """Runs `server` on a thread of its own for the block, then shuts it down."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
