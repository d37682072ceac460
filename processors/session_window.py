"""Session window aggregation (manual §7.4).

An event covers the interval `[timestamp, timestamp + session_timeout]`. It joins the session of
its key whose interval overlaps its own (extending it), starts a new session when none does, and
merges two sessions when it bridges the gap between them. A session is emitted once the
watermark passes its end (`end < watermark`), as `map_to_output_fn(start, end, key, result)`.
With early results, every open session is also emitted every period, marked early.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.inbox import Inbox
from jetspark.core.snapshot_keys import BroadcastKey
from jetspark.core.state_definition import defines_state
from jetspark.core.suppliers import ProcessorFn
from jetspark.core.watermark import Watermark
from jetspark.processors.aggregate import AggregateOperation
from jetspark.processors.emission import ResumableEmission
from jetspark.processors.functions import KeyFns, PerOrdinal, drain
from jetspark.processors.snapshots import RestoredMinimum
from jetspark.processors.watermark_policies import Clock, monotonic_ms
from jetspark.processors.windowing import (
    EarlyResults,
    KeyedWindowResult,
    TimestampFns,
    WindowResultFn,
    as_early,
    log_late_event,
)

_END_OF_TIME = float("inf")

Session = list[Any]
"""`[start, end, accumulator]` of one session of one key."""


class SessionWindowP(AbstractProcessor):
    """Aggregates events into session windows per key (see the module docstring).

    An event behind the watermark is late: dropped, logged and counted in
    `late_events_dropped`. Snapshot: each key's open sessions are saved under the key itself as
    `(start, end, accumulator)` tuples; the current watermark under a broadcast key (the
    minimum is restored). At-least-once: events processed after the snapshot are accumulated
    again after a restart, so a session may count them twice, and sessions emitted after the
    snapshot may be emitted again.
    """

    def __init__(
        self,
        session_timeout: int,
        timestamp_fns: PerOrdinal,
        key_fns: PerOrdinal,
        aggr_op: AggregateOperation,
        map_to_output_fn: WindowResultFn,
        early_results: EarlyResults | None = None,
    ) -> None:
        self._timeout = session_timeout
        self._timestamp_fns = timestamp_fns
        self._key_fns = key_fns
        self._op = aggr_op
        self._combine = aggr_op.require_combine("a session window")
        self._map_to_output_fn = map_to_output_fn
        self._sessions: dict[Any, list[Session]] = {}
        self._deadlines: list[tuple[int, int, Any]] = []
        self._sequence = 0
        self._watermark: int | None = None
        self._restored_watermark = RestoredMinimum("session_watermark")
        self._output = ResumableEmission(self.emit_from_traverser)
        self._early_results = early_results
        self._early_output = ResumableEmission(self.emit_from_traverser)
        self._snapshot = ResumableEmission(self.emit_from_traverser_to_snapshot)
        self.late_events_dropped = 0

    def process(self, ordinal: int, inbox: Inbox) -> None:
        timestamp_fn = self._timestamp_fns(ordinal)
        key_fn = self._key_fns(ordinal)
        accumulate = self._op.accumulate_fn(ordinal)
        watermark = self._watermark
        for item in drain(inbox):
            timestamp = timestamp_fn(item)
            if watermark is not None and timestamp < watermark:
                self.late_events_dropped += 1
                log_late_event(
                    self.logger, item, f"timestamp {timestamp} is behind watermark {watermark}"
                )
                continue
            session = self._session_covering(key_fn(item), timestamp, timestamp + self._timeout)
            session[2] = accumulate(session[2], item)

    def _session_covering(self, key: Any, start: int, end: int) -> Session:
        """The session of `key` that covers `[start, end]`: an overlapping one, extended; several
        overlapping ones, merged; or a new one.
        """
        sessions = self._sessions.setdefault(key, [])
        overlapping = [i for i, s in enumerate(sessions) if s[0] <= end and s[1] >= start]
        if not overlapping:
            session = [start, end, self._op.create_fn()]
            sessions.append(session)
            sessions.sort(key=_session_start)
            self._add_deadline(end, key)
            return session
        first, last = overlapping[0], overlapping[-1]
        session = sessions[first]
        for other in sessions[first + 1 : last + 1]:
            session[2] = self._combine(session[2], other[2])
        new_end = max(sessions[last][1], end)
        del sessions[first + 1 : last + 1]
        session[0] = min(session[0], start)
        if new_end != session[1]:
            session[1] = new_end
            self._add_deadline(new_end, key)
        return session

    def _add_deadline(self, end: int, key: Any) -> None:
        self._sequence += 1  # breaks ties in the heap: keys need not be comparable
        heapq.heappush(self._deadlines, (end, self._sequence, key))

    def try_process_watermark(self, watermark: Watermark) -> bool:
        self._watermark = watermark.timestamp
        return self._output.emit(lambda: self._sessions_ending_before(watermark.timestamp))

    def complete(self) -> bool:
        return self._output.emit(lambda: self._sessions_ending_before(_END_OF_TIME))

    def try_process(self) -> bool:
        """Emits every open session's partial result when the early-results period passed."""
        if not self._early_output.in_progress:
            early = self._early_results
            if early is None or not self._sessions or not early.due():
                return True
        return self._early_output.emit(self._open_sessions)

    def _open_sessions(self) -> list[Any]:
        export, output = self._op.export_fn, self._map_to_output_fn
        return [
            as_early(output(start, end, key, export(acc)))
            for key, sessions in self._sessions.items()
            for start, end, acc in sessions
        ]

    def _sessions_ending_before(self, limit: float) -> Iterator[Any]:
        """Emits and forgets every session whose end is below `limit`, earliest deadline first."""
        deadlines = self._deadlines
        due_keys: dict[Any, None] = {}
        while deadlines and deadlines[0][0] < limit:
            due_keys[heapq.heappop(deadlines)[2]] = None
        finish = self._op.finish_fn
        map_to_output = self._map_to_output_fn
        for key in due_keys:
            sessions = self._sessions.get(key, [])
            while sessions and sessions[0][1] < limit:
                start, end, acc = sessions.pop(0)
                yield map_to_output(start, end, key, finish(acc))
            if not sessions:
                self._sessions.pop(key, None)

    def save_to_snapshot(self) -> bool:
        return self._snapshot.emit(self._snapshot_entries)

    def _snapshot_entries(self) -> list[tuple[Any, Any]]:
        entries: list[tuple[Any, Any]] = [
            (key, [tuple(s) for s in sessions]) for key, sessions in self._sessions.items()
        ]
        entries.append(self._restored_watermark.entry(self._watermark))
        return entries

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if isinstance(key, BroadcastKey):
            self._restored_watermark.restore(key, value)
            return
        for start, end, acc in value:
            session = self._session_covering(key, start, end)
            session[2] = self._combine(session[2], acc)

    def finish_snapshot_restore(self) -> bool:
        self._watermark = self._restored_watermark.result(self._watermark)
        return True


