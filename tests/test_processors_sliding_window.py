"""Sliding and tumbling windows (manual §7.3): frames, deduct, late events, two stages."""

from __future__ import annotations

import logging

import pytest
from test_processors_helpers import output_of, verify

from jetspark.core.test_support import (
    TestInbox,
    TestOutbox,
    TestProcessorContext,
    TestSupport,
)
from jetspark.core.watermark import Watermark
from jetspark.processors import (
    accumulate_by_frame_p,
    aggregate_to_sliding_window_p,
    combine_to_sliding_window_p,
    entry_key,
)
from jetspark.processors.aggregate import AggregateOperation, counting, max_by, summing, to_list
from jetspark.processors.windowing import (
    KeyedWindowResult,
    TimestampKind,
    sliding_window_policy,
    tumbling_window_policy,
)

EVENT = TimestampKind.EVENT


def key(event):
    return event[0]


def timestamp(event):
    return event[1]


def mmss(text: str) -> int:
    minutes, seconds = text.split(":")
    return int(minutes) * 60 + int(seconds)


# The events of manual §7.3.1, "minutes:seconds", thrown in disordered. Frames of 10 seconds:
# [1:00, 1:10) holds 3 events, [1:10, 1:20) 2, [1:20, 1:30) 3, [1:30, 1:40) 4, [1:40, 1:50) 3.
MANUAL_EVENTS = [
    mmss(t)
    for t in (
        "1:05", "1:01", "1:12", "1:09", "1:25", "1:19", "1:21", "1:33", "1:28",
        "1:31", "1:44", "1:39", "1:30", "1:49", "1:40",
    )
]  # fmt: skip


def manual_window_counts(results):
    """Window end (as m:ss) -> count, for the windows of the manual's figure."""
    return {
        f"{r.end // 60}:{r.end % 60:02d}": r.value
        for r in results
        if isinstance(r, KeyedWindowResult) and mmss("1:30") <= r.end <= mmss("1:50")
    }


def test_manual_example_30_second_window_sliding_by_10_seconds():
    """§7.3.1: "At the time 1:30, the 30-second running average was 8/30 = 0.27 events per
    second. Over the next 20 seconds it increased to 10/30 = 0.33 events per second."
    """
    policy = sliding_window_policy(30, 10)
    supplier = aggregate_to_sliding_window_p(
        lambda t: "events", lambda t: t, EVENT, policy, counting()
    )
    results = output_of(supplier, [*MANUAL_EVENTS, Watermark(mmss("1:50"))])
    counts = manual_window_counts(results)
    assert counts == {"1:30": 8, "1:40": 9, "1:50": 10}
    assert counts["1:30"] / 30 == pytest.approx(0.27, abs=0.005)
    assert counts["1:50"] / 30 == pytest.approx(0.33, abs=0.005)


def test_manual_example_in_two_stages_gives_the_same_counts():
    """§7.3.2: the first stage accumulates frames per member, the second combines them."""
    policy = sliding_window_policy(30, 10)
    stage1 = accumulate_by_frame_p(lambda t: "events", lambda t: t, EVENT, policy, counting())
    wm = Watermark(mmss("1:50"))
    frames = output_of(stage1, [*MANUAL_EVENTS[:8], wm]) + output_of(
        stage1, [*MANUAL_EVENTS[8:], wm]
    )
    frames = [f for f in frames if not isinstance(f, Watermark)] + [wm]
    results = output_of(combine_to_sliding_window_p(policy, counting()), frames)
    assert manual_window_counts(results) == {"1:30": 8, "1:40": 9, "1:50": 10}


EVENTS = [("a", 1), ("b", 3), ("a", 12), ("a", 14), ("b", 25), ("a", 27), ("b", 41)]


def expected_sliding_counts():
    """Windows of 20 sliding by 10 over EVENTS, the watermark at 30 then completion."""
    return [
        KeyedWindowResult(-10, 10, "a", 1),
        KeyedWindowResult(-10, 10, "b", 1),
        KeyedWindowResult(0, 20, "a", 3),
        KeyedWindowResult(0, 20, "b", 1),
        KeyedWindowResult(10, 30, "a", 3),
        KeyedWindowResult(10, 30, "b", 1),
        Watermark(30),
        KeyedWindowResult(20, 40, "b", 1),
        KeyedWindowResult(20, 40, "a", 1),
        KeyedWindowResult(40, 60, "b", 1),
        KeyedWindowResult(30, 50, "b", 1),
    ]


