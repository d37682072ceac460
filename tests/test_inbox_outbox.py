"""Tests of the Inbox and the Outbox (manual §8.3.2-8.3.3): the contract processors rely on."""

from __future__ import annotations

import numpy as np
import pytest

from jetspark.core import ArrayDequeInbox, Inbox, Outbox, OutboxImpl, ProcessorContractError

# --- Inbox --------------------------------------------------------------------------------------


def test_array_deque_inbox_is_an_inbox():
    assert isinstance(ArrayDequeInbox(), Inbox)


def test_is_empty_and_len():
    inbox = ArrayDequeInbox(["a", "b"])
    assert (inbox.is_empty(), len(inbox)) == (False, 2)
    empty = ArrayDequeInbox()
    assert (empty.is_empty(), len(empty)) == (True, 0)


def test_peek_does_not_remove():
    inbox = ArrayDequeInbox(["a", "b"])
    assert inbox.peek() == "a"
    assert inbox.peek() == "a"
    assert len(inbox) == 2


def test_poll_and_remove_take_the_head_in_order():
    inbox = ArrayDequeInbox(["a", "b", "c"])
    assert [inbox.poll(), inbox.remove(), inbox.poll()] == ["a", "b", "c"]
    assert inbox.is_empty()


@pytest.mark.parametrize("method", [ArrayDequeInbox.peek, ArrayDequeInbox.poll])
def test_peek_and_poll_return_none_when_empty(method):
    assert method(ArrayDequeInbox()) is None


def test_remove_on_an_empty_inbox_is_an_error():
    with pytest.raises(IndexError, match="empty inbox"):
        ArrayDequeInbox().remove()


def test_drain_passes_every_item_in_order_and_counts():
    inbox = ArrayDequeInbox([1, 2, 3])
    seen: list[int] = []
    assert inbox.drain(seen.append) == 3
    assert seen == [1, 2, 3]
    assert inbox.is_empty()
    assert inbox.drain(seen.append) == 0


def test_drain_keeps_the_item_whose_function_failed():
    inbox = ArrayDequeInbox([1, 2, 3])
    seen: list[int] = []

    def take(item: int) -> None:
        if item == 2:
            raise RuntimeError("boom")
        seen.append(item)

    with pytest.raises(RuntimeError, match="boom"):
        inbox.drain(take)
    assert seen == [1]
    assert list(inbox.queue) == [2, 3]


def test_drain_to_appends_to_the_target_and_counts():
    inbox = ArrayDequeInbox([1, 2])
    target = [0]
    assert inbox.drain_to(target) == 2
    assert target == [0, 1, 2]
    assert inbox.is_empty()
    assert inbox.drain_to(target) == 0


# --- Outbox -------------------------------------------------------------------------------------


def contents(outbox: OutboxImpl) -> list[list]:
    return [list(bucket) for bucket in outbox.buckets]


def drain(outbox: OutboxImpl, ordinal: int) -> list:
    items = list(outbox.buckets[ordinal])
    outbox.buckets[ordinal].clear()
    return items


def test_outbox_impl_is_an_outbox():
    assert isinstance(OutboxImpl([1]), Outbox)


@pytest.mark.parametrize(
    ("ordinal", "expected"),
    [
        (None, [["x"], ["x"], ["x"]]),
        (1, [[], ["x"], []]),
        ([0, 2], [["x"], [], ["x"]]),
        ((2,), [[], [], ["x"]]),
        (range(3), [["x"], ["x"], ["x"]]),
        ([], [[], [], []]),
    ],
    ids=["all", "one", "list", "tuple", "range", "none"],
)
def test_offer_goes_to_the_given_ordinals(ordinal, expected):
    outbox = OutboxImpl([4, 4, 4])
    assert outbox.offer("x", ordinal) is True
    assert contents(outbox) == expected
    assert not outbox.has_unfinished_item()


def test_offer_defaults_to_all_ordinals():
    outbox = OutboxImpl([4, 4])
    assert outbox.offer("x")
    assert contents(outbox) == [["x"], ["x"]]


def test_a_full_bucket_refuses_until_drained():
    outbox = OutboxImpl([2])
    assert outbox.offer("a", 0) and outbox.offer("b", 0)
    assert outbox.is_full(0)
    assert outbox.offer("c", 0) is False
    assert outbox.has_unfinished_item()
    assert outbox.offer("c", 0) is False  # still full: refused again, nothing lost
    assert drain(outbox, 0) == ["a", "b"]
    assert outbox.offer("c", 0) is True
    assert not outbox.has_unfinished_item()
    assert contents(outbox) == [["c"]]


