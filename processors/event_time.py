"""Event time inside a partitioned source: a watermark per source partition, coalesced in the
source, with quiet partitions marked idle (Jet 4's `EventTimePolicy` and `EventTimeMapper`).

A source that reads several partitions of one stream (Kafka partitions, journal partitions)
sees each partition in order, but their event times drift apart. Inserting watermarks
downstream of the source would coalesce one policy over the interleaved partitions, so a
partition far ahead makes the events of one behind it late. The mapper keeps one watermark
policy per partition and emits the minimum over the partitions that are not idle: a partition
with no event for `idle_timeout_ms` stops holding the watermark back until its next event, and
a source whose every partition is idle (or that reads none) emits IDLE_MESSAGE once, so the
coalescing downstream ignores it (manual §7.2.3, §8.5).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jetspark.core.watermark import IDLE_MESSAGE, Watermark
from jetspark.processors.watermark_policies import (
    MIN_TIMESTAMP,
    Clock,
    WatermarkEmissionPolicy,
    WatermarkPolicy,
    WatermarkPolicySupplier,
    monotonic_ms,
    no_throttling,
)

DEFAULT_IDLE_TIMEOUT_MS = 60_000
"""A partition with no event for this long stops holding the watermark back (Jet's default)."""


@dataclass(frozen=True)
class EventTimePolicy:
    """How a source assigns event time and watermarks (Jet 4's `EventTimePolicy`).

    `timestamp_fn(item)` gives an item's event time (None: the source's native timestamp, such
    as a Kafka record's); `wm_policy` (a supplier, such as `limiting_lag(100)`) makes one
    watermark policy per partition; `emission_policy` throttles what is emitted;
    `idle_timeout_ms` (0: never) marks a quiet partition idle; `clock` measures it (ms).
    """

    timestamp_fn: Callable[[Any], int] | None
    wm_policy: WatermarkPolicySupplier
    emission_policy: WatermarkEmissionPolicy = field(default_factory=no_throttling)
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
    clock: Clock = monotonic_ms

    def __post_init__(self) -> None:
        if hasattr(self.wm_policy, "report_event") or not callable(self.wm_policy):
            raise TypeError(
                "wm_policy must be a zero-argument supplier of a WatermarkPolicy, such as "
                f"limiting_lag(100), not {type(self.wm_policy).__name__}"
            )
        if self.timestamp_fn is not None and not callable(self.timestamp_fn):
            raise TypeError(
                f"timestamp_fn must be callable or None, got {type(self.timestamp_fn).__name__}"
            )
        if not isinstance(self.idle_timeout_ms, int) or self.idle_timeout_ms < 0:
            raise ValueError(
                f"idle_timeout_ms must be an int >= 0 (0: never idle), got {self.idle_timeout_ms!r}"
            )


class _Partition:
    __slots__ = ("idle", "last_event_at", "policy", "restored")

    def __init__(self, policy: WatermarkPolicy, now: int) -> None:
        self.policy = policy
        self.last_event_at = now
        self.idle = False
        self.restored = MIN_TIMESTAMP
        """The watermark a restore gave this partition: it never goes below it."""

    def watermark(self) -> int:
        return max(self.policy.current_watermark(), self.restored)


class EventTimeMapper:
    """The watermarks of one source processor over the partitions it reads (module docstring).

    `on_event(partition, timestamp)` and `on_tick()` return what to emit before the event (or
    now): nothing, a Watermark, or IDLE_MESSAGE. Emitted watermarks strictly increase.
    """

    def __init__(self, policy: EventTimePolicy) -> None:
        self._policy = policy
        self._clock = policy.clock
        self._partitions: list[_Partition] = []
        self._last_emitted = MIN_TIMESTAMP
        self._idle_emitted = False

    @property
    def partition_count(self) -> int:
        return len(self._partitions)

    def add_partitions(self, count: int) -> None:
        """Adds `count` partitions at the end (indexes from the current count on)."""
        now = self._clock()
        self._partitions.extend(_Partition(self._policy.wm_policy(), now) for _ in range(count))

    def watermark(self, partition: int) -> int:
        """Partition `partition`'s own watermark (saved in snapshots)."""
        return self._partitions[partition].watermark()

    def restore_watermark(self, partition: int, watermark: int) -> None:
        """Resumes partition `partition` from a saved watermark."""
        state = self._partitions[partition]
        state.restored = max(state.restored, watermark)

    def on_event(self, partition: int, timestamp: int) -> Watermark | None:
        """Observes an event of `partition`; returns the watermark to emit before it, if any."""
        state = self._partitions[partition]
        state.policy.report_event(timestamp)
        state.last_event_at = self._clock()
        if state.idle:
            state.idle = False
        self._idle_emitted = False
        return self._advance()

    def on_tick(self) -> Watermark | None:
        """No event now: marks quiet partitions idle and returns what to emit, if anything."""
        timeout = self._policy.idle_timeout_ms
        if timeout > 0:
            now = self._clock()
            for state in self._partitions:
                if not state.idle and now - state.last_event_at >= timeout:
                    state.idle = True
        if not self._partitions or all(state.idle for state in self._partitions):
            if timeout == 0 and self._partitions:
                return None
            if self._idle_emitted:
                return None
            self._idle_emitted = True
            return IDLE_MESSAGE
        return self._advance()

    def _advance(self) -> Watermark | None:
        active = [state.watermark() for state in self._partitions if not state.idle]
        if not active:
            return None
        current = min(active)
        throttled = self._policy.emission_policy.throttle_wm(current, self._last_emitted)
        if throttled <= self._last_emitted:
            return None
        self._last_emitted = throttled
        return Watermark(throttled)