def any_order_between_watermarks(expected, actual):
    """Equal as multisets within each stretch between watermarks, watermarks in place."""

    def stretches(items):
        out, current = [], []
        for item in items:
            if isinstance(item, Watermark):
                out.append((sorted(map(repr, current)), item))
                current = []
            else:
                current.append(item)
        out.append((sorted(map(repr, current)), None))
        return out

    return stretches(expected) == stretches(actual)


@pytest.mark.parametrize(
    "aggr_op",
    [
        counting(),  # has deduct: the window runs, frames are added and deducted
        AggregateOperation.with_create(int)  # no deduct: each window recombined from frames
        .and_accumulate(lambda a, e: a + 1)
        .and_combine(lambda a, b: a + b)
        .and_finish(lambda a: a),
    ],
    ids=["deduct", "combine-only"],
)
def test_sliding_window_with_and_without_deduct(aggr_op):
    policy = sliding_window_policy(20, 10)
    supplier = aggregate_to_sliding_window_p(key, timestamp, EVENT, policy, aggr_op)
    verify(supplier).input([*EVENTS[:6], Watermark(30), EVENTS[6]]).output_checker(
        any_order_between_watermarks
    ).expect_output(expected_sliding_counts())


def test_a_key_leaves_the_running_window_when_its_frames_are_deducted():
    policy = sliding_window_policy(20, 10)
    supplier = aggregate_to_sliding_window_p(key, timestamp, EVENT, policy, summing(lambda e: e[2]))
    # "a" sums to 0 in window [0, 20) but is still present; in [10, 30) it has no frames at all
    items = [("a", 5, 3), ("a", 6, -3), ("b", 15, 1), Watermark(30)]
    verify(supplier).input(items).output_checker(any_order_between_watermarks).expect_output(
        [
            KeyedWindowResult(-10, 10, "a", 0),
            KeyedWindowResult(0, 20, "a", 0),
            KeyedWindowResult(0, 20, "b", 1),
            KeyedWindowResult(10, 30, "b", 1),
            Watermark(30),
        ]
    )


def test_tumbling_window_and_custom_output():
    policy = tumbling_window_policy(10)
    supplier = aggregate_to_sliding_window_p(
        key, timestamp, EVENT, policy, to_list(), lambda s, e, k, v: f"{k}@{s}-{e}:{len(v)}"
    )
    verify(supplier).input([*EVENTS[:3], Watermark(10), *EVENTS[3:]]).output_checker(
        TestSupport.SAME_ITEMS_ANY_ORDER
    ).expect_output(
        ["a@0-10:1", "b@0-10:1", Watermark(10), "a@10-20:2", "b@20-30:1", "a@20-30:1", "b@40-50:1"]
    )


def test_windows_are_emitted_only_when_the_watermark_reaches_their_end():
    policy = tumbling_window_policy(10)
    supplier = aggregate_to_sliding_window_p(key, timestamp, EVENT, policy, counting())
    verify(supplier).disable_complete_call().input(
        [("a", 1), Watermark(9), ("a", 5), Watermark(10), ("a", 12), Watermark(19)]
    ).expect_output([Watermark(9), KeyedWindowResult(0, 10, "a", 2), Watermark(10), Watermark(19)])


def test_late_events_are_dropped_counted_and_logged(caplog):
    policy = sliding_window_policy(20, 10)
    processor = aggregate_to_sliding_window_p(key, timestamp, EVENT, policy, counting())()
    outbox = TestOutbox(100)
    processor.init(outbox, TestProcessorContext())
    processor.process(0, TestInbox([("a", 5)]))
    assert processor.try_process_watermark(Watermark(10))
    with caplog.at_level(logging.INFO, logger="jetspark"):
        # frame 10 ([0, 10)) went out with window 10; frame 20 awaits window 20: accepted
        processor.process(0, TestInbox([("a", 3), ("a", 9), ("a", 11)]))
    assert processor.late_events_dropped == 2
    assert sum("Late event dropped" in r.message for r in caplog.records) == 2
    assert processor.complete()
    out: list = []
    outbox.drain_queue(0, out)
    assert out == [
        KeyedWindowResult(-10, 10, "a", 1),
        KeyedWindowResult(0, 20, "a", 2),
        KeyedWindowResult(10, 30, "a", 1),
    ]


