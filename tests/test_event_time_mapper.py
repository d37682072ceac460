"""The event-time mapper of partitioned sources (processors/event_time.py): one watermark per
partition, coalesced to the lowest of those not idle, quiet partitions marked idle; every
clock injected, so each case is exact."""

from __future__ import annotations

import itertools

import pytest

from jetspark.core.watermark import IDLE_MESSAGE, Watermark
from jetspark.processors.event_time import EventTimeMapper, EventTimePolicy
from jetspark.processors.watermark_policies import emit_by_min_step, limiting_lag


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def mapper(partitions: int, idle_timeout_ms: int = 0, **policy: object) -> tuple:
    clock = Clock()
    events = EventTimeMapper(
        EventTimePolicy(
            None, limiting_lag(10), idle_timeout_ms=idle_timeout_ms, clock=clock, **policy
        )
    )
    events.add_partitions(partitions)
    return events, clock


def test_a_partition_far_ahead_does_not_move_the_watermark_past_one_behind() -> None:
    events, _ = mapper(2)
    assert events.on_event(0, 1_000) is None  # partition 1 has no watermark yet
    assert events.on_event(1, 110) == Watermark(100)
    assert events.on_event(0, 2_000) is None  # still held by partition 1
    assert events.on_event(1, 510) == Watermark(500)


def test_a_quiet_partition_turns_idle_while_another_is_busy() -> None:
    """Jet marks partitions idle on every event, not only when the source has none."""
    events, clock = mapper(2, idle_timeout_ms=50)
    events.on_event(1, 110)
    assert events.on_event(0, 210) == Watermark(100)
    for now in range(10, 50, 10):  # partition 1 quiet, but not for 50 ms yet
        clock.now = now
        assert events.on_event(0, 210 + now, now) is None
    clock.now = 50
    assert events.on_event(0, 300, 50) == Watermark(290)
    # its next event brings it back: the watermark waits for it again
    assert events.on_event(1, 120, 60) is None
    assert events.on_event(0, 400, 60) is None
    assert events.on_event(1, 410, 60) == Watermark(390)


def test_every_partition_idle_gives_one_idle_message_then_an_event_a_watermark() -> None:
    events, clock = mapper(2, idle_timeout_ms=50)
    events.on_event(0, 110)
    assert events.on_event(1, 110) == Watermark(100)
    clock.now = 49
    assert events.on_tick() is None
    clock.now = 50
    assert events.on_tick() is IDLE_MESSAGE
    assert events.on_tick() is None  # once
    assert events.on_event(0, 211, 60) == Watermark(201)


def test_a_processor_without_partitions_is_idle_even_without_a_timeout() -> None:
    events, _ = mapper(0, idle_timeout_ms=0)
    assert events.on_tick() is IDLE_MESSAGE
    assert events.on_tick() is None


def test_without_a_timeout_a_quiet_partition_holds_the_watermark_for_ever() -> None:
    events, clock = mapper(2, idle_timeout_ms=0)
    events.on_event(1, 110)
    assert events.on_event(0, 500) == Watermark(100)
    clock.now = 10**9
    assert events.on_tick() is None
    assert events.on_event(0, 900, clock.now) is None


def test_a_restored_watermark_is_a_floor_and_emitted_ones_only_rise() -> None:
    events, _ = mapper(1)
    events.restore_watermark(0, 1_000)
    assert events.watermark(0) == 1_000
    assert events.on_event(0, 500) == Watermark(1_000)
    assert events.on_event(0, 900) is None
    assert events.on_event(0, 1_020) == Watermark(1_010)


@pytest.mark.parametrize("step", [1, 100])
def test_the_emission_policy_throttles_what_is_emitted(step: int) -> None:
    events, _ = mapper(1, emission_policy=emit_by_min_step(step))
    emitted = [events.on_event(0, t) for t in range(10, 500, 7)]
    watermarks = [w.timestamp for w in emitted if w is not None]
    assert watermarks == sorted(set(watermarks))
    assert all(b - a >= step for a, b in itertools.pairwise(watermarks))
