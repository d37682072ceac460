"""Unit tests of watermark coalescing (manual §7.9, §8.5.3)."""

from __future__ import annotations

from jetspark.core import IDLE_MESSAGE, Watermark
from jetspark.core.runtime import WatermarkCoalescer


def _take(coalescer: WatermarkCoalescer) -> Watermark | None:
    pending, coalescer.pending = coalescer.pending, None
    return pending


def test_emits_the_minimum_over_queues_only_when_it_rises() -> None:
    c = WatermarkCoalescer(3)
    c.observe_watermark(0, Watermark(10))
    c.observe_watermark(1, Watermark(20))
    assert _take(c) is None  # queue 2 has not spoken
    c.observe_watermark(2, Watermark(5))
    assert _take(c) == Watermark(5)
    c.observe_watermark(2, Watermark(30))
    assert _take(c) == Watermark(10)
    c.observe_watermark(0, Watermark(15))
    assert _take(c) == Watermark(15)
    c.observe_watermark(0, Watermark(40))
    assert _take(c) == Watermark(20)


def test_an_idle_queue_is_excluded_until_it_sends_again() -> None:
    c = WatermarkCoalescer(2)
    c.observe_watermark(0, Watermark(10))
    c.observe_watermark(1, IDLE_MESSAGE)
    assert _take(c) == Watermark(10)
    c.observe_watermark(0, Watermark(20))
    assert _take(c) == Watermark(20)
    c.observe_watermark(1, Watermark(15))  # active again, behind: nothing new
    assert _take(c) is None
    c.observe_watermark(0, Watermark(30))
    assert _take(c) is None  # held back by queue 1 at 15
    c.observe_watermark(1, Watermark(25))
    assert _take(c) == Watermark(25)


def test_all_queues_idle_emit_idle_message_once() -> None:
    c = WatermarkCoalescer(2)
    c.observe_watermark(0, IDLE_MESSAGE)
    assert _take(c) is None
    c.observe_watermark(1, IDLE_MESSAGE)
    assert _take(c) is IDLE_MESSAGE
    c.observe_watermark(1, IDLE_MESSAGE)
    assert _take(c) is None
    c.observe_watermark(0, Watermark(3))
    assert _take(c) == Watermark(3)


def test_a_finished_queue_stops_holding_the_watermark_back() -> None:
    c = WatermarkCoalescer(2)
    c.observe_watermark(0, Watermark(50))
    c.observe_watermark(1, Watermark(10))
    assert _take(c) == Watermark(10)
    c.queue_done(1)
    assert _take(c) == Watermark(50)
    c.queue_done(0)
    assert _take(c) is None


def test_retention_forces_a_watermark_held_back_too_long() -> None:
    now = [0.0]
    c = WatermarkCoalescer(2, max_retain_millis=100, clock=lambda: now[0])
    c.observe_watermark(1, Watermark(5))
    c.observe_watermark(0, Watermark(50))
    assert _take(c) == Watermark(5)
    now[0] = 0.05
    c.check_retention()
    assert _take(c) is None
    now[0] = 0.1
    c.check_retention()
    assert _take(c) == Watermark(50)
    c.observe_watermark(1, Watermark(20))  # the lagging queue's news no longer lowers it
    assert _take(c) is None


def test_without_retention_a_lagging_queue_holds_the_watermark_forever() -> None:
    now = [0.0]
    c = WatermarkCoalescer(2, clock=lambda: now[0])
    c.observe_watermark(1, Watermark(5))
    c.observe_watermark(0, Watermark(50))
    _take(c)
    now[0] = 1000.0
    c.check_retention()
    assert _take(c) is None
