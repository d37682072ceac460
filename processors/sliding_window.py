"""Sliding and tumbling window aggregation over frames (manual §7.3, §7.3.1, §7.3.2).

Each event is accumulated into its frame (labelled by the frame's exclusive end); when the
watermark reaches a window's end, the window's frames are combined into its result. With a
`deduct` primitive a sliding window is kept running: the leading frame is combined in and the
trailing frame deducted out; without one, every window is recombined from its frames.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.inbox import Inbox
from jetspark.core.snapshot_keys import BroadcastKey
from jetspark.core.state_definition import defines_state
from jetspark.core.suppliers import ProcessorFn
from jetspark.core.watermark import Watermark
from jetspark.processors.aggregate import AggregateOperation
from jetspark.processors.aggregation import accumulate_by_key, merge_restored
from jetspark.processors.emission import ResumableEmission
from jetspark.processors.functions import KeyFns, PerOrdinal, drain, entry_key, entry_value
from jetspark.processors.snapshots import RestoredMinimum
from jetspark.processors.watermark_policies import (
    MAX_TIMESTAMP,
    MIN_TIMESTAMP,
    Clock,
    monotonic_ms,
)
from jetspark.processors.windowing import (
    EarlyResults,
    KeyedWindowResult,
    SlidingWindowPolicy,
    TimestampFns,
    TimestampKind,
    WindowResultFn,
    as_early,
    clamped_timestamp,
    log_late_event,
)


class SlidingWindowP(AbstractProcessor):
    """Accumulates items into frames per key; emits
    `map_to_output_fn(start, end, key, result)` for each window once the watermark reaches its
    end, and every remaining window on completion.

    An event is late when its frame belongs to a window already emitted; it is dropped, logged
    and counted in `late_events_dropped`. (An event behind the watermark whose frame still
    awaits its window is accepted, as in Jet: no window is ever emitted without it.)

    With `early_results_period` (ms of `clock`), every period the windows holding data that the
    watermark has not closed yet are emitted too, their accumulators exported (kept), each
    output marked early where its type can say so (`windowing.as_early`; Jet 4's early
    results).

    Snapshot: each key's frames are saved under the key itself (`{frame: accumulator}`), and
    the next window to emit under a broadcast key (the minimum is restored). At-least-once:
    items processed after the snapshot are accumulated again, so windows may count them twice,
    and windows emitted after the snapshot may be emitted again.
    """

    def __init__(
        self,
        key_fns: PerOrdinal,
        frame_fns: PerOrdinal,
        window_policy: SlidingWindowPolicy,
        aggr_op: AggregateOperation,
        map_to_output_fn: WindowResultFn,
        early_results: EarlyResults | None = None,
    ) -> None:
        self._key_fns = key_fns
        self._frame_fns = frame_fns
        self._policy = window_policy
        self._op = aggr_op
        self._map_to_output_fn = map_to_output_fn
        self._running = aggr_op.deduct_fn is not None and not window_policy.is_tumbling
        self._frames: dict[int, dict[Any, Any]] = {}
        self._window: dict[Any, list[Any]] | None = None
        self._next_window: int | None = None
        self._output = ResumableEmission(self.emit_from_traverser)
        self._early_results = early_results
        self._early_output = ResumableEmission(self.emit_from_traverser)
        self._snapshot = ResumableEmission(self.emit_from_traverser_to_snapshot)
        self._restored_next_window = RestoredMinimum("next_window_to_emit")
        self.late_events_dropped = 0

    def process(self, ordinal: int, inbox: Inbox) -> None:
        frame_fn = self._frame_fns(ordinal)
        next_window = self._next_window
        by_frame: dict[int, list[Any]] = {}
        for item in drain(inbox):
            frame = frame_fn(item)
            if next_window is not None and frame < next_window:
                self._drop_late(frame, item)
            else:
                by_frame.setdefault(frame, []).append(item)
        key_fn, op = self._key_fns(ordinal), self._op
        for frame, items in by_frame.items():
            accs = self._frames.setdefault(frame, {})
            accumulate_by_key(accs, items, key_fn, op.accumulate_fn(ordinal), op.create_fn)

    def _drop_late(self, frame: int, item: Any) -> None:
        self.late_events_dropped += 1
        log_late_event(
            self.logger, item, f"its frame {frame} precedes the next window {self._next_window}"
        )

    def try_process_watermark(self, watermark: Watermark) -> bool:
        return self._output.emit(lambda: self._windows_up_to(watermark.timestamp))

    def try_process(self) -> bool:
        """Emits the early results when their period has passed (a list made at once, so a
        watermark closing windows meanwhile changes nothing of it)."""
        if not self._early_output.in_progress:
            early = self._early_results
            if early is None or not self._frames or not early.due():
                return True
        return self._early_output.emit(lambda: list(self._early_windows()))

    def _early_windows(self) -> Iterator[Any]:
        """Every window that holds data and is still open, with its exported results."""
        policy, op = self._policy, self._op
        frame_size = policy.frame_size
        end = min(self._frames) if self._next_window is None else self._next_window
        end = max(end, min(self._frames))
        last = self._last_window_end()
        while end <= last:
            window: dict[Any, Any] = {}
            for frame in range(end - policy.window_size + frame_size, end + 1, frame_size):
                for key, acc in self._frames.get(frame, {}).items():
                    if policy.is_tumbling:
                        window[key] = acc
                    else:
                        assert op.combine_fn is not None
                        window[key] = op.combine_fn(window.get(key) or op.create_fn(), acc)
            start = end - policy.window_size
            for key, acc in window.items():
                yield as_early(self._map_to_output_fn(start, end, key, op.export_fn(acc)))
            end += frame_size

    def complete(self) -> bool:
        if not self._frames and not self._output.in_progress:
            return True
        return self._output.emit(lambda: self._windows_up_to(self._last_window_end()))

    def _last_window_end(self) -> int:
        policy = self._policy
        return max(self._frames) + policy.window_size - policy.frame_size

    def _windows_up_to(self, watermark: int) -> Iterator[Any]:
        """The results of every window ending at or before `watermark`; evicts their frames."""
        policy = self._policy
        end = self._next_window
        while self._frames:
            bottom = min(self._frames)
            if end is None or bottom > end:
                end = bottom  # the windows before the oldest frame are empty: skip them
                self._window = None
            if end > watermark:
                break
            yield from self._results(end)
            self._evict_trailing_frame(end)
            end += policy.frame_size
        self._next_window = policy.higher_frame_ts(watermark)

    def _results(self, end: int) -> Iterator[Any]:
        start = end - self._policy.window_size
        map_to_output = self._map_to_output_fn
        if self._policy.is_tumbling:
            finish = self._op.finish_fn
            for key, acc in self._frames.get(end, {}).items():
                yield map_to_output(start, end, key, finish(acc))
            return
        result_fn = self._op.export_fn if self._running else self._op.finish_fn
        for key, (acc, _) in self._sliding_window(end).items():
            yield map_to_output(start, end, key, result_fn(acc))

    def _sliding_window(self, end: int) -> dict[Any, list[Any]]:
        """Key -> [accumulator, number of frames in it] of the window ending at `end`."""
        if self._window is None:
            frame_size = self._policy.frame_size
            self._window = {}
            for frame in range(end - self._policy.window_size + frame_size, end + 1, frame_size):
                self._add_frame(frame)
        else:
            self._add_frame(end)
        return self._window

    def _add_frame(self, frame: int) -> None:
        window = self._window
        assert window is not None
        combine = self._op.combine_fn
        assert combine is not None
        for key, acc in self._frames.get(frame, {}).items():
            slot = window.get(key)
            if slot is None:
                window[key] = [combine(self._op.create_fn(), acc), 1]
            else:
                slot[0] = combine(slot[0], acc)
                slot[1] += 1

    def _evict_trailing_frame(self, end: int) -> None:
        policy = self._policy
        evicted = self._frames.pop(end - policy.window_size + policy.frame_size, None)
        if not self._running:
            self._window = None
            return
        if evicted is None or self._window is None:
            return
        deduct = self._op.deduct_fn
        assert deduct is not None
        window = self._window
        for key, acc in evicted.items():
            slot = window[key]
            slot[1] -= 1
            if slot[1] == 0:
                del window[key]
            else:
                slot[0] = deduct(slot[0], acc)

    def save_to_snapshot(self) -> bool:
        return self._snapshot.emit(self._snapshot_entries)

    def _snapshot_entries(self) -> list[tuple[Any, Any]]:
        by_key: dict[Any, dict[int, Any]] = {}
        for frame, accs in self._frames.items():
            for key, acc in accs.items():
                by_key.setdefault(key, {})[frame] = acc
        entries: list[tuple[Any, Any]] = list(by_key.items())
        entries.append(self._restored_next_window.entry(self._next_window))
        return entries

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if isinstance(key, BroadcastKey):
            self._restored_next_window.restore(key, value)
            return
        for frame, acc in value.items():
            self._check_on_grid(frame, f"the saved frame {frame} of key {key!r}")
            merge_restored(self._frames.setdefault(frame, {}), key, acc, self._op)

    def finish_snapshot_restore(self) -> bool:
        self._next_window = self._restored_next_window.result(self._next_window)
        if self._next_window is not None:
            self._check_on_grid(self._next_window, f"the saved next window {self._next_window}")
        return True

    def _check_on_grid(self, frame: int, what: str) -> None:
        """Raises ValueError unless `frame` is a frame end of this processor's windows (or a
        label clamped to the timestamp range): a frame between them would never be emitted,
        and its items would be lost."""
        policy = self._policy
        clamped = frame in (MIN_TIMESTAMP, MAX_TIMESTAMP)
        if (frame - policy.frame_offset) % policy.frame_size and not clamped:
            raise ValueError(
                f"{what} is no frame end of {policy.state_description()} windows: the snapshot "
                "was taken with another window definition, and restored here its items would "
                "never be emitted"
            )


@dataclass(frozen=True)
class _FrameOfEvent:
    """The label of the frame an event's timestamp falls into."""

    timestamp_fn: Callable[[Any], int]
    window_policy: SlidingWindowPolicy

    def __call__(self, item: Any) -> int:
        # `window_policy.higher_frame_ts(timestamp)` inlined: called once per event
        policy = self.window_policy
        size = policy.frame_size
        later = self.timestamp_fn(item) + size
        label = later - (later - policy.frame_offset) % size
        return label if MIN_TIMESTAMP <= label <= MAX_TIMESTAMP else clamped_timestamp(label)


