"""Port of Jet 0.7 `com.hazelcast.jet.impl.processor.SlidingWindowPTest`: windows of 4 sliding
by 1, parametrized as Jet's on a deduct function and on single-stage
(`aggregate_to_sliding_window_p`) versus second-stage (`combine_to_sliding_window_p`).

Deliberate differences: Jet's accumulator is a mutable `LongAccumulator`; jetspark's
accumulators are values returned by `accumulate`/`combine`/`deduct` (plain ints here). Jet's
results are `TimestampedEntry(windowEnd, key, value)` via `TimestampedEntry::fromWindowResult`;
jetspark's `map_to_output_fn` gets `(start, end, key, value)`, so the port passes one that makes
the same triple. A second-stage input is what jetspark's first stage emits,
`KeyedWindowResult(start, end, key, accumulator)`, where Jet's is a `TimestampedEntry`. Jet's
`@After` check of the processor's internal maps is not ported (jetspark tests from the outside).
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

import pytest

from jetspark.core.test_support import TestSupport
from jetspark.core.watermark import Watermark
from jetspark.processors import aggregate_to_sliding_window_p, combine_to_sliding_window_p
from jetspark.processors.aggregate import AggregateOperation
from jetspark.processors.windowing import KeyedWindowResult, TimestampKind, sliding_window_policy

KEY = 77


class TimestampedEntry(NamedTuple):
    """Jet's `TimestampedEntry`: a window's end, its key and its value."""

    timestamp: int
    key: Any
    value: Any


def from_window_result(start: int, end: int, key: Any, value: Any) -> TimestampedEntry:
    """Jet's `TimestampedEntry::fromWindowResult`."""
    return TimestampedEntry(end, key, value)


def add(acc: int, other: int) -> int:
    return acc + other


def subtract(acc: int, other: int) -> int:
    return acc - other


def add_entry_value(acc: int, item: tuple[int, int]) -> int:
    return acc + item[1]


def entry_timestamp(item: tuple[int, int]) -> int:
    return item[0]


def key_of(item: Any) -> int:
    return KEY


class Case(NamedTuple):
    has_deduct: bool
    single_stage: bool

    def supplier(self) -> Any:
        builder = AggregateOperation.with_create(int).and_accumulate(add_entry_value)
        builder = builder.and_combine(add)
        if self.has_deduct:
            builder = builder.and_deduct(subtract)
        operation = builder.and_export_finish(lambda acc: acc)
        policy = sliding_window_policy(4, 1)
        if self.single_stage:
            return aggregate_to_sliding_window_p(
                [key_of],
                [entry_timestamp],
                TimestampKind.EVENT,
                policy,
                operation,
                from_window_result,
            )
        return combine_to_sliding_window_p(policy, operation, from_window_result)

    def event(self, frame_ts: int, value: int) -> Any:
        if self.single_stage:
            # frame_ts is above every event timestamp of the frame: an event at frame_ts - 1
            return (frame_ts - 1, value)
        return KeyedWindowResult(frame_ts - 1, frame_ts, KEY, value)


@pytest.fixture(
    params=[Case(True, True), Case(True, False), Case(False, True), Case(False, False)],
    ids=lambda c: f"has_deduct={c.has_deduct}, single_stage={c.single_stage}",
)
def case(request: pytest.FixtureRequest) -> Case:
    return request.param


def outbox_frame(ts: int, value: int) -> TimestampedEntry:
    return TimestampedEntry(ts, KEY, value)


def wm(timestamp: int) -> Watermark:
    return Watermark(timestamp)


def test_when_no_frames_received_then_only_emit_wm(case: Case) -> None:
    """`SlidingWindowPTest.when_noFramesReceived_then_onlyEmitWm`."""
    TestSupport.verify_processor(case.supplier()).disable_complete_call().input(
        [wm(1)]
    ).expect_output([wm(1)])


