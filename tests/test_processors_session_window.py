"""Session windows (manual §7.4): extend, a new session after the timeout, bridging merges."""

from __future__ import annotations

import logging

import pytest
from test_processors_helpers import verify

from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext, TestSupport
from jetspark.core.watermark import Watermark
from jetspark.processors import aggregate_to_session_window_p
from jetspark.processors.aggregate import AggregateOperation, counting, to_list
from jetspark.processors.windowing import KeyedWindowResult

TIMEOUT = 10


def key(event):
    return event[0]


def timestamp(event):
    return event[1]


def sessions(aggr_op=None, **kwargs):
    return aggregate_to_session_window_p(TIMEOUT, timestamp, key, aggr_op or counting(), **kwargs)


def test_a_single_event_opens_a_session_covering_its_interval():
    verify(sessions()).input([("a", 100)]).expect_output([KeyedWindowResult(100, 110, "a", 1)])


def test_an_overlapping_event_extends_the_session():
    verify(sessions()).input([("a", 100), ("a", 105), ("a", 115)]).expect_output(
        [KeyedWindowResult(100, 125, "a", 3)]
    )


def test_touching_intervals_overlap():
    verify(sessions()).input([("a", 100), ("a", 110)]).expect_output(
        [KeyedWindowResult(100, 120, "a", 2)]
    )


def test_an_event_after_the_timeout_opens_a_new_session():
    verify(sessions()).input([("a", 100), ("a", 111)]).expect_output(
        [KeyedWindowResult(100, 110, "a", 1), KeyedWindowResult(111, 121, "a", 1)]
    )


def test_an_event_bridging_two_sessions_merges_them():
    # [100, 110] and [125, 135]; [116, 126] reaches only the second one
    items = [("a", 100), ("a", 125), ("a", 116)]
    verify(sessions()).input(items).expect_output(
        [KeyedWindowResult(100, 110, "a", 1), KeyedWindowResult(116, 135, "a", 2)]
    )
    bridging = [("a", 100), ("a", 120), ("a", 110)]  # [110, 120] touches both
    verify(sessions(to_list())).input(bridging).expect_output(
        [KeyedWindowResult(100, 130, "a", [("a", 100), ("a", 120), ("a", 110)])]
    )


def test_an_early_event_extends_a_session_backwards():
    verify(sessions()).input([("a", 100), ("a", 95)]).expect_output(
        [KeyedWindowResult(95, 110, "a", 2)]
    )


def test_keys_have_separate_sessions():
    verify(sessions()).input([("a", 1), ("b", 2), ("a", 5)]).output_checker(
        TestSupport.SAME_ITEMS_ANY_ORDER
    ).expect_output([KeyedWindowResult(1, 15, "a", 2), KeyedWindowResult(2, 12, "b", 1)])


def test_a_session_is_emitted_once_the_watermark_passes_its_end():
    items = [("a", 100), ("b", 104), Watermark(110), ("a", 110), Watermark(115), Watermark(121)]
    verify(sessions()).disable_complete_call().input(items).expect_output(
        [
            Watermark(110),  # [100, 110] is not closed yet: an event at 110 may still extend it
            KeyedWindowResult(104, 114, "b", 1),
            Watermark(115),
            KeyedWindowResult(100, 120, "a", 2),
            Watermark(121),
        ]
    )


def test_events_behind_the_watermark_are_dropped_counted_and_logged(caplog):
    processor = sessions()()
    outbox = TestOutbox(100)
    processor.init(outbox, TestProcessorContext())
    processor.process(0, TestInbox([("a", 100)]))
    assert processor.try_process_watermark(Watermark(105))
    with caplog.at_level(logging.INFO, logger="jetspark"):
        processor.process(0, TestInbox([("a", 104), ("a", 105)]))
    assert processor.late_events_dropped == 1
    assert any("Late event dropped" in r.message for r in caplog.records)
    assert processor.complete()
    out: list = []
    outbox.drain_queue(0, out)
    assert out == [KeyedWindowResult(100, 115, "a", 2)]


def test_custom_output_and_rescaled_restore():
    supplier = sessions(map_to_output_fn=lambda start, end, k, n: f"{k}:{start}-{end}x{n}")
    items = [
        ("a", 1),
        ("b", 2),
        ("a", 30),
        ("c", 3),
        Watermark(20),
        ("a", 35),
        ("b", 40),
        ("a", 20),
    ]
    verify(supplier).input(items).output_checker(TestSupport.SAME_ITEMS_ANY_ORDER).restore_rescaled(
        1, 3, key
    ).restore_rescaled(3, 2, key).expect_output(
        ["a:1-11x1", "b:2-12x1", "c:3-13x1", Watermark(20), "a:20-45x3", "b:40-50x1"]
    )


def test_session_windows_need_combine():
    op = AggregateOperation.with_create(int).and_accumulate(max).and_finish(int)
    with pytest.raises(ValueError, match="combine"):
        aggregate_to_session_window_p(TIMEOUT, timestamp, key, op)
    with pytest.raises(ValueError, match="negative"):
        aggregate_to_session_window_p(-1, timestamp, key, counting())