def _frame_fns(
    timestamp_fns: TimestampFns, kind: TimestampKind, policy: SlidingWindowPolicy
) -> PerOrdinal:
    fns = PerOrdinal(timestamp_fns, "timestamp fn")
    if kind is TimestampKind.FRAME:
        return fns
    if kind is TimestampKind.EVENT:
        return fns.map(lambda fn: _FrameOfEvent(fn, policy))
    raise TypeError(f"timestamp_kind must be a TimestampKind, got {kind!r}")


def _window_end(result: Any) -> int:
    return result.end


def _sliding_window_p(
    key_fns: KeyFns,
    frame_fns: PerOrdinal,
    policy: SlidingWindowPolicy,
    aggr_op: AggregateOperation,
    map_to_output_fn: WindowResultFn,
    early_results_period: int = 0,
    clock: Clock = monotonic_ms,
) -> ProcessorFn:
    keys = PerOrdinal(key_fns, "key fn")
    keys.check_matches(frame_fns)
    keys.check_matches(aggr_op.accumulate_fns)
    if not policy.is_tumbling:
        aggr_op.require_combine("a sliding (not tumbling) window")
    early = EarlyResults.timer(early_results_period, clock)
    return defines_state(
        lambda: SlidingWindowP(keys, frame_fns, policy, aggr_op, map_to_output_fn, early()),
        SlidingWindowP,
        window=policy,
        aggregate=aggr_op,
        key=keys,
    )