def _session_start(session: Session) -> int:
    return session[0]


def aggregate_to_session_window_p(
    session_timeout: int,
    timestamp_fn: TimestampFns,
    key_fn: KeyFns,
    aggr_op: AggregateOperation,
    map_to_output_fn: WindowResultFn = KeyedWindowResult,
    *,
    early_results_period: int = 0,
    clock: Clock = monotonic_ms,
) -> ProcessorFn:
    """Aggregates events into session windows per key; a session closes after `session_timeout`
    without events and is emitted as `map_to_output_fn(start, end, key, result)` once the
    watermark passes its end (start: the first event's time; end: the last one's + timeout).
    With `early_results_period` (ms), every open session's partial result every period too.
    """
    if session_timeout < 0:
        raise ValueError(f"session_timeout must not be negative, got {session_timeout}")
    timestamps = PerOrdinal(timestamp_fn, "timestamp fn")
    keys = PerOrdinal(key_fn, "key fn")
    keys.check_matches(timestamps)
    keys.check_matches(aggr_op.accumulate_fns)
    aggr_op.require_combine("a session window")
    early = EarlyResults.timer(early_results_period, clock)
    return defines_state(
        lambda: SessionWindowP(
            session_timeout, timestamps, keys, aggr_op, map_to_output_fn, early()
        ),
        SessionWindowP,
        window=f"session(timeout={session_timeout})",
        aggregate=aggr_op,
        key=keys,
    )
