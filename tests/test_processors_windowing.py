"""Window policies, watermark policies and throttling (manual §8.5), and insert_watermarks_p.

Time-aware policies get an injected clock, so lulls pass without sleeping.
"""

from __future__ import annotations

import pickle

import pytest
from test_processors_helpers import FakeClock, verify

from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext
from jetspark.core.watermark import IDLE_MESSAGE, Watermark
from jetspark.processors import insert_watermarks_p, whole_item
from jetspark.processors.windowing import (
    MIN_TIMESTAMP,
    KeyedWindowResult,
    emit_by_frame,
    emit_by_min_step,
    limiting_lag,
    limiting_lag_and_delay,
    limiting_lag_and_lull,
    limiting_timestamp_and_wall_clock_lag,
    no_throttling,
    sliding_window_policy,
    tumbling_window_policy,
)

# ------------------------------------------------------------------ window policies


def test_frames_are_labelled_by_their_exclusive_end():
    policy = sliding_window_policy(30, 10)
    assert (policy.frame_size, policy.window_size, policy.is_tumbling) == (10, 30, False)
    assert [policy.floor_frame_ts(t) for t in (0, 9, 10, 19, -1, -10)] == [0, 0, 10, 10, -10, -10]
    assert [policy.higher_frame_ts(t) for t in (0, 9, 10, -1)] == [10, 10, 20, 0]


def test_with_offset_shifts_the_frame_boundaries():
    policy = tumbling_window_policy(10).with_offset(3)
    assert policy.is_tumbling
    assert [policy.floor_frame_ts(t) for t in (2, 3, 12, 13)] == [-7, 3, 3, 13]
    assert policy.higher_frame_ts(3) == 13
    assert tumbling_window_policy(10).with_offset(13).frame_offset == 3
    assert sliding_window_policy(30, 10).to_tumbling_by_frame() == tumbling_window_policy(10)


@pytest.mark.parametrize(("size", "slide"), [(25, 10), (10, 0), (5, 10)])
def test_window_size_must_be_a_multiple_of_the_slide(size, slide):
    with pytest.raises(ValueError):
        sliding_window_policy(size, slide)


def test_keyed_window_result_is_a_named_tuple():
    result = KeyedWindowResult(0, 10, "k", 3)
    assert result == (0, 10, "k", 3) and result.key == "k" and result.value == 3


# --------------------------------------------------------------- watermark policies


def test_limiting_lag_follows_the_top_timestamp_and_stays_during_a_lull():
    policy = limiting_lag(5)()
    assert policy.current_watermark() == MIN_TIMESTAMP
    assert [policy.report_event(t) for t in (10, 20, 12, 21)] == [5, 15, 15, 16]
    assert policy.current_watermark() == 16
    with pytest.raises(ValueError):
        limiting_lag(-1)


def test_limiting_lag_and_delay_reaches_each_timestamp_within_the_max_delay():
    clock = FakeClock()
    policy = limiting_lag_and_delay(100, 50, clock)()
    assert policy.report_event(1000) == 900
    clock.now = 49
    assert policy.current_watermark() == 900
    clock.now = 50
    assert policy.current_watermark() == 1000
    clock.now = 60
    assert policy.report_event(1200) == 1100
    clock.now = 109
    assert policy.current_watermark() == 1100
    clock.now = 110
    assert policy.current_watermark() == 1200


def test_limiting_lag_and_lull_advances_with_the_clock_after_a_lull():
    clock = FakeClock()
    policy = limiting_lag_and_lull(10, 100, clock)()
    clock.now = 500
    assert policy.current_watermark() == MIN_TIMESTAMP  # no event yet: nothing to advance from
    clock.now = 0
    assert policy.report_event(1000) == 990
    clock.now = 100
    assert policy.current_watermark() == 990  # the lull is not longer than max_lull yet
    clock.now = 150
    assert policy.current_watermark() == 1040  # 50 ms into the lull, 50 ms ahead
    assert policy.report_event(1045) == 1040  # data behind the advancing watermark: still a lull
    clock.now = 160
    assert policy.current_watermark() == 1050
    clock.now = 170
    assert policy.report_event(2000) == 1990  # data advanced it: the lull is over
    clock.now = 270
    assert policy.current_watermark() == 1990
    clock.now = 280
    assert policy.current_watermark() == 2000


def test_limiting_timestamp_and_wall_clock_lag_advances_without_events():
    clock = FakeClock(10_000)
    policy = limiting_timestamp_and_wall_clock_lag(100, 1000, clock)()
    assert policy.current_watermark() == 9_000
    assert policy.report_event(9_500) == 9_400
    clock.now = 11_000
    assert policy.current_watermark() == 10_000
    assert policy.report_event(9_000) == 10_000


def test_each_supplier_call_makes_a_fresh_policy_and_suppliers_pickle():
    supplier = limiting_lag(1)
    first = supplier()
    first.report_event(100)
    assert supplier().current_watermark() == MIN_TIMESTAMP
    assert pickle.loads(pickle.dumps(limiting_lag_and_lull(1, 2)))().current_watermark() == (
        MIN_TIMESTAMP
    )


