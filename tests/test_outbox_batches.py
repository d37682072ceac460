"""Batches through the outbox: `offer_items`, `room`, `is_plain_batch`, and the processors that
emit batches with them (FlatMapP and FlatMapper, SourceP) when the runtime's outbox is small.

TestSupport drives processors through TestOutbox and TestInbox, which take the item-by-item
paths; these tests drive the batch paths with the runtime's own TaskletOutbox and inbox.
"""

from __future__ import annotations

from typing import Any

import pytest

from jetspark.core.errors import ProcessorContractError
from jetspark.core.inbox import ArrayDequeInbox
from jetspark.core.outbox import OutboxImpl, is_plain_batch
from jetspark.core.processor import Processor
from jetspark.core.runtime.outbox import TaskletOutbox
from jetspark.core.test_support import TestProcessorContext
from jetspark.core.traversers import traverse_items
from jetspark.core.watermark import Watermark
from jetspark.processors import flat_map_p
from jetspark.processors.sources import SourceP


@pytest.mark.parametrize("outbox_type", [OutboxImpl, TaskletOutbox])
def test_offer_items_takes_what_fits_and_the_refused_item_is_owed(outbox_type: type) -> None:
    outbox = outbox_type([3]) if outbox_type is OutboxImpl else outbox_type([3], "p#0")
    assert outbox.offer_items([1, 2, 3, 4, 5], 1) == 4
    assert list(outbox.buckets[0]) == [2, 3, 4]
    assert outbox.room() == 0


def test_after_a_refused_offer_offer_items_starts_with_the_refused_item() -> None:
    outbox = TaskletOutbox([1], "p#0")
    assert outbox.offer("a") and not outbox.offer("b")
    outbox.buckets[0].clear()
    with pytest.raises(ProcessorContractError):
        outbox.offer_items(["c"], 0)
    assert outbox.offer_items(["b", "c"], 0) == 1


def test_room_is_the_smallest_bucket_room_and_nil_while_an_item_is_owed() -> None:
    outbox = TaskletOutbox([4, 2], "p#0")
    assert outbox.room() == 1  # no item measured yet: an empty bucket takes one, whatever its size
    assert outbox.offer("x", 0) and outbox.offer("x2", 0)  # the second is sampled: small items
    assert outbox.room() == 1
    assert outbox.offer("y", 1) and outbox.offer("y2", 1)
    outbox.buckets[0].pop()
    outbox.buckets[1].pop()
    assert outbox.room() == 1
    assert outbox.offer("z") and outbox.room() == 0
    assert not outbox.offer("w")
    outbox.buckets[1].clear()
    assert outbox.room() == 0  # "w" is owed to bucket 1 first


@pytest.mark.parametrize(
    ("items", "plain"),
    [
        ([], True),
        (["a", "b"], True),
        (["a", 1, 2.5, ("k", 1)], True),
        ([("k", 1), ("l", 2)], True),
        (["a", None], False),
        ([None, "a"], False),
        (["a", Watermark(3)], False),
        ([1, Watermark(3)], False),
    ],
)
def test_is_plain_batch(items: list[Any], plain: bool) -> None:
    assert is_plain_batch(items) is plain


def _drive(processor: Processor, items: list[Any], capacity: int) -> tuple[list[Any], list[int]]:
    """Feeds `items` to the processor through the runtime's inbox and a TaskletOutbox of
    `capacity`, draining the outbox after every call; returns what came out, and the inbox's
    length after each call (items leave it only once all their output went out)."""
    outbox = TaskletOutbox([capacity], "flat#0")
    processor.init(outbox, TestProcessorContext())
    inbox = ArrayDequeInbox(items)
    out: list[Any] = []
    lengths = []
    while inbox.queue:
        processor.process(0, inbox)
        lengths.append(len(inbox.queue))
        drained = list(outbox.buckets[0])
        for position, watermark in reversed(outbox.marks[0]):
            drained.insert(position, watermark)
        out += drained
        outbox.buckets[0].clear()
        outbox.marks[0].clear()
    return out, lengths


def _explode(x: int) -> Any:
    """Lists of every length (bigger than the outbox too), tuples, None, traversers, None items."""
    if x % 5 == 0:
        return None
    if x % 5 == 1:
        return traverse_items(f"t{x}")
    if x % 5 == 2:
        return (x, None, x)
    return [x] * x


@pytest.mark.parametrize("capacity", [1, 2, 3, 7, 1024])
def test_flat_map_p_emits_every_result_in_order_whatever_the_outbox_room(capacity: int) -> None:
    items = list(range(1, 30))
    out, lengths = _drive(flat_map_p(_explode)(), items, capacity)
    expected = [y for x in items for y in (_explode(x) or ()) if y is not None]
    assert out == expected
    assert lengths == sorted(lengths, reverse=True)


def test_flat_map_p_sends_a_watermark_in_a_result_as_a_watermark() -> None:
    out, _ = _drive(flat_map_p(lambda x: ["a", Watermark(x), "b"])(), [1], 1024)
    assert out == ["a", Watermark(1), "b"]


def test_flat_map_p_calls_its_function_once_per_item() -> None:
    calls: list[int] = []

    def twice(x: int) -> list[int]:
        calls.append(x)
        return [x, x]

    out, _ = _drive(flat_map_p(twice)(), list(range(50)), 3)
    assert calls == list(range(50))
    assert out == [x for x in range(50) for _ in range(2)]


@pytest.mark.parametrize("capacity", [1, 5, 300])
def test_source_p_emits_its_items_in_batches_and_counts_skipped_nones(capacity: int) -> None:
    items = [*range(600), None, *range(600, 700)]
    source = SourceP(lambda context: iter(items))
    outbox = TaskletOutbox([capacity], "source#0")
    source.init(outbox, TestProcessorContext())
    out: list[Any] = []
    while not source.complete():
        out += outbox.buckets[0]
        outbox.buckets[0].clear()
    out += outbox.buckets[0]
    assert out == list(range(700))
    assert source._offset == len(items)


def test_source_p_restored_mid_batch_resumes_after_what_it_emitted() -> None:
    def numbers(context: Any) -> range:
        return range(1000)

    first, context = SourceP(numbers), TestProcessorContext()
    outbox = TaskletOutbox([300], "source#0")
    first.init(outbox, context)
    assert not first.complete()
    emitted = list(outbox.buckets[0])
    offset = first._offset  # type: ignore[attr-defined]
    assert offset == len(emitted) == 300
    second = SourceP(numbers)
    second._offset = offset  # type: ignore[attr-defined]
    rest = TaskletOutbox([1024], "source#0")
    second.init(rest, context)
    assert second.complete()
    assert emitted + list(rest.buckets[0]) == list(range(1000))
