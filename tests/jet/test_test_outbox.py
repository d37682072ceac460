"""Port of Jet 0.7 `com.hazelcast.jet.core.test.TestOutboxTest`.

Deliberate differences: jetspark's outbox has no per-call batch that `reset()` ends, so
offering the refused item again is always allowed (Jet's `when_resetNotCalled_then_offerFails`
expects an error; here the offer is refused again, as a full outbox does). Offering another item
first raises ProcessorContractError naming both items (Jet: "Different ..."). Ordinal `None`
means every ordinal (Jet: -1). Jet's TestOutbox serializes a snapshot entry when it is offered;
jetspark's TestSupport serializes every snapshot it takes, which is where
`when_notSerializable_then_fails` is checked here.
"""

from __future__ import annotations

import pytest

from jetspark.core import AbstractProcessor
from jetspark.core.errors import ProcessorContractError
from jetspark.core.test_support import TestOutbox, TestSupport


def test_when_different_object_after_false_then_rejected() -> None:
    """`TestOutboxTest.when_differentObjectAfterFalse_then_rejected`."""
    outbox = TestOutbox(1)
    assert outbox.offer(1)
    assert not outbox.offer(2)
    outbox.drain_queue(0, [])
    with pytest.raises(ProcessorContractError, match="offered item 3 while the earlier offer of 2"):
        outbox.offer(3)


def test_when_different_object_to_snapshot_after_false_then_rejected() -> None:
    """`TestOutboxTest.when_differentObjectToSnapshotAfterFalse_then_rejected`."""
    outbox = TestOutbox(1, snapshot_capacity=1)
    assert outbox.offer_to_snapshot("k1", "v1")
    assert not outbox.offer_to_snapshot("k2", "v2")
    outbox.drain_snapshot_queue([])
    with pytest.raises(ProcessorContractError, match="earlier offer of \\('k2', 'v2'\\)"):
        outbox.offer_to_snapshot("k3", "v3")


def test_when_reset_called_then_offer_succeeds() -> None:
    """`TestOutboxTest.when_resetCalled_then_offerSucceeds`: after `reset()` (which empties the
    outbox in jetspark) the same item is offered again without error."""
    outbox = TestOutbox(1)
    assert outbox.offer(1)
    assert not outbox.offer(2)
    outbox.reset()
    assert outbox.offer(2)


def test_when_reset_not_called_then_offer_fails() -> None:
    """`TestOutboxTest.when_resetNotCalled_then_offerFails`: in jetspark offering the refused
    item again is the contract, not an error; the full outbox refuses it again."""
    outbox = TestOutbox(1)
    assert outbox.offer(1)
    assert not outbox.offer(2)
    assert not outbox.offer(2)


def test_when_offered_to_minus_one_then_offered_to_all() -> None:
    """`TestOutboxTest.when_offeredToMinusOne_then_offeredToAll` (ordinal None)."""
    outbox = TestOutbox(1, 1)
    assert outbox.offer("foo", None)
    assert list(outbox.queue(0)) == ["foo"] and list(outbox.queue(1)) == ["foo"]


class SavesAGenerator(AbstractProcessor):
    """Saves state that cannot be serialized."""

    def save_to_snapshot(self) -> bool:
        return self.try_emit_to_snapshot("k", (x for x in range(1)))


def test_when_not_serializable_then_fails() -> None:
    """`TestOutboxTest.when_notSerializable_then_fails`, checked by TestSupport (see above)."""
    with pytest.raises(AssertionError, match="cannot be serialized"):
        TestSupport.verify_processor(SavesAGenerator).disable_logging().input([]).expect_output([])
