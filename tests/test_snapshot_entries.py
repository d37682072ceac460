"""A processor's snapshot entries go to the outbox's snapshot bucket in slices
(`OutboxImpl.offer_snapshot_entries`, used by `emit_from_traverser_to_snapshot`), as one
`offer_to_snapshot` per entry would put them there; and the collector's pause (gc_pause.py)
nests across blocks and threads."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from jetspark.core import AbstractProcessor
from jetspark.core.gc_pause import paused_gc
from jetspark.core.outbox import Ordinals, OutboxImpl
from jetspark.core.test_support import TestProcessorContext


class Saves(AbstractProcessor):
    """Saves `entries` (any iterable of `(key, value)` pairs) as its snapshot."""

    def __init__(self, entries: Iterable[Any]) -> None:
        super().__init__()
        self.entries = entries

    def save_to_snapshot(self) -> bool:
        return self.emit_from_traverser_to_snapshot(self.entries)


class OneByOne:
    """A user's Outbox over an OutboxImpl, without `offer_snapshot_entries`; counts offers."""

    def __init__(self, inner: OutboxImpl) -> None:
        self.inner = inner
        self.offers = 0

    def offer(self, item: Any, ordinal: Ordinals = None) -> bool:
        return self.inner.offer(item, ordinal)

    def offer_to_snapshot(self, key: Any, value: Any) -> bool:
        self.offers += 1
        return self.inner.offer_to_snapshot(key, value)

    def has_unfinished_item(self) -> bool:
        return self.inner.has_unfinished_item()

    def bucket_count(self) -> int:
        return self.inner.bucket_count()


def saved(entries: Iterable[Any], outbox: Any, bucket: OutboxImpl) -> tuple[list[Any], int]:
    """What `Saves(entries)` put in `bucket`'s snapshot bucket over the calls it took (the
    bucket drained after each, as the runtime does), and how many calls."""
    processor = Saves(entries)
    processor.init(outbox, TestProcessorContext())
    taken: list[Any] = []
    for calls in range(1, 1000):
        done = processor.save_to_snapshot()
        assert len(bucket.snapshot_bucket) <= bucket.snapshot_capacity
        taken += bucket.snapshot_bucket
        bucket.snapshot_bucket.clear()
        if done:
            return taken, calls
    raise AssertionError("the save never finished")


def pairs(count: int) -> list[tuple[int, str]]:
    return [(n, f"value {n}") for n in range(count)]


@pytest.mark.parametrize("make", [list, tuple, iter, lambda e: (x for x in e)], ids=repr)
def test_entries_go_out_in_slices_of_the_room_left_in_order(make: Any) -> None:
    outbox = OutboxImpl([4], snapshot_capacity=3)
    assert saved(make(pairs(10)), outbox, outbox) == (pairs(10), 4)


def test_none_is_skipped_and_a_pair_that_is_no_tuple_becomes_one() -> None:
    outbox = OutboxImpl([4], snapshot_capacity=2)
    entries = [(0, "a"), None, [1, "b"], None, (2, "c"), (3, "d")]
    taken, _ = saved(entries, outbox, outbox)
    assert taken == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]
    assert {type(entry) for entry in taken} == {tuple}


def test_an_entry_that_is_no_pair_fails_as_before() -> None:
    outbox = OutboxImpl([4])
    with pytest.raises(ValueError, match="too many values to unpack"):
        saved([(0, "a"), (1, "b", "c")], outbox, outbox)


def test_an_outbox_of_the_users_own_gets_one_offer_per_entry() -> None:
    inner = OutboxImpl([4], snapshot_capacity=3)
    outbox = OneByOne(inner)
    assert saved(pairs(10), outbox, inner) == (pairs(10), 4)
    assert outbox.offers == 10 + 3, "each full bucket refused one entry, offered again after"


@pytest.fixture
def collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_the_collector_runs_again_once_the_outermost_pause_ended(collector_on: None) -> None:
    with paused_gc:
        assert not gc.isenabled()
        with paused_gc:
            assert not gc.isenabled()
        assert not gc.isenabled(), "an inner block's end does not end the outer one's pause"
    assert gc.isenabled()
    gc.disable()
    with paused_gc:
        pass
    assert not gc.isenabled(), "a collector off before stays off"


def test_a_pause_on_another_thread_keeps_the_collector_paused(collector_on: None) -> None:
    entered, leave = threading.Event(), threading.Event()

    def pause_until_told() -> None:
        with paused_gc:
            entered.set()
            leave.wait(60)

    other = threading.Thread(target=pause_until_told)
    other.start()
    assert entered.wait(60)
    with paused_gc:
        pass
    assert not gc.isenabled(), "the other thread's block has not ended"
    leave.set()
    other.join(60)
    assert gc.isenabled()
