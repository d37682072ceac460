"""Port of Jet 0.7 `com.hazelcast.jet.core.WatermarkPolicies_limitingLagAndLullTest`.

Deliberate difference: Jet's clock here returns nanoseconds (`System.nanoTime` in production);
jetspark's clocks return milliseconds everywhere, so the test steps 1 ms where Jet steps
1,000,000 ns. The expectations are Jet's.
"""

from __future__ import annotations

from jetspark.processors.watermark_policies import MIN_TIMESTAMP, limiting_lag_and_lull

MAX_LULL_MS = 3


class Clock:
    """The injected clock: milliseconds the test sets."""

    def __init__(self) -> None:
        self.time = 0

    def __call__(self) -> int:
        return self.time


def test_when_out_of_order_events_then_monotonic_wm() -> None:
    """`WatermarkPolicies_limitingLagAndLullTest.when_outOfOrderEvents_then_monotonicWm`."""
    p = limiting_lag_and_lull(2, MAX_LULL_MS, Clock())()
    assert p.report_event(10) == 8
    assert p.report_event(9) == 8
    assert p.report_event(8) == 8
    assert p.report_event(7) == 8  # late event
    assert p.report_event(11) == 9


def test_when_events_stop_then_wm_increases() -> None:
    """`WatermarkPolicies_limitingLagAndLullTest.when_eventsStop_then_wmIncreases`."""
    clock = Clock()
    p = limiting_lag_and_lull(2, MAX_LULL_MS, clock)()
    assert p.report_event(12) == 10
    while clock.time < MAX_LULL_MS:
        assert p.current_watermark() == 10
        clock.time += 1
    while clock.time <= 10:
        assert p.current_watermark() == 10 + clock.time - MAX_LULL_MS, f"at time={clock.time}"
        clock.time += 1


def test_when_no_event_ever_then_no_increase() -> None:
    """`WatermarkPolicies_limitingLagAndLullTest.when_noEventEver_then_noIncrease`."""
    clock = Clock()
    p = limiting_lag_and_lull(2, MAX_LULL_MS, clock)()
    assert p.current_watermark() == MIN_TIMESTAMP
    while clock.time <= 10:
        assert p.current_watermark() == MIN_TIMESTAMP, f"at time={clock.time}"
        clock.time += 1