def test_simple_smoke_test(case: Case) -> None:
    """`SlidingWindowPTest.simple_smokeTest`."""
    TestSupport.verify_processor(case.supplier()).disable_complete_call().input(
        [case.event(0, 1), wm(3)]
    ).expect_output(
        [outbox_frame(0, 1), outbox_frame(1, 1), outbox_frame(2, 1), outbox_frame(3, 1), wm(3)]
    )


ASCENDING_OUTPUT = [
    outbox_frame(0, 1),
    wm(0),
    outbox_frame(1, 2),
    wm(1),
    outbox_frame(2, 3),
    wm(2),
    outbox_frame(3, 4),
    wm(3),
    outbox_frame(4, 4),
    wm(4),
    outbox_frame(5, 3),
    wm(5),
    outbox_frame(6, 2),
    wm(6),
    outbox_frame(7, 1),
    wm(7),
]


def test_when_receive_ascending_timestamps_then_emit_ascending(case: Case) -> None:
    """`SlidingWindowPTest.when_receiveAscendingTimestamps_then_emitAscending`."""
    events = [case.event(ts, 1) for ts in range(5)]
    TestSupport.verify_processor(case.supplier()).disable_complete_call().input(
        events + [wm(ts) for ts in range(8)]
    ).expect_output(ASCENDING_OUTPUT)


def test_when_receive_descending_timestamps_then_emit_ascending(case: Case) -> None:
    """`SlidingWindowPTest.when_receiveDescendingTimestamps_then_emitAscending`."""
    events = [case.event(ts, 1) for ts in reversed(range(5))]
    TestSupport.verify_processor(case.supplier()).disable_complete_call().input(
        events + [wm(ts) for ts in range(8)]
    ).expect_output(ASCENDING_OUTPUT)


def test_when_receive_random_timestamps_then_emit_ascending(case: Case) -> None:
    """`SlidingWindowPTest.when_receiveRandomTimestamps_then_emitAscending` (seeded shuffle)."""
    timestamps = list(range(100))
    random.Random(16).shuffle(timestamps)
    inbox = [case.event(ts, 1) for ts in timestamps] + [wm(i) for i in range(106)]
    expected: list[Any] = [
        outbox_frame(0, 1),
        wm(0),
        outbox_frame(1, 2),
        wm(1),
        outbox_frame(2, 3),
        wm(2),
        outbox_frame(3, 4),
        wm(3),
    ]
    for ts in range(4, 100):
        expected += [outbox_frame(ts, 4), wm(ts)]
    expected += [
        outbox_frame(100, 3),
        wm(100),
        outbox_frame(101, 2),
        wm(101),
        outbox_frame(102, 1),
        wm(102),
        wm(103),
        wm(104),
        wm(105),
    ]
    TestSupport.verify_processor(case.supplier()).disable_complete_call().disable_logging().input(
        inbox
    ).expect_output(expected)


def test_when_wm_never_received_then_emit_everything_in_complete(case: Case) -> None:
    """`SlidingWindowPTest.when_wmNeverReceived_then_emitEverythingInComplete`."""
    TestSupport.verify_processor(case.supplier()).input(
        [case.event(0, 1), case.event(1, 1)]
    ).expect_output(
        [
            outbox_frame(0, 1),
            outbox_frame(1, 2),
            outbox_frame(2, 2),
            outbox_frame(3, 2),
            outbox_frame(4, 1),
        ]
    )


def test_when_late_event_then_ignored(case: Case) -> None:
    """`SlidingWindowPTest.when_lateEvent_then_ignored`: events of frames up to the watermark
    are dropped, even those whose frame is still part of a window to come."""
    TestSupport.verify_processor(case.supplier()).input(
        [
            wm(10),
            case.event(7, 1),  # late
            case.event(8, 1),  # "partially late": dropped as well
            case.event(9, 1),
            case.event(10, 1),
            case.event(11, 123),  # the first one not late
        ]
    ).expect_output(
        [
            wm(10),
            outbox_frame(11, 123),
            outbox_frame(12, 123),
            outbox_frame(13, 123),
            outbox_frame(14, 123),
        ]
    )
