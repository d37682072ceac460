"""Stateless transforms: map, filter, flat-map (optionally using a context object), and no-op.

None of these processors has state, so there is nothing to snapshot: after a restart they
simply transform whatever the upstream replays (under at-least-once, possibly an item twice).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.inbox import ArrayDequeInbox, Inbox
from jetspark.core.outbox import Outbox, is_plain_batch, offer_items_of
from jetspark.core.processor import Processor
from jetspark.core.suppliers import ProcessorFn
from jetspark.core.traverser import Traverser
from jetspark.processors.functions import NOTHING, drain
from jetspark.processors.wrappers import ProcessorWrapper

FlatMapFn = Callable[[Any], Traverser | Iterable[Any] | None]


class MapP(AbstractProcessor):
    """Emits `fn(item)` for each item to every outbound edge; a None result emits nothing."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn
        self._pending: Any = NOTHING

    def process(self, ordinal: int, inbox: Inbox) -> None:
        fn = self._fn
        offer = self.outbox.offer
        result = self._pending
        while (item := inbox.peek()) is not None:
            if result is NOTHING:
                result = fn(item)
            if result is not None and not offer(result):
                self._pending = result
                return
            result = NOTHING
            inbox.remove()
        self._pending = NOTHING


@dataclass(frozen=True)
class _KeepIf:
    """The item (the last argument) if `predicate(*args)` holds, else None: filtering expressed
    as a map, of `(item)` or of `(service, item)`."""

    predicate: Callable[..., Any]

    def __call__(self, *args: Any) -> Any:
        return args[-1] if self.predicate(*args) else None


class FlatMapP(AbstractProcessor):
    """Emits every item of the traverser or iterable `fn(item)` returns (None: no items).

    The results of consecutive items, lists or tuples of plain items (the usual results), go to
    the outbox together as one batch while it has room; other results and the one that does not
    fit go through a FlatMapper, resumed on the next call when the outbox fills up. An item
    leaves the inbox once all its results went out.
    """

    def __init__(self, fn: FlatMapFn) -> None:
        self._fn = fn
        self._flat_mapper = self.flat_mapper(fn)

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._offer_items = offer_items_of(outbox)
        self._room: Callable[[], int] | None = getattr(outbox, "room", None)

    def process(self, ordinal: int, inbox: Inbox) -> None:
        if self._room is None or type(inbox) is not ArrayDequeInbox:
            super().process(ordinal, inbox)  # item by item
            return
        items, flat_mapper = inbox.queue, self._flat_mapper
        while items:
            if flat_mapper.idle:
                self._emit_batch(items)
                if flat_mapper.idle:  # the outbox is full, or the inbox empty
                    return
            if not flat_mapper.try_process(items[0]):
                return
            items.popleft()

    def _emit_batch(self, items: deque[Any]) -> None:
        """Flat-maps head items while their results fit the outbox's room together, and offers
        them as one batch; the first item whose result does not fit, or is no plain sequence,
        stays at the head, its result held by the FlatMapper."""
        fn = self._fn
        room = self._room()  # type: ignore[misc]
        batch: list[Any] = []
        while items and room:
            result = fn(items[0])
            if not (
                (type(result) is list or type(result) is tuple)
                and len(result) <= room
                and is_plain_batch(result)
            ):
                self._flat_mapper.hold(result)
                break
            batch += result
            room -= len(result)
            items.popleft()
        if batch:
            self._offer_items(batch, 0)

    def try_process_item(self, ordinal: int, item: Any) -> bool:
        return self._flat_mapper.try_process(item)


def map_p(fn: Callable[[Any], Any]) -> ProcessorFn:
    """Emits `fn(item)` for each item; items mapped to None are dropped."""
    return lambda: MapP(fn)


def filter_p(predicate: Callable[[Any], Any]) -> ProcessorFn:
    """Emits the items for which `predicate(item)` is true."""
    keep_if = _KeepIf(predicate)
    return lambda: MapP(keep_if)


def flat_map_p(fn: FlatMapFn) -> ProcessorFn:
    """Emits all items of the traverser or iterable `fn(item)` returns, in order."""
    return lambda: FlatMapP(fn)


