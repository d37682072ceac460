"""Port of Jet 0.7 `com.hazelcast.jet.impl.processor.InsertWatermarksPTest`, parametrized on
the outbox capacity (1 and 1024) as Jet's is.

Deliberate differences: Jet's idle timeout test uses real time ("We can't inject MockClock to
WatermarkSourceUtil inside the InsertWatermarkP"); jetspark's `insert_watermarks_p` takes a
`clock`, so the port steps an injected clock instead and asserts the exact millisecond. Jet
disables the idle timeout with -1, jetspark with 0.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext, TestSupport
from jetspark.core.watermark import IDLE_MESSAGE, Watermark
from jetspark.processors import insert_watermarks_p, whole_item
from jetspark.processors.watermark_policies import (
    WatermarkEmissionPolicy,
    WatermarkPolicySupplier,
    emit_by_frame,
    emit_by_min_step,
    limiting_lag,
    limiting_timestamp_and_wall_clock_lag,
    no_throttling,
)
from jetspark.processors.windowing import tumbling_window_policy

from .support import Clock, do_and_drain

LAG = 3


class Item(NamedTuple):
    """An event carrying its timestamp (Jet's test `Item`)."""

    timestamp: int


def item(timestamp: int) -> Item:
    return Item(timestamp)


def wm(timestamp: int) -> Watermark:
    return Watermark(timestamp)


def item_timestamp(event: Item) -> int:
    return event.timestamp


@pytest.fixture(params=[1, 1024], ids=lambda capacity: f"outbox_capacity={capacity}")
def outbox_capacity(request: pytest.FixtureRequest) -> int:
    return request.param


class Harness:
    """One InsertWatermarksP, its outbox, and everything drained from it."""

    def __init__(
        self,
        capacity: int,
        wm_policy: WatermarkPolicySupplier = limiting_lag(LAG),  # noqa: B008 (a supplier)
        emission: WatermarkEmissionPolicy = no_throttling(),  # noqa: B008 (immutable)
        idle_timeout_ms: int = 0,
        clock: Clock | None = None,
    ) -> None:
        self.outbox = TestOutbox(capacity)
        self.processor = insert_watermarks_p(
            item_timestamp, wm_policy, emission, idle_timeout_ms, clock=clock or Clock()
        )()
        self.processor.init(self.outbox, TestProcessorContext())
        self.result: list[Any] = []

    def process(self, event: Item) -> None:
        inbox = TestInbox().add(event)

        def process_once() -> bool:
            self.processor.process(0, inbox)
            return inbox.is_empty()

        do_and_drain(process_once, self.outbox, self.result)

    def try_process(self) -> None:
        do_and_drain(self.processor.try_process, self.outbox, self.result)


def do_test(harness: Harness, inputs: list[Item], expected: list[Any]) -> None:
    for event in inputs:
        harness.process(event)
    assert harness.result == expected


def test_when_first_event_late_then_not_dropped(outbox_capacity: int) -> None:
    """`InsertWatermarksPTest.when_firstEventLate_then_notDropped`."""
    clock = Clock(100)
    policy = limiting_timestamp_and_wall_clock_lag(0, 0, clock)
    harness = Harness(outbox_capacity, policy, clock=clock)
    do_test(harness, [item(clock.now - 1)], [wm(clock.now), item(clock.now - 1)])


def test_when_many_events_then_one_wm(outbox_capacity: int) -> None:
    """`InsertWatermarksPTest.when_manyEvents_then_oneWm`."""
    do_test(Harness(outbox_capacity), [item(10), item(10)], [wm(7), item(10), item(10)])


def test_when_events_increase_then_wm_increases(outbox_capacity: int) -> None:
    """`InsertWatermarksPTest.when_eventsIncrease_then_wmIncreases`."""
    do_test(Harness(outbox_capacity), [item(10), item(11)], [wm(7), item(10), wm(8), item(11)])


def test_when_events_decrease_then_one_wm(outbox_capacity: int) -> None:
    """`InsertWatermarksPTest.when_eventsDecrease_then_oneWm`."""
    do_test(Harness(outbox_capacity), [item(11), item(10)], [wm(8), item(11), item(10)])


def test_when_late_event_then_not_dropped(outbox_capacity: int) -> None:
    """`InsertWatermarksPTest.when_lateEvent_then_notDropped`."""
    do_test(Harness(outbox_capacity), [item(11), item(7)], [wm(8), item(11), item(7)])


def test_when_gap_between_events_then_one_wm(outbox_capacity: int) -> None:
    """`InsertWatermarksPTest.when_gapBetweenEvents_then_oneWm`."""
    do_test(Harness(outbox_capacity), [item(10), item(13)], [wm(7), item(10), wm(10), item(13)])


def test_when_zero_lag(outbox_capacity: int) -> None:
    """`InsertWatermarksPTest.when_zeroLag`."""
    harness = Harness(outbox_capacity, limiting_lag(0))
    do_test(harness, [item(10), item(13)], [wm(10), item(10), wm(13), item(13)])


def test_emit_by_frame_when_events_increase_then_wm_increases(outbox_capacity: int) -> None:
    """`InsertWatermarksPTest.emitByFrame_when_eventsIncrease_then_wmIncreases` (issue 16's
    example: the emitted watermark is floored to the frame, wm(6) and not wm(7))."""
    harness = Harness(outbox_capacity, emission=emit_by_frame(tumbling_window_policy(2)))
    do_test(
        harness,
        [item(10), item(11), item(12), item(13)],
        [wm(6), item(10), wm(8), item(11), item(12), wm(10), item(13)],
    )


def test_emit_by_frame_verified_by_test_support() -> None:
    """Issue 16's example through TestSupport: every inbox size, snapshots restored, the same
    output as `emitByFrame_when_eventsIncrease_then_wmIncreases`."""
    emission = emit_by_frame(tumbling_window_policy(2))
    TestSupport.verify_processor(
        insert_watermarks_p(whole_item, limiting_lag(3), emission)
    ).disable_complete_call().input([10, 11, 12, 13]).expect_output(
        [wm(6), 10, wm(8), 11, 12, wm(10), 13]
    )


def test_emit_by_frame_when_events_increase_and_start_at_verge_of_frame_then_wm_increases(
    outbox_capacity: int,
) -> None:
    """`InsertWatermarksPTest.emitByFrame_when_eventsIncreaseAndStartAtVergeOfFrame_then_wmIncreases`."""
    harness = Harness(outbox_capacity, emission=emit_by_frame(tumbling_window_policy(2)))
    do_test(
        harness,
        [item(11), item(12), item(13), item(14)],
        [wm(8), item(11), item(12), wm(10), item(13), item(14)],
    )


def test_emit_by_frame_when_events_not_at_the_verge_of_frame_then_wm_emitted_correctly(
    outbox_capacity: int,
) -> None:
    """`InsertWatermarksPTest.emitByFrame_when_eventsNotAtTheVergeOfFrame_then_wmEmittedCorrectly`."""
    harness = Harness(outbox_capacity, emission=emit_by_frame(tumbling_window_policy(10)))
    do_test(
        harness,
        [item(14), item(15), item(24)],
        [wm(10), item(14), item(15), wm(20), item(24)],
    )


def test_emit_by_frame_when_gap_between_events_then_gap_in_wms(outbox_capacity: int) -> None:
    """`InsertWatermarksPTest.emitByFrame_when_gapBetweenEvents_then_gapInWms`."""
    harness = Harness(outbox_capacity, emission=emit_by_frame(tumbling_window_policy(2)))
    do_test(harness, [item(11), item(15)], [wm(8), item(11), wm(12), item(15)])


def test_emit_by_min_step_when_events_increase_then_wm_increases(outbox_capacity: int) -> None:
    """`InsertWatermarksPTest.emitByMinStep_when_eventsIncrease_then_wmIncreases`."""
    harness = Harness(outbox_capacity, emission=emit_by_min_step(2))
    do_test(
        harness,
        [item(11), item(12), item(13), item(14)],
        [wm(8), item(11), item(12), wm(10), item(13), item(14)],
    )


def test_emit_by_min_step_when_gap_between_events_then_one_wm(outbox_capacity: int) -> None:
    """`InsertWatermarksPTest.emitByMinStep_when_gapBetweenEvents_then_oneWm`."""
    harness = Harness(outbox_capacity, emission=emit_by_min_step(2))
    do_test(
        harness,
        [item(10), item(15), item(20)],
        [wm(7), item(10), wm(12), item(15), wm(17), item(20)],
    )


def test_when_idle_timeout_then_idle_message_after_timeout(outbox_capacity: int) -> None:
    """`InsertWatermarksPTest.when_idleTimeout_then_idleMessageAfterTimeout`, on an injected
    clock (see the module docstring): nothing before 100 ms without items, then IDLE_MESSAGE."""
    clock = Clock(0)
    harness = Harness(outbox_capacity, idle_timeout_ms=100, clock=clock)
    harness.process(item(10))
    assert harness.result == [wm(10 - LAG), item(10)]
    harness.result.clear()
    for clock.now in range(1, 100):
        harness.try_process()
        assert harness.result == [], f"outbox should be empty, elapsed ms={clock.now}"
    clock.now = 100
    harness.try_process()
    assert harness.result == [IDLE_MESSAGE]
