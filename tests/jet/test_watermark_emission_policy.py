"""Port of Jet 0.7 `com.hazelcast.jet.core.WatermarkEmissionPolicyTest`.

jetspark's emission policies have Jet 0.7's interface, `throttle_wm(current_wm, last_emitted_wm)`
returning the watermark to emit (the last emitted one: emit nothing).
"""

from __future__ import annotations

from jetspark.processors.watermark_policies import (
    MIN_TIMESTAMP,
    WatermarkEmissionPolicy,
    emit_by_frame,
    emit_by_min_step,
    no_throttling,
)
from jetspark.processors.windowing import tumbling_window_policy

MIN_STEP = 2


class Throttle:
    """Feeds watermarks to a policy, keeping the last emitted one as Jet's test does."""

    def __init__(self, policy: WatermarkEmissionPolicy) -> None:
        self.policy = policy
        self.last_emitted = MIN_TIMESTAMP

    def assert_wm(self, current_wm: int, expected_to_emit: int) -> None:
        self.last_emitted = self.policy.throttle_wm(current_wm, self.last_emitted)
        assert self.last_emitted == expected_to_emit


def test_when_wm_increasing_then_throttle_by_min_step() -> None:
    """`WatermarkEmissionPolicyTest.when_wmIncreasing_then_throttleByMinStep`."""
    p = Throttle(emit_by_min_step(MIN_STEP))
    p.assert_wm(2, 2)
    p.assert_wm(3, 2)
    p.assert_wm(4, 4)
    p.assert_wm(6, 6)
    p.assert_wm(9, 9)
    p.assert_wm(10, 9)
    p.assert_wm(11, 11)


def test_when_wm_increasing_then_throttle_by_frame() -> None:
    """`WatermarkEmissionPolicyTest.when_wmIncreasing_then_throttleByFrame`."""
    p = Throttle(emit_by_frame(tumbling_window_policy(3)))
    p.assert_wm(MIN_TIMESTAMP, MIN_TIMESTAMP)
    p.assert_wm(2, 0)
    p.assert_wm(3, 3)
    p.assert_wm(4, 3)
    p.assert_wm(5, 3)
    p.assert_wm(6, 6)
    p.assert_wm(13, 12)
    p.assert_wm(14, 12)
    p.assert_wm(15, 15)


def test_no_throttling_emits_the_current_watermark() -> None:
    """Not in Jet's test class: `WatermarkEmissionPolicy.noThrottling()`'s contract,
    `(currentWm, lastEmittedWm) -> currentWm`, checked the same way."""
    p = Throttle(no_throttling())
    for wm in (MIN_TIMESTAMP, 2, 3, 10):
        p.assert_wm(wm, wm)