# -------------------------------------------------------------- emission policies


def test_emission_policies():
    assert no_throttling().throttle_wm(5, 4) == 5
    step = emit_by_min_step(10)
    assert step.throttle_wm(0, MIN_TIMESTAMP) == 0
    assert step.throttle_wm(19, 10) == 10 and step.throttle_wm(20, 10) == 20
    frame = emit_by_frame(tumbling_window_policy(10))
    assert frame.throttle_wm(15, MIN_TIMESTAMP) == 10
    assert frame.throttle_wm(19, 10) == 10 and frame.throttle_wm(20, 10) == 20
    assert frame.throttle_wm(MIN_TIMESTAMP, MIN_TIMESTAMP) == MIN_TIMESTAMP
    with pytest.raises(ValueError):
        emit_by_min_step(0)


# -------------------------------------------------------------- insert_watermarks_p


def test_insert_watermarks_emits_before_the_advancing_item_and_keeps_late_items():
    verify(insert_watermarks_p(whole_item, limiting_lag(2))).input(
        [10, 11, 9, 15, 15]
    ).expect_output([Watermark(8), 10, Watermark(9), 11, 9, Watermark(13), 15, 15])


def test_insert_watermarks_throttled_by_min_step():
    verify(insert_watermarks_p(whole_item, limiting_lag(0), emit_by_min_step(3))).input(
        [10, 11, 12, 14, 20]
    ).expect_output([Watermark(10), 10, 11, 12, Watermark(14), 14, Watermark(20), 20])


def test_insert_watermarks_throttled_by_frame():
    throttle = emit_by_frame(tumbling_window_policy(10))
    verify(insert_watermarks_p(whole_item, limiting_lag(0), throttle)).input(
        [5, 9, 12, 19, 31]
    ).expect_output([Watermark(0), 5, 9, Watermark(10), 12, 19, Watermark(30), 31])


def test_insert_watermarks_rescaled_restore_keeps_every_item():
    verify(insert_watermarks_p(whole_item, limiting_lag(1))).input(
        [1, 5, 3, 8, 2, 9]
    ).restore_rescaled(2, 1, whole_item).restore_rescaled(1, 3, whole_item).expect_output(
        [Watermark(0), 1, Watermark(4), 5, 3, Watermark(7), 8, 2, Watermark(8), 9]
    )


def test_insert_watermarks_rejects_a_policy_instance():
    with pytest.raises(TypeError, match="supplier"):
        insert_watermarks_p(whole_item, limiting_lag(1)())


class Harness:
    """One insert_watermarks_p processor driven by hand, calling try_process() as engines do."""

    def __init__(self, supplier) -> None:
        self.processor = supplier()
        self.outbox = TestOutbox(16)
        self.processor.init(self.outbox, TestProcessorContext())

    def items(self, *items) -> list:
        self.processor.process(0, TestInbox(items))
        return self.drain()

    def idle_call(self) -> list:
        assert self.processor.try_process()
        return self.drain()

    def drain(self) -> list:
        out: list = []
        self.outbox.drain_queue(0, out)
        return out


def test_insert_watermarks_advances_during_a_lull_in_try_process():
    clock = FakeClock()
    harness = Harness(insert_watermarks_p(lambda e: e[0], limiting_lag_and_lull(0, 100, clock)))
    assert harness.items((1000, "a")) == [Watermark(1000), (1000, "a")]
    clock.now = 100
    assert harness.idle_call() == []
    clock.now = 300
    assert harness.idle_call() == [Watermark(1200)]
    assert harness.idle_call() == []


def test_insert_watermarks_with_a_wall_clock_policy_emits_without_any_item():
    clock = FakeClock(5_000)
    policy = limiting_timestamp_and_wall_clock_lag(0, 1_000, clock)
    harness = Harness(insert_watermarks_p(whole_item, policy, emit_by_min_step(100)))
    assert harness.idle_call() == [Watermark(4_000)]
    clock.now = 5_050
    assert harness.idle_call() == []
    clock.now = 5_100
    assert harness.idle_call() == [Watermark(4_100)]


def test_insert_watermarks_marks_itself_idle_after_the_timeout():
    clock = FakeClock()
    harness = Harness(
        insert_watermarks_p(whole_item, limiting_lag(0), idle_timeout_ms=500, clock=clock)
    )
    assert harness.items(7) == [Watermark(7), 7]
    clock.now = 499
    assert harness.idle_call() == []
    clock.now = 500
    assert harness.idle_call() == [IDLE_MESSAGE]
    clock.now = 900
    assert harness.idle_call() == []  # announced once
    assert harness.items(6) == [6]  # active again; a watermark only when it advances
    clock.now = 1_399
    assert harness.idle_call() == []
    clock.now = 1_400
    assert harness.idle_call() == [IDLE_MESSAGE]
    assert harness.items(10) == [Watermark(10), 10]


def test_insert_watermarks_never_idle_without_a_timeout():
    clock = FakeClock()
    harness = Harness(insert_watermarks_p(whole_item, limiting_lag(0), clock=clock))
    clock.now = 10**9
    assert harness.idle_call() == []
