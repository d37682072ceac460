"""Port of Jet 0.7 `com.hazelcast.jet.core.WatermarkPolicies_limitingTimestampAndWallClockLag`."""

from __future__ import annotations

from jetspark.processors.watermark_policies import limiting_timestamp_and_wall_clock_lag

TIMESTAMP_LAG = 3
WALL_CLOCK_LAG = 10


class Clock:
    """The injected wall clock: milliseconds the test sets."""

    def __init__(self, time: int = 0) -> None:
        self.time = time

    def __call__(self) -> int:
        return self.time


def test_when_out_of_order_events_then_monotonic_wm() -> None:
    """`WatermarkPolicies_limitingTimestampAndWallClockLag.when_outOfOrderEvents_then_monotonicWm`."""
    p = limiting_timestamp_and_wall_clock_lag(TIMESTAMP_LAG, WALL_CLOCK_LAG, Clock(-1_000_000))()
    assert p.report_event(10) == 10 - TIMESTAMP_LAG
    assert p.report_event(9) == 10 - TIMESTAMP_LAG
    assert p.report_event(8) == 10 - TIMESTAMP_LAG
    assert p.report_event(7) == 10 - TIMESTAMP_LAG  # late event
    assert p.report_event(11) == 11 - TIMESTAMP_LAG


def test_when_events_stop_then_wm_follows_wall_clock() -> None:
    """`WatermarkPolicies_limitingTimestampAndWallClockLag.when_eventsStop_then_wmFollowsWallClock`."""
    clock = Clock()
    p = limiting_timestamp_and_wall_clock_lag(TIMESTAMP_LAG, WALL_CLOCK_LAG, clock)()
    for clock.time in range(100, 110):
        assert p.report_event(0) == clock.time - WALL_CLOCK_LAG


def test_when_no_event_ever_then_wm_follows_wall_clock() -> None:
    """`WatermarkPolicies_limitingTimestampAndWallClockLag.when_noEventEver_then_wmFollowsWallClock`."""
    clock = Clock()
    p = limiting_timestamp_and_wall_clock_lag(TIMESTAMP_LAG, WALL_CLOCK_LAG, clock)()
    for clock.time in range(100, 110):
        assert p.current_watermark() == clock.time - WALL_CLOCK_LAG
