"""TestInbox, TestOutbox, TestProcessorContext, TestMode and the snapshot key routing rule."""

from __future__ import annotations

import logging

import pytest

from jetspark.core import ArrayDequeInbox, Context, OutboxImpl, ProcessorContractError
from jetspark.core.config import ProcessingGuarantee
from jetspark.core.snapshot_keys import BroadcastKey, broadcast_key, snapshot_targets
from jetspark.core.test_support import (
    ALL_AT_ONCE_RESTORE_EVERY_OTHER,
    DEFAULT_MODES,
    ONE_ITEM,
    TestInbox,
    TestMode,
    TestOutbox,
    TestProcessorContext,
    TestSupport,
)
from jetspark.partitioning import DEFAULT, PartitionAssignment


def test_test_classes_are_not_collected_by_pytest() -> None:
    for cls in (TestSupport, TestInbox, TestOutbox, TestProcessorContext, TestMode):
        assert cls.__test__ is False


def test_inbox_adds_in_order_and_is_an_array_deque_inbox() -> None:
    inbox = TestInbox().add(1).add_all([2, 3]).add(4)
    assert isinstance(inbox, ArrayDequeInbox)
    assert list(inbox.queue) == [1, 2, 3, 4]
    assert inbox.peek() == 1
    assert inbox.poll() == 1
    assert len(inbox) == 3


def test_outbox_refuses_when_full_and_drains_per_ordinal() -> None:
    outbox = TestOutbox(1, 2)
    assert isinstance(outbox, OutboxImpl)
    assert outbox.offer("a", 0)
    assert not outbox.offer("b", 0)
    assert outbox.refused_item() == "b"
    assert list(outbox.queue(0)) == ["a"]
    target: list[str] = []
    assert outbox.drain_queue(0, target) == 1
    assert target == ["a"]
    assert outbox.offer("b", 0)
    assert outbox.refused_item() is None


def test_outbox_raises_on_a_different_item_after_a_refusal() -> None:
    outbox = TestOutbox(1)
    outbox.offer("a")
    outbox.offer("b")
    with pytest.raises(ProcessorContractError, match="offered item 'c'"):
        outbox.offer("c")


def test_outbox_drains_all_queues_and_the_snapshot_queue() -> None:
    outbox = TestOutbox(2, 2, snapshot_capacity=1)
    assert outbox.offer("both")
    assert outbox.offer_to_snapshot("k", 1)
    assert not outbox.offer_to_snapshot("k2", 2)
    assert outbox.refused_snapshot_entry() == ("k2", 2)
    assert list(outbox.snapshot_queue()) == [("k", 1)]
    targets: list[list[str]] = [[], []]
    assert outbox.drain_queues(targets) == 2
    assert targets == [["both"], ["both"]]
    entries: list[tuple[str, int]] = []
    assert outbox.drain_snapshot_queue(entries) == 1
    assert entries == [("k", 1)]


def test_outbox_block_unblock_and_reset() -> None:
    outbox = TestOutbox(1)
    outbox.owner = "my processor"
    outbox.block()
    assert outbox.is_full(0)
    assert not outbox.offer("a")
    outbox.unblock()
    assert outbox.offer("a")
    assert not outbox.offer("b")
    outbox.reset()
    assert outbox.owner == "my processor"
    assert not outbox.has_unfinished_item()
    assert list(outbox.queue(0)) == []
    assert outbox.offer("c")


def test_outbox_names_an_ordinal_out_of_range() -> None:
    with pytest.raises(IndexError, match=r"ordinal\(s\) \[0, 3\], but the outbox has 2 bucket"):
        TestOutbox(1, 1).offer("a", [0, 3])


def test_processor_context_defaults_and_chained_setters() -> None:
    context = TestProcessorContext()
    assert isinstance(context, Context)
    assert (context.vertex_name, context.total_parallelism, context.local_parallelism) == (
        "test",
        1,
        1,
    )
    assert context.logger.name == "jetspark.test"
    custom = logging.getLogger("custom")
    chained = (
        context.set_vertex_name("v")
        .set_total_parallelism(4)
        .set_local_parallelism(2)
        .set_global_processor_index(3)
        .set_local_processor_index(1)
        .set_member_index(1)
        .set_member_count(2)
        .set_processing_guarantee(ProcessingGuarantee.EXACTLY_ONCE)
    )
    assert chained is context
    assert context.logger.name == "jetspark.v"
    assert context.set_logger(custom).set_vertex_name("w").logger is custom
    assert (context.global_processor_index, context.member_count) == (3, 2)
    assert context.processing_guarantee is ProcessingGuarantee.EXACTLY_ONCE


def test_modes_describe_themselves() -> None:
    assert str(ONE_ITEM) == "inbox of one item, snapshots off"
    assert (
        str(ALL_AT_ONCE_RESTORE_EVERY_OTHER) == "inbox of all items, restoring every other snapshot"
    )
    assert str(TestMode(3, 4)) == "inbox of up to 3 items, restoring every 4th snapshot"
    assert len(set(DEFAULT_MODES)) == 6
    with pytest.raises(ValueError, match="inbox_size"):
        TestMode(0)


def test_snapshot_targets_route_keys_to_their_owner_and_broadcast_keys_to_all() -> None:
    assignment = PartitionAssignment(member_count=3, local_parallelism=2)
    assert list(snapshot_targets(broadcast_key("cfg"), assignment)) == list(range(6))
    for key in ["a", "b", 7, ("x", 1)]:
        owner = assignment.global_processor(DEFAULT.partition(key, assignment.partition_count))
        assert list(snapshot_targets(key, assignment)) == [owner]
    assert broadcast_key("cfg") == BroadcastKey("cfg")
