"""Windowing definitions: window policies, timestamp kinds, window results (manual §7.2-7.4).

The time axis is cut into frames of `frame_size`; a sliding window covers `window_size /
frame_size` consecutive frames and slides by one frame; a tumbling window is one frame. A frame
and a window are labelled by their exclusive end: the frame `[10, 20)` is "frame 20". This
module also re-exports the watermark and emission policies, so windowing needs one import.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from jetspark.processors.events import JetEvent
from jetspark.processors.watermark_policies import (
    MAX_TIMESTAMP,
    MIN_TIMESTAMP,
    Clock,
    WatermarkEmissionPolicy,
    WatermarkPolicy,
    WatermarkPolicySupplier,
    emit_by_frame,
    emit_by_min_step,
    limiting_lag,
    limiting_lag_and_delay,
    limiting_lag_and_lull,
    limiting_timestamp_and_wall_clock_lag,
    monotonic_ms,
    no_throttling,
    wall_clock_ms,
)

TimestampFns = Callable[[Any], int] | Sequence[Callable[[Any], int]]
"""One timestamp function for every inbound ordinal, or one per ordinal."""

WindowResultFn = Callable[[int, int, Any, Any], Any]
"""`map_to_output_fn(start, end, key, value)`: what a window processor emits per window and key."""

__all__ = [
    "MAX_TIMESTAMP",
    "MIN_TIMESTAMP",
    "Clock",
    "KeyedWindowResult",
    "SlidingWindowPolicy",
    "TimestampFns",
    "TimestampKind",
    "WatermarkEmissionPolicy",
    "WatermarkPolicy",
    "WatermarkPolicySupplier",
    "WindowResultFn",
    "emit_by_frame",
    "emit_by_min_step",
    "limiting_lag",
    "limiting_lag_and_delay",
    "limiting_lag_and_lull",
    "limiting_timestamp_and_wall_clock_lag",
    "monotonic_ms",
    "no_throttling",
    "sliding_window_policy",
    "tumbling_window_policy",
    "wall_clock_ms",
]


@dataclass(frozen=True)
class SlidingWindowPolicy:
    """Windows of `window_size` sliding by `frame_size`, frames aligned to `frame_offset`."""

    frame_size: int
    window_size: int
    frame_offset: int = 0

    def __post_init__(self) -> None:
        if self.frame_size < 1:
            raise ValueError(f"the frame size (slide) must be >= 1, got {self.frame_size}")
        if self.window_size < self.frame_size or self.window_size % self.frame_size:
            raise ValueError(
                f"the window size ({self.window_size}) must be a positive multiple of the "
                f"slide ({self.frame_size})"
            )
        if not 0 <= self.frame_offset < self.frame_size:
            raise ValueError(
                f"the frame offset must be in [0, {self.frame_size}), got {self.frame_offset}"
            )

    @property
    def is_tumbling(self) -> bool:
        """True when a window is a single frame."""
        return self.window_size == self.frame_size

    def floor_frame_ts(self, timestamp: int) -> int:
        """The highest frame boundary <= `timestamp` (the start of its frame), clamped to Java's
        long range as Jet's is (MIN_TIMESTAMP..MAX_TIMESTAMP)."""
        return clamped_timestamp(timestamp - (timestamp - self.frame_offset) % self.frame_size)

    def higher_frame_ts(self, timestamp: int) -> int:
        """The lowest frame boundary > `timestamp`: the label (exclusive end) of its frame,
        clamped like `floor_frame_ts`."""
        later = timestamp + self.frame_size
        return clamped_timestamp(later - (later - self.frame_offset) % self.frame_size)

    def state_description(self) -> str:
        """`tumbling(size=100)` or `sliding(size=1000, slide=100)`, with any frame offset."""
        offset = f", offset={self.frame_offset}" if self.frame_offset else ""
        if self.is_tumbling:
            return f"tumbling(size={self.window_size}{offset})"
        return f"sliding(size={self.window_size}, slide={self.frame_size}{offset})"

    def with_offset(self, offset: int) -> SlidingWindowPolicy:
        """The same windows with frame boundaries shifted to `offset` (mod the frame size)."""
        return replace(self, frame_offset=offset % self.frame_size)

    def to_tumbling_by_frame(self) -> SlidingWindowPolicy:
        """Tumbling windows of one frame each: what the first stage of two-stage windowing uses."""
        return replace(self, window_size=self.frame_size)