@pytest.mark.parametrize("ordinal", [None, [0, 1, 2]], ids=["all", "sequence"])
def test_partial_acceptance_then_retry_delivers_once_per_bucket(ordinal):
    outbox = OutboxImpl([1, 2, 1])
    assert outbox.offer("first", 0)
    assert outbox.offer("x", ordinal) is False  # buckets 1 and 2 take it, bucket 0 is full
    assert contents(outbox) == [["first"], ["x"], ["x"]]
    assert outbox.has_unfinished_item()
    assert outbox.offer("x", ordinal) is False  # retry while still full: no duplicates
    assert contents(outbox) == [["first"], ["x"], ["x"]]
    drain(outbox, 0)
    drain(outbox, 2)
    assert outbox.offer("x", ordinal) is True
    assert contents(outbox) == [["x"], ["x"], []]
    assert not outbox.has_unfinished_item()
    assert outbox.offer("y", ordinal) is False  # the next item starts afresh on every bucket
    assert contents(outbox) == [["x"], ["x", "y"], ["y"]]


@pytest.mark.parametrize("ordinal", [0, None, [0]], ids=["int", "all", "sequence"])
def test_offering_another_item_after_a_refusal_is_a_contract_error(ordinal):
    outbox = OutboxImpl([1])
    outbox.owner = "vertex 'map' processor #3"
    assert outbox.offer("a", ordinal)
    assert not outbox.offer("b", ordinal)
    with pytest.raises(ProcessorContractError) as raised:
        outbox.offer("c", ordinal)
    message = str(raised.value)
    assert "vertex 'map' processor #3 offered item 'c'" in message
    assert "earlier offer of 'b' was refused" in message
    assert "offer that same item again" in message
    assert contents(outbox) == [["a"]]


def test_an_equal_item_counts_as_the_same_item():
    outbox = OutboxImpl([1])
    outbox.offer(("k", 1))
    assert not outbox.offer(("k", 1))
    drain(outbox, 0)
    assert outbox.offer(("k", 1))  # a new but equal tuple


def test_an_unorderable_item_such_as_a_numpy_array_can_be_retried():
    outbox = OutboxImpl([1])
    outbox.offer("a")
    array = np.arange(3)
    assert not outbox.offer(array)
    assert not outbox.offer(array)
    with pytest.raises(ProcessorContractError):
        outbox.offer(np.arange(4))
    drain(outbox, 0)
    assert outbox.offer(array)
    assert outbox.buckets[0][0] is array


def test_offer_to_snapshot_uses_its_own_bucket_and_capacity():
    outbox = OutboxImpl([1], snapshot_capacity=2)
    assert outbox.offer_to_snapshot("k1", 1)
    assert outbox.offer_to_snapshot("k2", 2)
    assert outbox.offer_to_snapshot("k3", 3) is False
    assert outbox.has_unfinished_item()
    assert contents(outbox) == [[]]
    assert outbox.offer("data")  # the data buckets are independent
    with pytest.raises(ProcessorContractError, match="offered snapshot item \\('k4', 4\\)"):
        outbox.offer_to_snapshot("k4", 4)
    assert list(outbox.snapshot_bucket) == [("k1", 1), ("k2", 2)]
    outbox.snapshot_bucket.clear()
    assert outbox.offer_to_snapshot("k3", 3)
    assert not outbox.has_unfinished_item()
    assert list(outbox.snapshot_bucket) == [("k3", 3)]


def test_snapshot_capacity_defaults_to_1024():
    outbox = OutboxImpl([])
    assert all(outbox.offer_to_snapshot(i, i) for i in range(1024))
    assert not outbox.offer_to_snapshot(1024, 1024)


@pytest.mark.parametrize("capacities", [[], [1], [3, 1, 4]])
def test_bucket_count_is_the_number_of_ordinals(capacities):
    assert OutboxImpl(capacities).bucket_count() == len(capacities)


def test_a_sink_outbox_accepts_offers_to_all_ordinals():
    assert OutboxImpl([]).offer("x") is True


@pytest.mark.parametrize(("capacities", "snapshot_capacity"), [([0], 1), ([2, -1], 1), ([1], 0)])
def test_capacities_must_be_positive(capacities, snapshot_capacity):
    with pytest.raises(ValueError, match="capacities must be >= 1"):
        OutboxImpl(capacities, snapshot_capacity)
