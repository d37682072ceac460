"""Port of Jet 0.7 `com.hazelcast.jet.impl.processor.SlidingWindowP_stage1Test`: the first
stage of two-stage windowing, `accumulate_by_frame_p`, windows of 16 sliding by 4, summing.

Deliberate differences: Jet's frame is `TimestampedEntry(frameEnd, key, LongAccumulator)`;
jetspark's first stage emits `KeyedWindowResult(start, end, key, accumulator)` with the
accumulator a plain int (jetspark's accumulators are values). Jet's `@After` check of the
internal map is not ported (jetspark tests from the outside).
"""

from __future__ import annotations

from typing import Any

from jetspark.core.test_support import TestSupport
from jetspark.core.watermark import Watermark
from jetspark.processors import accumulate_by_frame_p, entry_key, entry_value
from jetspark.processors.aggregate import summing
from jetspark.processors.windowing import KeyedWindowResult, TimestampKind, sliding_window_policy

KEY = 77


def key_of(item: Any) -> int:
    return KEY


def supplier() -> Any:
    return accumulate_by_frame_p(
        [key_of],
        [entry_key],
        TimestampKind.EVENT,
        sliding_window_policy(16, 4),
        summing(entry_value),
    )


def frame(timestamp: int, value: int) -> KeyedWindowResult:
    return KeyedWindowResult(timestamp - 4, timestamp, KEY, value)


def wm(timestamp: int) -> Watermark:
    return Watermark(timestamp)


def test_smoke_test() -> None:
    """`SlidingWindowP_stage1Test.smokeTest`."""
    TestSupport.verify_processor(supplier()).disable_snapshots().disable_complete_call().input(
        [
            (0, 1),  # to frame 4
            (1, 1),  # to frame 4
            wm(4),  # closes frame 4
            (4, 1),  # to frame 8
            (5, 1),  # to frame 8
            (8, 1),  # to frame 12
            (8, 1),  # to frame 12
            wm(8),  # closes frame 8
            (8, 1),  # to frame 12
            wm(12),
            wm(16),
            wm(20),  # closes everything
        ]
    ).expect_output([frame(4, 2), wm(4), frame(8, 2), wm(8), frame(12, 3), wm(12), wm(16), wm(20)])


def test_when_gap_in_wm_after_event_then_frame_and_wm_emitted() -> None:
    """`SlidingWindowP_stage1Test.when_gapInWmAfterEvent_then_frameAndWmEmitted`."""
    TestSupport.verify_processor(supplier()).disable_snapshots().disable_complete_call().input(
        [(0, 1), (1, 1), wm(12)]
    ).expect_output([frame(4, 2), wm(12)])


def test_when_no_events_then_wms_emitted() -> None:
    """`SlidingWindowP_stage1Test.when_noEvents_then_wmsEmitted`."""
    some_wms = [wm(4), wm(8), wm(12)]
    TestSupport.verify_processor(supplier()).disable_snapshots().disable_complete_call().input(
        some_wms
    ).expect_output(some_wms)


def test_when_batch_then_emit_everything() -> None:
    """`SlidingWindowP_stage1Test.when_batch_then_emitEverything`."""
    TestSupport.verify_processor(supplier()).disable_snapshots().input(
        [(0, 1), (4, 1), (8, 1), wm(4)]
    ).expect_output([frame(4, 1), wm(4), frame(8, 1), frame(12, 1)])


def test_when_wm_never_received_then_emit_everything_in_complete() -> None:
    """`SlidingWindowP_stage1Test.when_wmNeverReceived_then_emitEverythingInComplete`."""
    TestSupport.verify_processor(supplier()).disable_snapshots().input(
        [(0, 1), (4, 1)]
    ).expect_output([frame(4, 1), frame(8, 1)])


def test_when_late_event_then_ignore() -> None:
    """`SlidingWindowP_stage1Test.when_lateEvent_then_ignore`."""
    TestSupport.verify_processor(supplier()).disable_snapshots().disable_complete_call().input(
        [wm(16), (7, 1)]
    ).expect_output([wm(16)])
