"""Port of Jet 0.7 `com.hazelcast.jet.impl.processor.SlidingWindowP_FrameCombiningTest`.

Deliberate difference in the input: Jet's test feeds frame timestamps 2, 4 and 6 to frames of
size 4, which breaks Jet's own precondition (`SlidingWindowP.tryProcess` asserts
`frameTs == floorFrameTs(frameTs)`); its expected output is that of frames 4, 4 and 8, so the
port feeds those aligned labels and keeps Jet's expected output. jetspark, like Jet without
`-ea`, takes a second-stage frame label as given. Also: the input frames are jetspark's
first-stage output, `KeyedWindowResult(start, end, key, accumulator)`, where Jet's are
`TimestampedEntry`; results are mapped to `(end, key, value)` as Jet's
`TimestampedEntry::fromWindowResult` does.
"""

from __future__ import annotations

from typing import Any

from jetspark.core.test_support import TestSupport
from jetspark.processors import combine_to_sliding_window_p
from jetspark.processors.aggregate import to_set
from jetspark.processors.windowing import KeyedWindowResult, sliding_window_policy

KEY = 77


def from_window_result(start: int, end: int, key: Any, value: Any) -> tuple[int, Any, Any]:
    return (end, key, value)


def test_when_multiple_frames_then_combine() -> None:
    """`SlidingWindowP_FrameCombiningTest.when_multipleFrames_then_combine`."""
    TestSupport.verify_processor(
        combine_to_sliding_window_p(sliding_window_policy(8, 4), to_set(), from_window_result)
    ).input(
        [
            KeyedWindowResult(0, 4, KEY, {"a"}),
            KeyedWindowResult(0, 4, KEY, {"b"}),
            KeyedWindowResult(4, 8, KEY, {"c"}),
        ]
    ).expect_output([(4, KEY, {"a", "b"}), (8, KEY, {"a", "b", "c"}), (12, KEY, {"c"})])