def clamped_timestamp(timestamp: int) -> int:
    """`timestamp` within Java's long range (MIN_TIMESTAMP..MAX_TIMESTAMP), as Jet's are."""
    if MIN_TIMESTAMP <= timestamp <= MAX_TIMESTAMP:
        return timestamp
    return MIN_TIMESTAMP if timestamp < MIN_TIMESTAMP else MAX_TIMESTAMP


def sliding_window_policy(window_size: int, slide_by: int) -> SlidingWindowPolicy:
    """Windows of `window_size` advancing by `slide_by`; the size must be a multiple of it."""
    return SlidingWindowPolicy(frame_size=slide_by, window_size=window_size)


def tumbling_window_policy(window_size: int) -> SlidingWindowPolicy:
    """Back-to-back windows of `window_size`."""
    return SlidingWindowPolicy(frame_size=window_size, window_size=window_size)


class TimestampKind(enum.Enum):
    """What a window processor's timestamp function returns."""

    EVENT = "event"
    """The event's own timestamp; the processor finds the frame it falls into."""
    FRAME = "frame"
    """Already a frame label (a frame's exclusive end), as a first stage emits."""


class KeyedWindowResult(NamedTuple):
    """The result of a window `[start, end)` for one grouping key; sliding and session windows
    emit these by default, and the first windowing stage emits one per frame and key.
    `is_early`: a partial result of a window still open (early results, Jet 4).
    """

    start: int
    end: int
    key: Any
    value: Any

    @property
    def is_early(self) -> bool:
        return False

    def as_early(self) -> KeyedWindowResult:
        """The same result, marked as an early (partial) one."""
        return EarlyKeyedWindowResult(*self)


class EarlyKeyedWindowResult(KeyedWindowResult):
    """A partial result of a window still open: equal to a final result of the same fields,
    told apart by `is_early`."""

    __slots__ = ()

    @property
    def is_early(self) -> bool:
        return True


def as_early(output: Any) -> Any:
    """A window's output marked early where its type can say so (`as_early()`; a JetEvent's
    item), otherwise the output itself."""
    if type(output) is JetEvent:
        return JetEvent(output.timestamp, as_early(output.item))
    mark = getattr(output, "as_early", None)
    return mark() if callable(mark) else output


class EarlyResults:
    """When a window processor emits early results: every `period_ms` of `clock` (0: never)."""

    __slots__ = ("_clock", "_last", "_period")

    def __init__(self, period_ms: int, clock: Clock = monotonic_ms) -> None:
        if not isinstance(period_ms, int) or isinstance(period_ms, bool) or period_ms < 0:
            raise ValueError(f"early_results_period must be an int >= 0 (ms), got {period_ms!r}")
        self._period = period_ms
        self._clock = clock
        self._last = clock() if period_ms else 0

    @staticmethod
    def timer(period_ms: int, clock: Clock = monotonic_ms) -> Callable[[], EarlyResults | None]:
        """Checks `period_ms` now; the function returned gives each processor its own timer
        (None when the period is 0)."""
        EarlyResults(period_ms, clock)
        return lambda: EarlyResults(period_ms, clock) if period_ms else None

    def due(self) -> bool:
        """True once per period: the caller emits its early results now."""
        if not self._period:
            return False
        now = self._clock()
        if now < self._last + self._period:
            return False
        self._last = now
        return True


def log_late_event(logger: logging.Logger, item: Any, reason: str) -> None:
    """Logs an event dropped for arriving too late (manual §7.2.3: late events are filtered out)."""
    logger.info("Late event dropped (%s): %.200r", reason, item)