def aggregate_to_sliding_window_p(
    key_fn: KeyFns,
    timestamp_fn: TimestampFns,
    timestamp_kind: TimestampKind,
    window_policy: SlidingWindowPolicy,
    aggr_op: AggregateOperation,
    map_to_output_fn: WindowResultFn = KeyedWindowResult,
    *,
    early_results_period: int = 0,
    clock: Clock = monotonic_ms,
) -> ProcessorFn:
    """Single-stage sliding window aggregation: emits `map_to_output_fn(start, end, key, result)`
    per window and key once the watermark reaches the window's end; with
    `early_results_period` (ms), the open windows' partial results every period too.
    """
    frames = _frame_fns(timestamp_fn, timestamp_kind, window_policy)
    return _sliding_window_p(
        key_fn, frames, window_policy, aggr_op, map_to_output_fn, early_results_period, clock
    )


def accumulate_by_frame_p(
    key_fn: KeyFns,
    timestamp_fn: TimestampFns,
    timestamp_kind: TimestampKind,
    window_policy: SlidingWindowPolicy,
    aggr_op: AggregateOperation,
) -> ProcessorFn:
    """First stage of two-stage windowing: emits `KeyedWindowResult(start, end, key, accumulator)`
    per frame and key once the watermark reaches the frame's end.
    """
    frames = _frame_fns(timestamp_fn, timestamp_kind, window_policy)
    return _sliding_window_p(
        key_fn,
        frames,
        window_policy.to_tumbling_by_frame(),
        aggr_op.with_identity_finish(),
        KeyedWindowResult,
    )


def combine_to_sliding_window_p(
    window_policy: SlidingWindowPolicy,
    aggr_op: AggregateOperation,
    map_to_output_fn: WindowResultFn = KeyedWindowResult,
) -> ProcessorFn:
    """Second stage of two-stage windowing: combines the frames `accumulate_by_frame_p` emitted
    (route them here by `entry_key`) into sliding windows, emitted as the watermark passes.
    """
    frames = PerOrdinal(_window_end, "timestamp fn")
    return _sliding_window_p(
        entry_key,
        frames,
        window_policy,
        aggr_op.with_combining_accumulate_fn(entry_value),
        map_to_output_fn,
    )
