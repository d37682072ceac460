"""Stateless steps (map, filter, flat_map) as functions, adapted to timestamped events and
fused into one function per chain, so a chain of stages costs one vertex and one call per item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from jetspark.processors.events import JetEvent

MapFn = Callable[[Any], Any]
FlatMapFn = Callable[[Any], Iterable[Any] | None]


@dataclass(frozen=True)
class Step:
    """One stateless stage: `kind` is "map", "filter", "flat_map", "peek", or "unwrap" (a
    JetEvent's item; `fn`, the identity, where the items are plain); `fn` the function."""

    kind: str
    fn: Callable[[Any], Any]


def output_is_events(steps: Sequence[Step], events: bool) -> bool:
    """Whether a chain's output items are JetEvents, given whether its input items are."""
    return events and all(step.kind != "unwrap" for step in steps)


def fuse(steps: Sequence[Step], events: bool) -> tuple[str, Callable[[Any], Any]]:
    """One function doing every step in order: ("map", fn) when no step flat-maps (a None
    result drops the item), else ("flat_map", fn) returning a list. `events` says whether the
    input items are JetEvents: user functions see their item, results keep the timestamp."""
    fns: list[tuple[bool, Callable[[Any], Any]]] = []  # (flat?, fn) per step
    for step in steps:
        fns.append(_adapted(step, events))
        events = output_is_events([step], events)
    if not any(flat for flat, _ in fns):
        fused = fns[0][1]
        for _, fn in fns[1:]:
            fused = _MapThen(fused, fn)
        return "map", fused
    flat_fns = [fn if flat else _AsFlat(fn) for flat, fn in fns]
    fused = flat_fns[0]
    for fn in flat_fns[1:]:
        fused = _FlatThen(fused, fn)
    return "flat_map", fused


def _adapted(step: Step, events: bool) -> tuple[bool, Callable[[Any], Any]]:
    """(flat?, fn) for one step, working on JetEvents when `events`."""
    kind, fn = step.kind, step.fn
    if kind == "unwrap":
        return False, unwrap if events else fn
    if kind == "flat_map":
        return True, _EventFlatMap(fn) if events else fn
    if kind == "filter":
        return False, _OnPayloadFilter(fn) if events else _KeepIf(fn)
    return False, _EventMap(fn) if events else fn  # map, peek


@dataclass(frozen=True)
class _OnPayloadFilter:
    predicate: Callable[[Any], Any]

    def __call__(self, event: JetEvent) -> Any:
        return event if self.predicate(event.item) else None


@dataclass(frozen=True)
class _KeepIf:
    predicate: Callable[[Any], Any]

    def __call__(self, item: Any) -> Any:
        return item if self.predicate(item) else None


@dataclass(frozen=True)
class _MapThen:
    first: MapFn
    second: MapFn

    def __call__(self, item: Any) -> Any:
        result = self.first(item)
        return None if result is None else self.second(result)


@dataclass(frozen=True)
class _AsFlat:
    map_fn: MapFn

    def __call__(self, item: Any) -> list[Any]:
        result = self.map_fn(item)
        return [] if result is None else [result]


@dataclass(frozen=True)
class _FlatThen:
    first: FlatMapFn
    second: FlatMapFn

    def __call__(self, item: Any) -> list[Any]:
        out: list[Any] = []
        second = self.second
        for middle in self.first(item) or ():
            if middle is not None:
                out.extend(second(middle) or ())
        return out


@dataclass(frozen=True)
class _EventMap:
    fn: MapFn

    def __call__(self, event: JetEvent) -> JetEvent | None:
        result = self.fn(event.item)
        return None if result is None else JetEvent(event.timestamp, result)


@dataclass(frozen=True)
class _EventFlatMap:
    fn: FlatMapFn

    def __call__(self, event: JetEvent) -> list[JetEvent]:
        timestamp = event.timestamp
        return [JetEvent(timestamp, item) for item in self.fn(event.item) or () if item is not None]


def on_item(fn: Callable[..., Any], events: bool) -> Callable[..., Any]:
    """`fn` applied to an item's payload: the item itself, or a JetEvent's item."""
    return _OnPayload(fn) if events else fn


@dataclass(frozen=True)
class _OnPayload:
    fn: Callable[..., Any]

    def __call__(self, event: JetEvent, *rest: Any) -> Any:
        return self.fn(event.item, *rest)


def unwrap(event: JetEvent) -> Any:
    """The item a JetEvent carries."""
    return event.item
