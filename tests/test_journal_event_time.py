"""A journal source with event time (`add_timestamps` right after it): it emits the watermarks
itself, one over all the partitions it reads (they are read in offset order, so they never
drift apart), marks itself idle when quiet and at once when it reads no partition, and resumes
from the lowest saved watermark after a restore; every clock injected."""

from __future__ import annotations

from typing import Any

import pytest
from test_processors_helpers import verify

from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext
from jetspark.core.watermark import IDLE_MESSAGE, Watermark
from jetspark.processors import read_journal_p, stream_journal_p
from jetspark.processors.event_time import EventTimePolicy
from jetspark.processors.watermark_policies import limiting_lag

pytestmark = pytest.mark.timeout(30)


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def policy(lag: int = 0, idle_timeout_ms: int = 0, clock: Clock | None = None) -> EventTimePolicy:
    return EventTimePolicy(
        _identity, limiting_lag(lag), idle_timeout_ms=idle_timeout_ms, clock=clock or Clock()
    )


def _identity(item: int) -> int:
    return item


def _until_ten(offset: int) -> int | None:
    return offset if offset < 10 else None


def test_one_watermark_over_the_partitions_before_the_item_that_moves_it() -> None:
    """Across every snapshot and restore the harness takes, as a bounded source."""
    supplier = read_journal_p(_identity, count=6, partition_count=3, event_time_policy=policy(1))
    expected: list[Any] = []
    for n in range(6):
        expected += [Watermark(n - 1), n]
    verify(supplier).expect_output(expected)


def test_a_processor_reading_no_partition_is_idle_at_once_even_without_idle_timeout() -> None:
    """It would otherwise hold every window downstream back for ever."""
    supplier = read_journal_p(_identity, count=4, partition_count=2, event_time_policy=policy())
    verify(supplier).total_parallelism(3).global_processor_index(2).expect_output([IDLE_MESSAGE])


def start(supplier: Any) -> tuple[Any, TestOutbox]:
    processor, outbox = supplier(), TestOutbox(100)
    processor.init(outbox, TestProcessorContext())
    return processor, outbox


def emitted(outbox: TestOutbox) -> list[Any]:
    items = list(outbox.buckets[0])
    outbox.buckets[0].clear()
    return items


def test_a_quiet_stream_journal_turns_idle_after_the_timeout_and_wakes_on_its_next_item() -> None:
    clock = Clock()
    feed: list[int] = [5]

    def item_at(offset: int) -> int | None:
        return feed[offset] if offset < len(feed) else None

    supplier = stream_journal_p(
        item_at, partition_count=2, event_time_policy=policy(0, idle_timeout_ms=50, clock=clock)
    )
    source, outbox = start(supplier)
    assert source.complete() is False and emitted(outbox) == [Watermark(5), 5]
    clock.now = 49
    assert source.complete() is False and emitted(outbox) == []
    clock.now = 50
    assert source.complete() is False and emitted(outbox) == [IDLE_MESSAGE]
    assert source.complete() is False and emitted(outbox) == [], "idle is said once"
    feed.append(7)
    assert source.complete() is False and emitted(outbox) == [Watermark(7), 7]


def test_a_restored_processor_resumes_from_the_lowest_watermark_of_its_partitions() -> None:
    """Two processors saved different watermarks; the one now reading all their partitions
    emits none below the lower one, and an item between them is not late."""
    entries = []
    for index, count in ((0, 10), (1, 4)):
        journal = stream_journal_p(
            lambda n, count=count: n if n < count else None,
            partition_count=2,
            event_time_policy=policy(),
        )
        processor, outbox = journal(), TestOutbox(100)
        context = TestProcessorContext().set_total_parallelism(2)
        processor.init(outbox, context.set_global_processor_index(index))
        processor.complete()
        processor.save_to_snapshot()
        entries += outbox.snapshot_bucket
    assert sorted(value for _, value in entries) == [(5, 3), (10, 8)]
    journal = stream_journal_p(_until_ten, partition_count=2, event_time_policy=policy())
    restored, outbox = start(journal)
    restored.restore_from_snapshot(TestInbox(entries))
    restored.finish_snapshot_restore()
    restored.complete()
    assert emitted(outbox) == [Watermark(5), 5, Watermark(7), 7, Watermark(9), 9]


def test_event_time_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="must be an EventTimePolicy"):
        stream_journal_p("log", event_time_policy=limiting_lag(3))  # type: ignore[arg-type]
    no_timestamp = EventTimePolicy(None, limiting_lag(3))
    with pytest.raises(ValueError, match="needs a timestamp_fn"):
        stream_journal_p("log", event_time_policy=no_timestamp)