@dataclass(frozen=True)
class ContextFactory:
    """Makes a per-processor context object that cannot be shipped with the DAG (a formatter, a
    client connection, ...): `create_fn(processor_context)` in init, `destroy_fn(ctx)` in close.

    `non_cooperative()` marks the processors using it as non-cooperative (blocking calls).
    """

    create_fn: Callable[[Context], Any]
    destroy_fn: Callable[[Any], None] | None = None
    cooperative: bool = True

    @staticmethod
    def with_create_fn(create_fn: Callable[[Context], Any]) -> ContextFactory:
        """A factory making each processor's context object with `create_fn(context)`."""
        if not callable(create_fn):
            raise TypeError(f"create_fn must be callable, got {type(create_fn).__name__}")
        return ContextFactory(create_fn)

    def with_destroy_fn(self, destroy_fn: Callable[[Any], None]) -> ContextFactory:
        """A copy that releases each context object with `destroy_fn(ctx)` at the end."""
        if not callable(destroy_fn):
            raise TypeError(f"destroy_fn must be callable, got {type(destroy_fn).__name__}")
        return replace(self, destroy_fn=destroy_fn)

    def non_cooperative(self) -> ContextFactory:
        """A copy whose processors run on their own threads, free to block."""
        return replace(self, cooperative=False)


class _ContextBound:
    """`fn(ctx, item)` called as `bound(item)`, with `ctx` made by `create(context)` on `open`
    and released by `destroy(ctx)` on `close`; `cooperative` is what the processor declares."""

    def __init__(
        self,
        fn: Callable[[Any, Any], Any],
        create: Callable[[Context], Any],
        destroy: Callable[[Any], None] | None = None,
        cooperative: bool = True,
    ) -> None:
        self._fn = fn
        self._create = create
        self._destroy = destroy
        self.cooperative = cooperative
        self._ctx: Any = NOTHING

    def open(self, context: Context) -> None:
        """Creates the context object for the processor of `context`."""
        self._ctx = self._create(context)

    def __call__(self, item: Any) -> Any:
        return self._fn(self._ctx, item)

    def close(self) -> None:
        """Destroys the context object, if one was created."""
        if self._destroy is not None and self._ctx is not NOTHING:
            self._destroy(self._ctx)
        self._ctx = NOTHING


class UsingContextP(ProcessorWrapper):
    """Runs a processor whose function takes a context object: opens it before the wrapped
    processor's init and closes it after its close; cooperative as the bound function says.
    """

    def __init__(self, wrapped: Processor, bound: _ContextBound) -> None:
        super().__init__(wrapped)
        self._bound = bound

    def init(self, outbox: Outbox, context: Context) -> None:
        self._bound.open(context)
        super().init(outbox, context)

    def is_cooperative(self) -> bool:
        return self._bound.cooperative

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._bound.close()


def _using_bound(
    bound: _ContextBound, processor_type: Callable[[Callable[[Any], Any]], Processor]
) -> Processor:
    """`processor_type(bound)` run by a UsingContextP that opens and closes `bound`."""
    return UsingContextP(processor_type(bound), bound)


def _using_context(
    factory: ContextFactory,
    fn: Callable[[Any, Any], Any],
    processor_type: Callable[[Callable[[Any], Any]], Processor],
) -> Processor:
    bound = _ContextBound(fn, factory.create_fn, factory.destroy_fn, factory.cooperative)
    return _using_bound(bound, processor_type)


def map_using_context_p(
    context_factory: ContextFactory, map_fn: Callable[[Any, Any], Any]
) -> ProcessorFn:
    """Emits `map_fn(ctx, item)` per item (None: dropped); `ctx` comes from `context_factory`."""
    return lambda: _using_context(context_factory, map_fn, MapP)


def flat_map_using_context_p(
    context_factory: ContextFactory, flat_map_fn: Callable[[Any, Any], Any]
) -> ProcessorFn:
    """Emits the items of `flat_map_fn(ctx, item)`; `ctx` comes from `context_factory`."""
    return lambda: _using_context(context_factory, flat_map_fn, FlatMapP)


class NoopP(AbstractProcessor):
    """Consumes and discards every item."""

    def process(self, ordinal: int, inbox: Inbox) -> None:
        drain(inbox)


def noop_p() -> ProcessorFn:
    """A processor that swallows its input and emits nothing (a sink for unused edges)."""
    return NoopP
