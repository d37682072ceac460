"""Stateful mapping (Jet 4's `mapStatefulP` and `flatMapStatefulP`, and the pipeline's
`filterStateful`): a state object per grouping key, or per processor when ungrouped, passed with
each item to the user's function, which updates it in place.

As Jet 4's `TransformStatefulP` (unchanged from 4.0 to 4.5): with a time-to-live, each key's
state carries the top timestamp of its items, and a watermark evicts, least recently used key
first, every state whose timestamp is below `watermark - ttl`, stopping at the first that is
not (`on_evict_fn(state, key, watermark)` may emit for each); only then is the watermark
forwarded. An item behind the current watermark is dropped as late when a ttl is set (all items
are processed without one). `complete()` evicts every state as a watermark of MAX_TIMESTAMP
would, without forwarding one.

Jet's pipeline runs the ungrouped form on one processor of the whole cluster: a vertex of local
parallelism 1 behind a distributed edge partitioned by a constant key, that is the keyed form
with a constant key. The ungrouped form here keeps one state per processor instead (for a
Core DAG whose processors each keep their own), saved as per-processor state
(`snapshots.ProcessorState`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.snapshot_keys import BroadcastKey
from jetspark.core.state_definition import defines_state
from jetspark.core.suppliers import ProcessorFn
from jetspark.core.traverser import Traverser
from jetspark.core.watermark import Watermark
from jetspark.processors.emission import ResumableEmission
from jetspark.processors.snapshots import ProcessorState, RestoredMinimum
from jetspark.processors.watermark_policies import MAX_TIMESTAMP, MIN_TIMESTAMP
from jetspark.processors.windowing import log_late_event

Results = Traverser | Iterable[Any] | None
"""What a flat-mapping function returns: its output items (None: none)."""

StatefulFn = Callable[[Any, Any, Any], Results]
"""`(state, key, item or watermark) -> output items`: the form every function is adapted to."""

_UNGROUPED_STATE = ProcessorState("stateful_state")


class TransformStatefulP(AbstractProcessor):
    """Emits `flat_map_fn(state, key, item)` for each item, `state` being its key's (made by
    `create_fn()` for the key's first item), and evicts states as the module docstring says.

    Snapshot: keyed, each state under its key as `(timestamp, state)`, so a restored key
    reaches the processor that owns it at any parallelism; ungrouped, the processor's state as
    `ProcessorState`, restored into processor i mod the new total parallelism (restoring two
    states into one processor raises: states cannot be merged). The current watermark under a
    broadcast key (the minimum is restored). Exactly-once restores each state as it was at the
    snapshot; under at-least-once the items after it update the states again.
    """

    def __init__(
        self,
        create_fn: Callable[[], Any],
        flat_map_fn: StatefulFn,
        key_fn: Callable[[Any], Any] | None,
        ttl: int,
        timestamp_fn: Callable[[Any], int] | None,
        on_evict_fn: StatefulFn | None,
    ) -> None:
        self._create_fn = create_fn
        self._flat_map_fn = flat_map_fn
        self._key_fn = key_fn
        self._ttl = ttl
        self._timestamp_fn = timestamp_fn
        self._on_evict_fn = on_evict_fn
        self._states: dict[Any, list[Any]] = {}
        """Key (None when ungrouped) -> [top timestamp, state], least recently used first."""
        self._watermark: int | None = None
        self._restored_watermark = RestoredMinimum("stateful_watermark")
        self._items = self.flat_mapper(self._results)
        self._evictions = self.flat_mapper(self._evicted_results)
        self._completing = False
        self._snapshot = ResumableEmission(self.emit_from_traverser_to_snapshot)
        self.late_events_dropped = 0

    def try_process_item(self, ordinal: int, item: Any) -> bool:
        return self._items.try_process(item)

    def _results(self, item: Any) -> Results:
        if not self._ttl:
            key = None if self._key_fn is None else self._key_fn(item)
            stamped = self._states.get(key)
            if stamped is None:
                stamped = self._states[key] = [MIN_TIMESTAMP, self._create_fn()]
            return self._flat_map_fn(stamped[1], key, item)
        assert self._key_fn is not None and self._timestamp_fn is not None
        timestamp = self._timestamp_fn(item)
        watermark = self._watermark
        if watermark is not None and timestamp < watermark:
            self.late_events_dropped += 1
            log_late_event(
                self.logger, item, f"timestamp {timestamp} is behind watermark {watermark}"
            )
            return None
        key = self._key_fn(item)
        stamped = self._states.pop(key, None)  # put back last: the most recently used
        if stamped is None:
            stamped = [timestamp, self._create_fn()]
        elif timestamp > stamped[0]:
            stamped[0] = timestamp
        self._states[key] = stamped
        return self._flat_map_fn(stamped[1], key, item)

    def try_process_watermark(self, watermark: Watermark) -> bool:
        self._watermark = watermark.timestamp
        return not self._ttl or self._evict(watermark.timestamp)

    def complete(self) -> bool:
        self._completing = True
        return not self._ttl or self._evict(MAX_TIMESTAMP)

    def _evict(self, watermark: int) -> bool:
        """Evicts the states last touched before `watermark - ttl`, least recently used first,
        up to the first that was not, emitting what `on_evict_fn` returns for each; False while
        some of that output waits for room."""
        horizon = watermark - self._ttl
        states = self._states
        while states:
            key = next(iter(states))
            timestamp, state = states[key]
            if timestamp >= horizon:
                break
            if not self._evictions.try_process((state, key, watermark)):
                return False
            del states[key]
        return True

    def _evicted_results(self, eviction: tuple[Any, Any, int]) -> Results:
        return None if self._on_evict_fn is None else self._on_evict_fn(*eviction)

    def save_to_snapshot(self) -> bool:
        # as Jet: a save while complete() is under way first finishes its evictions, so that no
        # state evicted before the snapshot has output after it
        if self._completing and not self.complete():
            return False
        return self._snapshot.emit(self._snapshot_entries)

    def _snapshot_entries(self) -> list[tuple[Any, Any]]:
        entries: list[tuple[Any, Any]]
        if self._key_fn is None:
            entries = [_UNGROUPED_STATE.entry(self.context, s) for _, s in self._states.values()]
        else:
            entries = [(key, (ts, state)) for key, (ts, state) in self._states.items()]
        entries.append(self._restored_watermark.entry(self._watermark))
        return entries

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if isinstance(key, BroadcastKey) and key == self._restored_watermark.key:
            self._restored_watermark.restore(key, value)
        elif self._key_fn is None:
            saved = _UNGROUPED_STATE.saved(key, value)
            if ProcessorState.owns(self.context, saved):
                self._restore_state(None, MIN_TIMESTAMP, saved.value)
        elif isinstance(key, BroadcastKey):
            raise ValueError(f"unexpected snapshot entry {key!r}: expected a grouping key's state")
        else:
            self._restore_state(key, *value)

    def _restore_state(self, key: Any, timestamp: int, state: Any) -> None:
        if key not in self._states:
            self._states[key] = [timestamp, state]
            return
        if self._key_fn is None:
            raise ValueError(
                f"processor {self.context.global_processor_index} of vertex "
                f"'{self.context.vertex_name}' was given the states of several processors: an "
                "ungrouped stateful processor's states cannot be merged (restore at the same or "
                "a higher total parallelism, or group the items by a key)"
            )
        raise ValueError(
            f"the state of key {key!r} was saved twice: the items of a key must all reach one "
            "stateful processor (a partitioned edge by the grouping key)"
        )

    def finish_snapshot_restore(self) -> bool:
        self._watermark = self._restored_watermark.result(self._watermark)
        return True


@dataclass(frozen=True)
class _Ungrouped:
    """`fn(state, item)` called with the key in the middle, which the ungrouped form ignores."""

    fn: Callable[[Any, Any], Any]

    def __call__(self, state: Any, key: Any, item: Any) -> Any:
        return self.fn(state, item)


@dataclass(frozen=True)
class _AsResults:
    """A mapping function's result as a flat-mapping function's: `(result,)`, `()` for None."""

    fn: Callable[[Any, Any, Any], Any]

    def __call__(self, state: Any, key: Any, item: Any) -> Results:
        result = self.fn(state, key, item)
        return () if result is None else (result,)


@dataclass(frozen=True)
class _KeepIf:
    """The item itself when `predicate(state, key, item)` holds, else nothing."""

    predicate: Callable[[Any, Any, Any], Any]

    def __call__(self, state: Any, key: Any, item: Any) -> Results:
        return (item,) if self.predicate(state, key, item) else ()


def _stateful_p(
    fn_name: str,
    create_fn: Callable[[], Any],
    fn: Callable[..., Any],
    as_results: Callable[[Callable[[Any, Any, Any], Any]], StatefulFn],
    key_fn: Callable[[Any], Any] | None,
    ttl: int,
    timestamp_fn: Callable[[Any], int] | None,
    on_evict_fn: Callable[[Any, Any, int], Any] | None,
) -> ProcessorFn:
    """Checks the arguments and returns the supplier of TransformStatefulP, the user's `fn`
    (named `fn_name`) and `on_evict_fn` adapted by `as_results` to flat-mapping functions."""
    for name, value, optional in (
        ("create_fn", create_fn, False),
        (fn_name, fn, False),
        ("key_fn", key_fn, True),
        ("timestamp_fn", timestamp_fn, True),
        ("on_evict_fn", on_evict_fn, True),
    ):
        if not callable(value) and not (optional and value is None):
            raise TypeError(f"{name} must be callable, got {type(value).__name__}")
    if ttl < 0:
        raise ValueError(f"ttl must not be negative, got {ttl}")
    if ttl == 0 and (timestamp_fn is not None or on_evict_fn is not None):
        raise ValueError("timestamp_fn and on_evict_fn are used only with a ttl > 0")
    if ttl > 0 and (key_fn is None or timestamp_fn is None):
        raise ValueError(
            "a ttl evicts the state of a grouping key: it needs key_fn and timestamp_fn"
        )
    flat_map_fn = as_results(fn if key_fn is not None else _Ungrouped(fn))
    on_evict = None if on_evict_fn is None else as_results(on_evict_fn)
    return defines_state(
        lambda: TransformStatefulP(create_fn, flat_map_fn, key_fn, ttl, timestamp_fn, on_evict),
        TransformStatefulP,
        key=key_fn,
    )


def _unchanged(fn: Callable[[Any, Any, Any], Any]) -> StatefulFn:
    return fn


def map_stateful_p(
    create_fn: Callable[[], Any],
    map_fn: Callable[..., Any],
    *,
    key_fn: Callable[[Any], Any] | None = None,
    ttl: int = 0,
    timestamp_fn: Callable[[Any], int] | None = None,
    on_evict_fn: Callable[[Any, Any, int], Any] | None = None,
) -> ProcessorFn:
    """Emits `map_fn(state, item)`, with `key_fn` `map_fn(state, key, item)`, for each item
    (None: nothing), `state` being the processor's or the key's `create_fn()`, updated in place
    and picklable (snapshots pickle it).

    With `ttl` > 0 (ms of event time, `timestamp_fn(item)`; needs `key_fn`), a key's state is
    evicted once a watermark passes its top timestamp + ttl, emitting
    `on_evict_fn(state, key, watermark)` (None: nothing; MAX_TIMESTAMP on completion), and
    items behind the watermark are dropped as late (Jet 4's `mapStatefulP`).
    """
    return _stateful_p(
        "map_fn", create_fn, map_fn, _AsResults, key_fn, ttl, timestamp_fn, on_evict_fn
    )


def filter_stateful_p(
    create_fn: Callable[[], Any],
    filter_fn: Callable[..., Any],
    *,
    key_fn: Callable[[Any], Any] | None = None,
    ttl: int = 0,
    timestamp_fn: Callable[[Any], int] | None = None,
) -> ProcessorFn:
    """Emits the items for which `filter_fn(state, item)`, with `key_fn`
    `filter_fn(state, key, item)`, is true; state, `ttl` and late items as `map_stateful_p`'s
    (Jet 4's `filterStateful`, which evicts without output)."""
    return _stateful_p("filter_fn", create_fn, filter_fn, _KeepIf, key_fn, ttl, timestamp_fn, None)


def flat_map_stateful_p(
    create_fn: Callable[[], Any],
    flat_map_fn: Callable[..., Any],
    *,
    key_fn: Callable[[Any], Any] | None = None,
    ttl: int = 0,
    timestamp_fn: Callable[[Any], int] | None = None,
    on_evict_fn: Callable[[Any, Any, int], Results] | None = None,
) -> ProcessorFn:
    """Emits every item of the iterable or traverser `flat_map_fn(state, item)`, with `key_fn`
    `flat_map_fn(state, key, item)` (None: nothing), and of `on_evict_fn(state, key, watermark)`
    on eviction; otherwise as `map_stateful_p` (Jet 4's `flatMapStatefulP`)."""
    return _stateful_p(
        "flat_map_fn", create_fn, flat_map_fn, _unchanged, key_fn, ttl, timestamp_fn, on_evict_fn
    )
