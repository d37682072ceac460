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


def check_policy(policy: EventTimePolicy | None, what: str) -> None:
    """TypeError naming `what` unless `policy` is None or an EventTimePolicy."""
    if policy is not None and not isinstance(policy, EventTimePolicy):
        kind = type(policy).__name__
        raise TypeError(f"{what}: event_time_policy must be an EventTimePolicy, got {kind}")


class _Partition:
    __slots__ = ("idle", "idle_at", "policy", "restored", "watermark")

    def __init__(self, policy: WatermarkPolicy, idle_at: int) -> None:
        self.policy = policy
        self.idle_at = idle_at
        """When the partition turns idle unless an event comes first (ms of the clock)."""
        self.idle = False
        self.restored = MIN_TIMESTAMP
        """The watermark a restore gave this partition: it never goes below it."""
        self.watermark = MIN_TIMESTAMP
        """The partition's watermark when last asked of its policy."""

    def refresh(self) -> int:
        self.watermark = max(self.policy.current_watermark(), self.restored)
        return self.watermark


class EventTimeMapper:
    """The watermarks of one source processor over the partitions it reads (module docstring).

    `on_event(partition, timestamp, now)` and `on_tick()` return what to emit before the event
    (or now): nothing, a Watermark, or IDLE_MESSAGE. Emitted watermarks strictly increase. As
    in Jet, every call also marks the partitions quiet for the idle timeout idle, so a quiet
    partition stops holding the watermark back even while others are busy. An event refreshes
    its own partition's watermark; the others' are asked of their policies (which may move
    with time) once per millisecond of the clock.
    """

    def __init__(self, policy: EventTimePolicy) -> None:
        self._policy = policy
        self._clock = policy.clock
        self._timeout = policy.idle_timeout_ms if policy.idle_timeout_ms > 0 else None
        self._throttle = policy.emission_policy.throttle_wm
        self._partitions: list[_Partition] = []
        self._last_emitted = MIN_TIMESTAMP
        self._idle_emitted = False
        self._refreshed_at: int | None = None

    @property
    def partition_count(self) -> int:
        return len(self._partitions)

    def now(self) -> int:
        """The policy's clock (ms): what `on_event` takes as `now`."""
        return self._clock()

    def add_partitions(self, count: int) -> None:
        """Adds `count` partitions at the end (indexes from the current count on)."""
        idle_at = self._idle_at(self._clock())
        self._partitions.extend(_Partition(self._policy.wm_policy(), idle_at) for _ in range(count))
        self._refreshed_at = None

    def _idle_at(self, now: int) -> int:
        return now + self._timeout if self._timeout is not None else _NEVER

    def watermark(self, partition: int) -> int:
        """Partition `partition`'s own watermark (saved in snapshots)."""
        return self._partitions[partition].refresh()

    def restore_watermark(self, partition: int, watermark: int) -> None:
        """Resumes partition `partition` from a saved watermark."""
        state = self._partitions[partition]
        state.restored = max(state.restored, watermark)
        state.refresh()

    def on_event(self, partition: int, timestamp: int, now: int | None = None) -> Watermark | None:
        """Observes an event of `partition` at `now` (the clock's ms, read once per batch of
        events by the caller, or here); returns the watermark to emit before it, if any."""
        if now is None:
            now = self._clock()
        state = self._partitions[partition]
        before, was_idle = state.watermark, state.idle
        state.policy.report_event(timestamp)
        state.idle_at = self._idle_at(now)
        state.idle = False
        self._idle_emitted = False
        if state.refresh() == before and not was_idle and now == self._refreshed_at:
            return None  # nothing _advance reads changed since it last ran: most events
        return self._advance(now)

    def on_tick(self) -> Watermark | None:
        """No event now: marks quiet partitions idle and returns what to emit, if anything:
        IDLE_MESSAGE once when every partition is idle (or the processor reads none)."""
        self._refreshed_at = None
        emitted = self._advance(self._clock())
        if emitted is not None:
            return emitted
        partitions = self._partitions
        idle = not partitions or all(state.idle for state in partitions)
        if not idle or self._idle_emitted:
            return None
        self._idle_emitted = True
        return IDLE_MESSAGE

    def _advance(self, now: int) -> Watermark | None:
        """The lowest watermark of the partitions that are not idle, if the emission policy
        lets it out above the last one emitted (quiet partitions marked idle first)."""
        refresh = now != self._refreshed_at
        self._refreshed_at = now
        lowest = None
        for state in self._partitions:
            if state.idle:
                continue
            if now >= state.idle_at:
                state.idle = True
                continue
            watermark = state.refresh() if refresh else state.watermark
            if lowest is None or watermark < lowest:
                lowest = watermark
        if lowest is None:
            return None
        throttled = self._throttle(lowest, self._last_emitted)
        if throttled <= self._last_emitted:
            return None
        self._last_emitted = throttled
        return Watermark(throttled)


_NEVER = 2**63 - 1
"""The idle deadline of a mapper without idle timeout."""
