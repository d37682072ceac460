"""Watermark policies and watermark emission (throttling) policies, manual §8.5.

A watermark policy turns observed event timestamps (and, for some, the passage of time) into the
"ideal" watermark. Policies are stateful, so the factories return zero-argument suppliers and each
processor makes its own instance. The clock of the time-aware policies is injectable: any
zero-argument callable returning milliseconds, so tests advance time without sleeping.
Emission policies are stateless: they decide which watermark to emit, if any (Jet 0.7's
`WatermarkEmissionPolicy.throttleWm`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

MIN_TIMESTAMP = -(2**63)
"""The watermark before any event was observed (Jet's Long.MIN_VALUE): never emitted."""

MAX_TIMESTAMP = 2**63 - 1
"""The highest timestamp (Jet's Long.MAX_VALUE): frame arithmetic clamps to it."""

Clock = Callable[[], int]
"""A zero-argument callable returning the current time in milliseconds."""

_DELAY_SAMPLES = 16
"""How many timestamp samples `limiting_lag_and_delay` keeps per `max_delay_ms` (Jet: 16)."""


def monotonic_ms() -> int:
    """Milliseconds of the monotonic system clock: measures lulls, immune to clock jumps."""
    return time.monotonic_ns() // 1_000_000


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch: for timestamps that are themselves epoch milliseconds."""
    return time.time_ns() // 1_000_000


class WatermarkPolicy(Protocol):
    """Computes the watermark of one (sub)stream from the timestamps observed in it."""

    def report_event(self, timestamp: int) -> int:
        """Observes an event's timestamp and returns the watermark after it."""
        ...

    def current_watermark(self) -> int:
        """The watermark now, with no new event (time-aware policies advance it during a lull)."""
        ...


class _LimitingLag:
    """The watermark lags the top observed timestamp by `lag`."""

    def __init__(self, lag: int) -> None:
        self._lag = lag
        self._watermark = MIN_TIMESTAMP

    def report_event(self, timestamp: int) -> int:
        self._watermark = max(self._watermark, timestamp - self._lag)
        return self._watermark

    def current_watermark(self) -> int:
        return self._watermark


class _LimitingLagAndDelay:
    """As limiting lag, and the watermark reaches each timestamp within `max_delay_ms`.

    Keeps at most about 16 samples of (time observed, top timestamp) per `max_delay_ms`; a
    sample's time is when its bucket opened, so no timestamp waits longer than `max_delay_ms`.
    """

    def __init__(self, lag: int, max_delay_ms: int, clock: Clock) -> None:
        self._lag = lag
        self._max_delay = max_delay_ms
        self._bucket = max(1, max_delay_ms // _DELAY_SAMPLES)
        self._clock = clock
        self._top = MIN_TIMESTAMP
        self._samples: deque[list[int]] = deque()
        self._watermark = MIN_TIMESTAMP

    def report_event(self, timestamp: int) -> int:
        if timestamp > self._top:
            self._top = timestamp
            now = self._clock()
            samples = self._samples
            if samples and now - samples[-1][0] < self._bucket:
                samples[-1][1] = timestamp
            else:
                samples.append([now, timestamp])
            self._watermark = max(self._watermark, timestamp - self._lag)
        return self.current_watermark()

    def current_watermark(self) -> int:
        samples = self._samples
        if samples:
            due = self._clock() - self._max_delay
            while samples and samples[0][0] <= due:
                self._watermark = max(self._watermark, samples.popleft()[1])
        return self._watermark


class _LimitingLagAndLull:
    """As limiting lag; after `max_lull_ms` without the data advancing the watermark, the
    watermark advances in lockstep with the clock (so the distance to local time stays fixed).

    Until the first event the watermark stays at MIN_TIMESTAMP: a substream that never sees an
    event holds the downstream watermark back (manual §8.5.1).
    """

    def __init__(self, lag: int, max_lull_ms: int, clock: Clock) -> None:
        self._lag = lag
        self._max_lull = max_lull_ms
        self._clock = clock
        self._watermark = MIN_TIMESTAMP
        self._advanced_at = 0

    def report_event(self, timestamp: int) -> int:
        candidate = timestamp - self._lag
        if candidate > self.current_watermark():
            self._watermark = candidate
            self._advanced_at = self._clock()
        return self._watermark

    def current_watermark(self) -> int:
        if self._watermark == MIN_TIMESTAMP:
            return self._watermark
        now = self._clock()
        lull_excess = now - self._advanced_at - self._max_lull
        if lull_excess > 0:
            self._watermark += lull_excess
            self._advanced_at = now - self._max_lull
        return self._watermark


class _LimitingTimestampAndWallClockLag:
    """The watermark lags the top timestamp by at most `timestamp_lag` and the wall clock by at
    most `wall_clock_lag` (timestamps must be epoch milliseconds in sync with local time).
    """

    def __init__(self, timestamp_lag: int, wall_clock_lag: int, clock: Clock) -> None:
        self._timestamp_lag = timestamp_lag
        self._wall_clock_lag = wall_clock_lag
        self._clock = clock
        self._watermark = MIN_TIMESTAMP

    def report_event(self, timestamp: int) -> int:
        self._watermark = max(self._watermark, timestamp - self._timestamp_lag)
        return self.current_watermark()

    def current_watermark(self) -> int:
        self._watermark = max(self._watermark, self._clock() - self._wall_clock_lag)
        return self._watermark


WatermarkPolicySupplier = Callable[[], WatermarkPolicy]
"""A zero-argument callable making a fresh policy: one instance per processor."""


def limiting_lag(lag: int) -> WatermarkPolicySupplier:
    """Watermark = top observed timestamp - `lag`; it stays put during a lull."""
    _check_not_negative(lag=lag)
    return partial(_LimitingLag, lag)


def limiting_lag_and_delay(
    lag: int, max_delay_ms: int, clock: Clock = monotonic_ms
) -> WatermarkPolicySupplier:
    """Limiting lag, plus: the watermark reaches any observed timestamp within `max_delay_ms`.

    Makes no assumption on the timestamps' unit; skew between substreams can still hold the
    coalesced watermark back.
    """
    _check_not_negative(lag=lag, max_delay_ms=max_delay_ms)
    return partial(_LimitingLagAndDelay, lag, max_delay_ms, clock)


def limiting_lag_and_lull(
    lag: int, max_lull_ms: int, clock: Clock = monotonic_ms
) -> WatermarkPolicySupplier:
    """Limiting lag; after a lull of `max_lull_ms` the watermark advances with the clock.

    Assumes millisecond timestamps (any origin).
    """
    _check_not_negative(lag=lag, max_lull_ms=max_lull_ms)
    return partial(_LimitingLagAndLull, lag, max_lull_ms, clock)


def limiting_timestamp_and_wall_clock_lag(
    timestamp_lag: int, wall_clock_lag: int, clock: Clock = wall_clock_ms
) -> WatermarkPolicySupplier:
    """Watermark ≥ top timestamp - `timestamp_lag` and ≥ wall clock - `wall_clock_lag`.

    Assumes timestamps are epoch milliseconds synchronized with the local clock; advances even
    in a substream that never sees an event.
    """
    _check_not_negative(timestamp_lag=timestamp_lag, wall_clock_lag=wall_clock_lag)
    return partial(_LimitingTimestampAndWallClockLag, timestamp_lag, wall_clock_lag, clock)


def _check_not_negative(**values: int) -> None:
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"{name} must not be negative, got {value}")


class WatermarkEmissionPolicy(Protocol):
    """Throttles watermarks: decides which one to emit, given the last one emitted (Jet 0.7)."""

    def throttle_wm(self, current_wm: int, last_emitted_wm: int) -> int:
        """The watermark to emit now; `last_emitted_wm` (or below it) means "emit nothing"."""
        ...


@dataclass(frozen=True)
class _NoThrottling:
    def throttle_wm(self, current_wm: int, last_emitted_wm: int) -> int:
        return current_wm


@dataclass(frozen=True)
class _EmitByMinStep:
    min_step: int

    def throttle_wm(self, current_wm: int, last_emitted_wm: int) -> int:
        return current_wm if current_wm >= last_emitted_wm + self.min_step else last_emitted_wm


@dataclass(frozen=True)
class _EmitByFrame:
    window_policy: Any

    def throttle_wm(self, current_wm: int, last_emitted_wm: int) -> int:
        return max(self.window_policy.floor_frame_ts(current_wm), last_emitted_wm)


def no_throttling() -> WatermarkEmissionPolicy:
    """Emits every watermark that advanced."""
    return _NoThrottling()


def emit_by_min_step(min_step: int) -> WatermarkEmissionPolicy:
    """Emits a watermark once it is at least `min_step` past the last emitted one."""
    if min_step < 1:
        raise ValueError(f"min_step must be >= 1, got {min_step}")
    return _EmitByMinStep(min_step)


def emit_by_frame(window_policy: Any) -> WatermarkEmissionPolicy:
    """Emits the watermark floored to a frame boundary of `window_policy`, once per new frame
    (manual §8.5.2): a window processor acts only when the watermark passes a frame's end.
    """
    return _EmitByFrame(window_policy)
