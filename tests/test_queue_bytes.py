"""Issue 45: the queues between the processors of one member, and the outbox buckets feeding them,
are bounded in estimated bytes as well as in items (core/runtime/queue.py, outbox.py, sizes.py).

Large items fill the byte bounds, small ones the item counts; an item larger than a bound still
passes, alone; 80 items of 20 MB through a local edge keep the member's peak resident set within
the bounds (SparkEngine: test_queue_bytes_spark.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from big_items import big_items_dag, check_report

from jetspark.core import DAG, JobConfig, LocalEngine, Watermark
from jetspark.core.runtime import (
    InboundStream,
    JobPlan,
    Queue,
    TaskletOutbox,
    WatermarkCoalescer,
    build_member,
    plan_job,
)
from jetspark.core.runtime.queue import DEFAULT_QUEUE_BYTES
from jetspark.core.runtime.sizes import estimated_size, updated_estimate
from jetspark.core.test_support import TestProcessorContext
from jetspark.edges import between
from jetspark.edges.routing import SingleTargetRouter
from jetspark.processors import generate_p, write_list_p
from jetspark.processors.sources import SourceP

KB = 1 << 10


def _blob(size: int, fill: int = 0) -> bytes:
    return bytes([fill]) * size


def _bytes_in(chunks: Any) -> int:
    return sum(len(x) for chunk in chunks if type(chunk) is list for x in chunk)


# ------------------------------------------------------------------ the estimate


@dataclass
class _Record:
    key: str
    payload: bytes


@pytest.mark.parametrize(
    ("item", "at_least", "at_most"),
    [
        (_blob(100 * KB), 100 * KB, 101 * KB),
        ("x" * 50_000, 50_000, 51_000),
        ("ł" * 50_000, 100_000, 101_000),  # two bytes a character
        (bytearray(64 * KB), 64 * KB, 65 * KB),
        (memoryview(_blob(64 * KB)), 64 * KB, 65 * KB),
        (np.zeros(8192), 64 * KB, 65 * KB),
        (("key", _blob(1 << 20)), 1 << 20, (1 << 20) + 1024),
        ([_blob(KB)] * 100, 100 * KB, 110 * KB),  # eight sampled, scaled to a hundred
        ({"a": _blob(10 * KB), "b": _blob(10 * KB)}, 20 * KB, 21 * KB),
        (_Record("k", _blob(30 * KB)), 30 * KB, 31 * KB),
        (12345, 16, 64),
        (("word", 1), 16, 256),
    ],
)
def test_an_item_is_estimated_by_its_own_size_and_one_level_down(
    item: Any, at_least: int, at_most: int
) -> None:
    assert at_least <= estimated_size(item) <= at_most


def test_the_estimate_takes_a_large_item_at_once_and_comes_down_by_halves() -> None:
    large = updated_estimate(1, _blob(1 << 20))
    assert large > 1 << 20
    assert updated_estimate(large, "small") == large // 2
    assert updated_estimate(1, "small") == estimated_size("small")


# ------------------------------------------------------------------ the queue


def test_a_queue_of_small_items_is_bounded_by_its_capacity() -> None:
    queue = Queue(8, max_bytes=1 << 20)
    queue.push(list(range(5)))
    assert queue.room() == 3


def test_a_queue_takes_items_up_to_its_bytes() -> None:
    queue = Queue(100, max_bytes=10 * KB)
    queue.push([_blob(KB)])
    assert queue.room() == 8  # ten items of about 1 KB, one waiting (each has a header)
    queue.push([_blob(KB)] * 8)
    assert queue.room() == 0
    assert _bytes_in(queue.chunks) <= 10 * KB


def test_an_empty_queue_takes_one_chunk_whatever_its_bytes() -> None:
    queue = Queue(4, max_bytes=KB)
    assert queue.room() == 4
    queue.push([_blob(10 * KB), _blob(10 * KB)])
    assert queue.room() == 0
    stream = InboundStream(0, 0, [queue], WatermarkCoalescer(1), 0)
    assert stream.drain() == 2
    assert queue.room() == 4


def test_a_queue_full_of_bytes_still_counts_as_full_for_control_entries() -> None:
    queue = Queue(4, max_bytes=KB)
    queue.push([_blob(10 * KB)])
    assert queue.room() == 0  # a watermark waits too, until the consumer takes the item


# ------------------------------------------------------------------ the outbox


def _offer_all(outbox: TaskletOutbox, items: list[Any], start: int) -> int:
    """Offers `items[start:]` one by one until one is refused; the next position."""
    while start < len(items) and outbox.offer(items[start]):
        start += 1
    return start


def test_an_outbox_cannot_push_beyond_the_byte_bound() -> None:
    bound = 1 << 20
    outbox = TaskletOutbox([1024], "source#0", bound)
    queue = Queue(1024, bound)
    router = SingleTargetRouter([queue], 0)
    items = [_blob(100 * KB, i) for i in range(100)]
    position = 0
    for _ in range(5):  # nobody takes from the queue: the source is held back by bytes
        position = _offer_all(outbox, items, position)
        assert _bytes_in([outbox.buckets[0]]) <= bound
        outbox.drain_to([router])
        assert _bytes_in(queue.chunks) <= bound
    assert position == len(outbox.buckets[0]) + queue.size()
    assert position <= 2 * bound // (100 * KB)
    assert not outbox.offer(items[position])


def test_one_item_larger_than_the_bound_passes_when_the_queue_is_empty() -> None:
    outbox = TaskletOutbox([16], "source#0", max_bytes=KB)
    queue = Queue(16, max_bytes=KB)
    stream = InboundStream(0, 0, [queue], WatermarkCoalescer(1), 0)
    router = SingleTargetRouter([queue], 0)
    items = [_blob(64 * KB, i) for i in range(4)]
    received: list[bytes] = []
    position = 0
    while len(received) < len(items):
        position = _offer_all(outbox, items, position)
        assert len(outbox.buckets[0]) <= 1
        outbox.drain_to([router])
        assert queue.size() <= 1
        stream.drain()
        received += stream.inbox.queue
        stream.inbox.queue.clear()
    assert received == items


def test_the_outbox_of_several_edges_bounds_each_bucket() -> None:
    outbox = TaskletOutbox([1024, 1024], "source#0", max_bytes=256 * KB)
    items = [_blob(32 * KB, i) for i in range(64)]
    taken = _offer_all(outbox, items, 0)
    assert 1 <= taken <= 8
    assert all(_bytes_in([bucket]) <= 256 * KB for bucket in outbox.buckets)


def test_offer_items_takes_the_whole_room_it_promised() -> None:
    outbox = TaskletOutbox([1024], "flat#0", max_bytes=64 * KB)
    assert outbox.offer(_blob(KB)) and outbox.offer(_blob(KB))  # the second one is sampled
    room = outbox.room()
    assert 50 <= room <= 64
    batch = [_blob(KB)] * room
    assert outbox.offer_items(batch, 0) == room
    assert outbox.room() == 0


def test_a_bucket_full_of_bytes_still_takes_watermarks() -> None:
    outbox = TaskletOutbox([4], "wm#0", max_bytes=KB)
    assert outbox.offer(_blob(10 * KB))
    assert not outbox.offer(_blob(10 * KB, 1))
    outbox.buckets[0].clear()  # as a drain would
    assert outbox.offer(_blob(10 * KB, 1))
    assert outbox.offer(Watermark(1)) and outbox.offer(Watermark(2))
    assert outbox.marks == [[[1, Watermark(1)], [1, Watermark(2)]]]


def test_small_items_fill_the_bucket_to_its_queue_size() -> None:
    outbox = TaskletOutbox([1024], "source#0")
    assert _offer_all(outbox, list(range(5000)), 0) == 1024
    outbox.buckets[0].clear()
    assert outbox.offer_items(list(range(1024, 5000)), 0) == 1024  # the refused item first


def test_source_p_reads_ahead_no_more_than_its_outbox_takes() -> None:
    made: list[int] = []

    def blobs(context: Any) -> Any:
        for i in range(100):
            made.append(i)
            yield _blob(64 * KB, i)

    source = SourceP(blobs)
    source.init(TaskletOutbox([1024], "source#0", max_bytes=128 * KB), TestProcessorContext())
    assert not source.complete()
    assert len(made) <= 4


# ------------------------------------------------------------------ the configuration


def _two_vertex_dag() -> DAG:
    dag = DAG("two")
    source = dag.new_vertex("source", generate_p(3)).local_parallelism(1)
    sink = dag.new_vertex("sink", write_list_p("out")).local_parallelism(1)
    dag.edge(between(source, sink))
    return dag


def test_the_plan_carries_the_byte_bound_into_every_queue_and_outbox() -> None:
    plan: JobPlan = plan_job(_two_vertex_dag(), JobConfig(), 1, 1, queue_bytes=12345)
    runtime = build_member(plan)
    source, sink = runtime.tasklets
    assert source.outbox.max_bytes == 12345  # type: ignore[attr-defined]
    assert [q.max_bytes for q in sink.streams[0].queues] == [12345]  # type: ignore[attr-defined]
    assert plan_job(_two_vertex_dag(), plan.config, 1, 1).queue_bytes == DEFAULT_QUEUE_BYTES


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_local_engine_refuses_a_byte_bound_below_one(bad: Any) -> None:
    with pytest.raises(ValueError, match="queue_max_bytes"):
        LocalEngine(queue_max_bytes=bad)


# ------------------------------------------------------------------ the job


def test_eighty_items_of_twenty_megabytes_keep_local_engines_peak_rss_within_the_bounds() -> None:
    engine = LocalEngine()
    engine.new_job(big_items_dag("report")).join(120)
    check_report(engine.get_list("report"), DEFAULT_QUEUE_BYTES)
