"""Unit tests of the queue, the inbound stream and the tasklet outbox."""

from __future__ import annotations

import pickle

import pytest

from jetspark.core import IDLE_MESSAGE, ProcessorContractError, Watermark
from jetspark.core.runtime import (
    DONE_ITEM,
    InboundStream,
    Queue,
    TaskletOutbox,
    WatermarkCoalescer,
)
from jetspark.edges.routing import SingleTargetRouter


def test_queue_counts_items_and_control_entries_against_capacity() -> None:
    queue = Queue(4)
    queue.push([1, 2, 3])
    assert (queue.size(), queue.room()) == (3, 1)
    queue.push_control(Watermark(5))
    assert queue.room() == 0
    assert list(queue.chunks) == [[1, 2, 3], Watermark(5)]


def test_queue_rejects_a_non_positive_capacity() -> None:
    with pytest.raises(ValueError, match="capacity"):
        Queue(0)


def test_done_item_survives_pickling_as_the_same_object() -> None:
    assert pickle.loads(pickle.dumps(DONE_ITEM)) is DONE_ITEM


def _stream(*queues: Queue) -> tuple[InboundStream, WatermarkCoalescer]:
    coalescer = WatermarkCoalescer(len(queues))
    return InboundStream(0, 0, list(queues), coalescer, 0), coalescer


def test_stream_moves_whole_chunks_round_robin_and_counts_them() -> None:
    a, b = Queue(10), Queue(10)
    a.push([1, 2])
    b.push([3])
    a.push([4])
    stream, _ = _stream(a, b)
    assert stream.drain() == 4
    assert list(stream.inbox.queue) == [1, 2, 4, 3]
    assert (a.size(), b.size()) == (0, 0)
    assert (stream.received_count, stream.received_batches) == (4, 1)


def test_stream_stops_a_queue_at_its_watermark_and_the_drain_at_a_new_coalesced_one() -> None:
    a, b = Queue(10), Queue(10)
    a.push([1])
    a.push_control(Watermark(10))
    a.push([2])
    b.push([3])
    b.push_control(Watermark(20))
    b.push([4])
    stream, coalescer = _stream(a, b)
    assert stream.drain() == 2  # a up to its watermark, b up to its watermark: min is now 10
    assert list(stream.inbox.queue) == [1, 3]
    assert coalescer.pending == Watermark(10)
    coalescer.pending = None
    stream.inbox.queue.clear()
    assert stream.drain() == 2
    assert list(stream.inbox.queue) == [2, 4]


def test_stream_is_done_when_every_queue_delivered_done_item() -> None:
    a, b = Queue(10), Queue(10)
    a.push([1])
    a.push_control(DONE_ITEM)
    stream, _ = _stream(a, b)
    stream.drain()
    assert not stream.done
    b.push_control(DONE_ITEM)
    stream.drain()
    assert stream.done


def test_data_from_an_idle_queue_makes_it_count_again() -> None:
    a, b = Queue(10), Queue(10)
    a.push_control(Watermark(5))
    b.push_control(IDLE_MESSAGE)
    stream, coalescer = _stream(a, b)
    stream.drain()
    assert coalescer.pending == Watermark(5)
    coalescer.pending = None
    b.push([1])
    stream.drain()
    assert coalescer.idle == [False, False]


class _Sink:
    """A channel with adjustable room that records what it receives."""

    def __init__(self, room: int = 100) -> None:
        self.entries: list[object] = []
        self.free = room

    def room(self) -> int:
        return self.free

    def push(self, chunk: list[object]) -> None:
        self.entries.extend(chunk)
        self.free -= len(chunk)

    def push_control(self, entry: object) -> None:
        self.entries.append(entry)
        self.free -= 1


def test_outbox_keeps_watermarks_in_place_between_items() -> None:
    outbox = TaskletOutbox([10], "vertex 'v' processor #0")
    sink = _Sink()
    for item in (1, 2, Watermark(5), 3, Watermark(6)):
        assert outbox.offer(item)
    assert outbox.buckets == [[1, 2, 3]]
    assert outbox.drain_to([SingleTargetRouter([sink], 0)]) == 5
    assert sink.entries == [1, 2, Watermark(5), 3, Watermark(6)]
    assert outbox.is_empty()
    assert outbox.emitted_count == [5]


def test_outbox_drain_stops_at_a_full_channel_and_resumes() -> None:
    outbox = TaskletOutbox([10], "p")
    sink = _Sink(room=2)
    for item in (1, 2, Watermark(5), 3):
        outbox.offer(item)
    router = SingleTargetRouter([sink], 0)
    assert outbox.drain_to([router]) == 2
    assert sink.entries == [1, 2]
    sink.free = 10
    assert outbox.drain_to([router]) == 2
    assert sink.entries == [1, 2, Watermark(5), 3]


def test_outbox_refuses_when_the_bucket_is_full_and_insists_on_the_same_item() -> None:
    outbox = TaskletOutbox([2], "vertex 'v' processor #3")
    assert outbox.offer("a") and outbox.offer("b")
    assert not outbox.offer("c")
    with pytest.raises(ProcessorContractError, match="vertex 'v' processor #3"):
        outbox.offer("d")
    outbox.buckets[0].clear()
    assert outbox.offer("c")


def test_outbox_to_several_ordinals_and_to_one() -> None:
    outbox = TaskletOutbox([5, 5], "p")
    assert outbox.offer("both")
    assert outbox.offer("second", 1)
    assert outbox.offer(Watermark(1), [0])
    assert outbox.buckets == [["both"], ["both", "second"]]
    assert outbox.marks == [[[1, Watermark(1)]], []]


def test_outbox_refuses_a_non_increasing_watermark_naming_the_processor() -> None:
    outbox = TaskletOutbox([5], "vertex 'wm' processor #2")
    assert outbox.offer(Watermark(10))
    assert outbox.offer(IDLE_MESSAGE)
    with pytest.raises(ProcessorContractError, match=r"vertex 'wm' processor #2 .* 10 .*after"):
        outbox.offer(Watermark(10))