def test_an_event_behind_the_watermark_in_a_pending_frame_is_accepted():
    policy = tumbling_window_policy(10)
    supplier = aggregate_to_sliding_window_p(key, timestamp, EVENT, policy, counting())
    verify(supplier).input([("a", 15), Watermark(16), ("a", 11)]).expect_output(
        [Watermark(16), KeyedWindowResult(10, 20, "a", 2)]
    )


def test_a_big_watermark_jump_skips_empty_windows():
    policy = sliding_window_policy(20, 10)
    supplier = aggregate_to_sliding_window_p(key, timestamp, EVENT, policy, counting())
    verify(supplier).input([("a", 5), ("a", 10**12), Watermark(10**12 + 50)]).expect_output(
        [
            KeyedWindowResult(-10, 10, "a", 1),
            KeyedWindowResult(0, 20, "a", 1),
            KeyedWindowResult(10**12 - 10, 10**12 + 10, "a", 1),
            KeyedWindowResult(10**12, 10**12 + 20, "a", 1),
            Watermark(10**12 + 50),
        ]
    )


def test_frame_timestamps_and_several_ordinals():
    policy = sliding_window_policy(20, 10)
    # ordinal 0 gives event times, ordinal 1 already gives frame labels (exclusive ends)
    supplier = aggregate_to_sliding_window_p(
        [key, key], [timestamp, timestamp], TimestampKind.FRAME, policy, max_by(lambda e: e[2])
    )
    verify(supplier).inputs([[("a", 10, 1)], [("a", 20, 7)]]).output_checker(
        TestSupport.SAME_ITEMS_ANY_ORDER
    ).expect_output(
        [
            KeyedWindowResult(-10, 10, "a", ("a", 10, 1)),
            KeyedWindowResult(0, 20, "a", ("a", 20, 7)),
            KeyedWindowResult(10, 30, "a", ("a", 20, 7)),
        ]
    )


def test_first_stage_emits_frames_with_accumulators():
    policy = sliding_window_policy(20, 10)
    stage1 = accumulate_by_frame_p(key, timestamp, EVENT, policy, to_list())
    verify(stage1).input([("a", 1), ("a", 3), Watermark(10), ("a", 12)]).expect_output(
        [
            KeyedWindowResult(0, 10, "a", [("a", 1), ("a", 3)]),
            Watermark(10),
            KeyedWindowResult(10, 20, "a", [("a", 12)]),
        ]
    )


def test_two_stage_equals_single_stage_with_snapshots_and_rescaling():
    policy = sliding_window_policy(20, 10)
    single = aggregate_to_sliding_window_p(key, timestamp, EVENT, policy, counting())
    expected = output_of(single, [*EVENTS, Watermark(30)])
    frames = output_of(
        accumulate_by_frame_p(key, timestamp, EVENT, policy, counting()), [*EVENTS, Watermark(30)]
    )
    verify(combine_to_sliding_window_p(policy, counting())).input(frames).output_checker(
        any_order_between_watermarks
    ).restore_rescaled(2, 3, entry_key).restore_rescaled(3, 1, entry_key).expect_output(expected)


def test_sliding_window_rescaled_restore():
    policy = sliding_window_policy(20, 10)
    supplier = aggregate_to_sliding_window_p(key, timestamp, EVENT, policy, counting())
    verify(supplier).input([*EVENTS[:6], Watermark(30), EVENTS[6]]).output_checker(
        any_order_between_watermarks
    ).restore_rescaled(1, 2, key).restore_rescaled(2, 1, key).expect_output(
        expected_sliding_counts()
    )


def test_sliding_window_requires_combine():
    op = AggregateOperation.with_create(int).and_accumulate(max).and_finish(int)
    with pytest.raises(ValueError, match="combine"):
        aggregate_to_sliding_window_p(key, timestamp, EVENT, sliding_window_policy(20, 10), op)
    aggregate_to_sliding_window_p(key, timestamp, EVENT, tumbling_window_policy(10), op)
