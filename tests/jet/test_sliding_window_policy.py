"""Port of Jet 0.7 `com.hazelcast.jet.core.SlidingWindowPolicyTest`.

Deliberate difference: Jet's constructor is `SlidingWindowPolicy(frameSize, frameOffset,
framesPerWindow)`; jetspark's dataclass is `SlidingWindowPolicy(frame_size, window_size,
frame_offset)`, so `new SlidingWindowPolicy(4, 1, 10)` is `policy(4, 1, 10)` below. Timestamps
are Python ints clamped to Java's long range, as Jet's are.
"""

from __future__ import annotations

from jetspark.processors.windowing import (
    MAX_TIMESTAMP,
    MIN_TIMESTAMP,
    SlidingWindowPolicy,
    sliding_window_policy,
    tumbling_window_policy,
)


def policy(frame_size: int, frame_offset: int, frames_per_window: int) -> SlidingWindowPolicy:
    """Jet's `new SlidingWindowPolicy(frameSize, frameOffset, framesPerWindow)`."""
    return SlidingWindowPolicy(frame_size, frame_size * frames_per_window, frame_offset)


def assert_frame_ts(
    definition: SlidingWindowPolicy, timestamp: int, expected_floor: int, expected_higher: int
) -> None:
    assert definition.floor_frame_ts(timestamp) == expected_floor
    assert definition.higher_frame_ts(timestamp) == expected_higher


def test_when_no_offset() -> None:
    """`SlidingWindowPolicyTest.when_noOffset`."""
    definition = policy(4, 0, 10)
    for timestamp, floor, higher in [
        (-5, -8, -4),
        (-4, -4, 0),
        (-3, -4, 0),
        (-2, -4, 0),
        (-1, -4, 0),
        (0, 0, 4),
        (1, 0, 4),
        (2, 0, 4),
        (3, 0, 4),
        (4, 4, 8),
        (5, 4, 8),
        (6, 4, 8),
        (7, 4, 8),
        (8, 8, 12),
    ]:
        assert_frame_ts(definition, timestamp, floor, higher)


def test_when_offset1() -> None:
    """`SlidingWindowPolicyTest.when_offset1`."""
    definition = policy(4, 1, 10)
    for timestamp, floor, higher in [
        (-4, -7, -3),
        (-3, -3, 1),
        (-2, -3, 1),
        (-1, -3, 1),
        (0, -3, 1),
        (1, 1, 5),
        (2, 1, 5),
        (3, 1, 5),
        (4, 1, 5),
        (5, 5, 9),
        (6, 5, 9),
        (7, 5, 9),
        (8, 5, 9),
        (9, 9, 13),
    ]:
        assert_frame_ts(definition, timestamp, floor, higher)


def test_when_offset2() -> None:
    """`SlidingWindowPolicyTest.when_offset2`."""
    definition = policy(4, 2, 10)
    for timestamp, floor, higher in [
        (-4, -6, -2),
        (-3, -6, -2),
        (-2, -2, 2),
        (-1, -2, 2),
        (0, -2, 2),
        (1, -2, 2),
        (2, 2, 6),
        (3, 2, 6),
        (4, 2, 6),
        (5, 2, 6),
        (6, 6, 10),
        (7, 6, 10),
        (8, 6, 10),
        (9, 6, 10),
    ]:
        assert_frame_ts(definition, timestamp, floor, higher)


def test_when_frame_length3() -> None:
    """`SlidingWindowPolicyTest.when_frameLength3`."""
    assert policy(3, 0, 10).floor_frame_ts(MIN_TIMESTAMP) == MIN_TIMESTAMP


def test_when_floor_out_of_range_then_min_value() -> None:
    """`SlidingWindowPolicyTest.when_floorOutOfRange_then_minValue`."""
    definition = policy(4, 3, 10)
    assert definition.floor_frame_ts(MIN_TIMESTAMP + 2) == MIN_TIMESTAMP
    assert definition.floor_frame_ts(MAX_TIMESTAMP) == MAX_TIMESTAMP


def test_when_higher_out_of_range_then_max_value() -> None:
    """`SlidingWindowPolicyTest.when_higherOutOfRange_then_maxValue`."""
    definition = policy(4, 2, 10)
    assert definition.higher_frame_ts(MAX_TIMESTAMP - 1) == MAX_TIMESTAMP
    assert definition.higher_frame_ts(MIN_TIMESTAMP) == MIN_TIMESTAMP + 2


def test_tumbling_window_def() -> None:
    """`SlidingWindowPolicyTest.test_tumblingWindowDef`."""
    definition = tumbling_window_policy(123)
    assert definition.frame_size == 123
    assert definition.window_size == 123
    assert definition.frame_offset == 0


def test_to_tumbling_by_frame() -> None:
    """`SlidingWindowPolicyTest.test_toTumblingByFrame`."""
    definition = sliding_window_policy(1000, 100).to_tumbling_by_frame()
    assert definition.window_size == 100
    assert definition.frame_size == 100


def test_with_offset() -> None:
    """`SlidingWindowPolicyTest.test_withOffset`."""
    definition = sliding_window_policy(1000, 100)
    assert definition.frame_offset == 0
    assert definition.with_offset(10).frame_offset == 10
