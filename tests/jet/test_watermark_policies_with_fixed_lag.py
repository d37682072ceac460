"""Port of Jet 0.7 `com.hazelcast.jet.core.WatermarkPolicies_withFixedLagTest`."""

from __future__ import annotations

from jetspark.processors.watermark_policies import MIN_TIMESTAMP, limiting_lag

LAG = 10


def test_when_out_of_order_events_then_monotonic_wm() -> None:
    """`WatermarkPolicies_withFixedLagTest.when_outOfOrderEvents_then_monotonicWm`."""
    p = limiting_lag(LAG)()
    for i in range(10):
        assert p.report_event(i) == i - LAG
        # older events: the same watermark
        assert p.report_event(i - 1) == i - LAG
        assert p.report_event(i - 2) == i - LAG


def test_when_events_stop_then_wm_stops() -> None:
    """`WatermarkPolicies_withFixedLagTest.when_eventsStop_then_wmStops`."""
    p = limiting_lag(LAG)()
    p.report_event(LAG)
    for _ in range(10):
        assert p.current_watermark() == 0


def test_when_no_event_ever_then_min_value() -> None:
    """`WatermarkPolicies_withFixedLagTest.when_noEventEver_then_minValue`."""
    p = limiting_lag(LAG)()
    for _ in range(10):
        assert p.current_watermark() == MIN_TIMESTAMP
