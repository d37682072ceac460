"""Services (Jet 4): `ServiceFactory`, `ServiceFactories`, and the processors that call a service
for each item, synchronously or asynchronously.

A ServiceFactory makes a *service context* once per member (`create_context_fn(supplier
context)`, in the vertex's `ProcessorSupplier.init`; `destroy_context_fn` in its `close`) and a
*service* per processor from it (`create_service_fn(processor context, service context)` in the
processor's `init`; `destroy_service_fn` in its `close`). `ServiceFactories.shared_service`
makes one service per member, shared by the vertex's processors there (it must be
thread-safe); `non_shared_service` one per processor. Jet 3's `ContextFactory` is the
per-processor kind: `ServiceFactory.of(context_factory)` is the same thing as a ServiceFactory,
and every processor here takes either.

The synchronous processors (`map_using_service_p`, `filter_using_service_p`,
`flat_map_using_service_p`) call `fn(service, item)` as `map_p`, `filter_p` and `flat_map_p` call
`fn(item)`: stateless, cooperative unless the factory says `to_non_cooperative()`.

The asynchronous ones call `fn(service, item)` on the processor's thread, where it must only
start the operation: it returns an awaitable (a coroutine, an asyncio Future or Task) or a
`concurrent.futures.Future`, or None to drop the item. The processor never waits, so it stays
cooperative:

- a `concurrent.futures.Future` is kept as it is (completed by whatever thread runs it);
- an awaitable runs on the asyncio event loop of the vertex on that member: one daemon thread
  per vertex and member (`EventLoopThread`), started by the first awaitable, shared by the
  vertex's processors on the member (so the coroutines of a shared service all run on one
  loop), stopped when the vertex's ProcessorSupplier closes, with what still runs cancelled. A
  coroutine must not block that loop; a loop-bound client (an HTTP session, say) is best made
  inside a coroutine, on the loop that uses it;
- every callback emits the results that are ready and returns. At most `max_concurrent_ops`
  items (batches, for the batched processor) per processor are in flight, from the inbox until
  their results are emitted; the others wait in the inbox (backpressure). A completion is seen
  at the processor's next callback: the runtime calls an idle processor again within its
  backoff (at most 1 ms).

`preserve_order=True` emits the results in input order (a slow item holds back the ones after
it); False emits them as they complete. Either way a watermark waits until every item before it
has its results emitted: `try_process_watermark` returns False until then, and the runtime
forwards the watermark once it returns True (Jet 4 queues the watermark and goes on starting
the items after it; here the runtime delivers no items while a watermark waits, so they start
once it is forwarded). A future that completes with an exception fails the job (the runtime's
JobFailedError names the vertex and the processor); so does a result the processor cannot
emit.

Snapshots, as Jet 4's: the ordered processors (and the batched one) save nothing and, in
`save_to_snapshot`, wait for their items in flight to complete and be emitted (a pause as long
as the slowest call); the unordered one saves its items in flight and starts them again when
restored, so each result is emitted once by the run that goes on (the service may be called
twice for an item, as in Jet). With `key_fn` those items are saved under their key, so a
restore gives each to the processor that owns the key's partition; without, as the processor's
own state, restored into processor i mod the new parallelism.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import inspect
import reprlib
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import count
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context, ProcessorSupplierContext
from jetspark.core.inbox import Inbox
from jetspark.core.outbox import Outbox
from jetspark.core.processor import Processor
from jetspark.core.snapshot_keys import BroadcastKey
from jetspark.core.suppliers import ProcessorMetaSupplier, ProcessorSupplier
from jetspark.core.traverser import Traverser, as_traverser
from jetspark.core.watermark import Watermark
from jetspark.processors.emission import ResumableEmission
from jetspark.processors.functions import NOTHING
from jetspark.processors.snapshots import ProcessorState
from jetspark.processors.transforms import (
    ContextFactory,
    FlatMapP,
    MapP,
    _ContextBound,
    _KeepIf,
    _using_bound,
)

DEFAULT_MAX_CONCURRENT_OPS = 4
"""Items in flight per processor unless told otherwise (Jet's DEFAULT_MAX_CONCURRENT_OPS)."""
DEFAULT_PRESERVE_ORDER = True
"""Results in input order unless told otherwise (Jet's DEFAULT_PRESERVE_ORDER)."""
MAX_CONCURRENT_ASYNC_BATCHES = 2
"""Batches in flight per processor of `map_using_service_async_batched_p` unless told otherwise
(Jet's MAX_CONCURRENT_ASYNC_BATCHES)."""
LOOP_STOP_SECONDS = 5.0
"""How long closing a vertex waits for its event loop's thread to end."""

PendingResult = Awaitable[Any] | concurrent.futures.Future[Any]
"""What an async function returns: an awaitable, or a Future completed by another thread."""
AsyncFn = Callable[[Any, Any], PendingResult | None]
"""`(service, item) -> pending result`, or None to drop the item."""
_ResultsFn = Callable[[Any, Any], Traverser | Iterable[Any] | None]
"""`(unit, its completed result) -> the items to emit`."""

_IN_FLIGHT = ProcessorState("async_items_in_flight")
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80


def _check_callable(name: str, fn: Any) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {type(fn).__name__}")


def _no_context(context: ProcessorSupplierContext) -> None:
    """No service context: every processor makes its service by itself."""
    return None


def _context_itself(context: Context, service_context: Any) -> Any:
    """The member's service context as every processor's service: a shared service."""
    return service_context


@dataclass(frozen=True)
class _PerProcessor:
    """`create_fn(processor context)` as a `create_service_fn` (the service context unused)."""

    create_fn: Callable[[Context], Any]

    def __call__(self, context: Context, service_context: Any) -> Any:
        return self.create_fn(context)


@dataclass(frozen=True)
class ServiceFactory:
    """Makes the service a processor calls: a service context once per member, then a service
    per processor from it (Jet 4's ServiceFactory; module docstring). Immutable: every `with_`
    method returns a changed copy.
    """

    create_context_fn: Callable[[ProcessorSupplierContext], Any]
    create_service_fn: Callable[[Context, Any], Any] | None = None
    destroy_service_fn: Callable[[Any], None] | None = None
    destroy_context_fn: Callable[[Any], None] | None = None
    cooperative: bool = True

    @staticmethod
    def with_create_context_fn(
        create_context_fn: Callable[[ProcessorSupplierContext], Any],
    ) -> ServiceFactory:
        """A factory making each member's service context with `create_context_fn(supplier
        context)`; give it a `create_service_fn` too."""
        _check_callable("create_context_fn", create_context_fn)
        return ServiceFactory(create_context_fn)

    def with_create_service_fn(
        self, create_service_fn: Callable[[Context, Any], Any]
    ) -> ServiceFactory:
        """A copy making each processor's service with `create_service_fn(processor context,
        service context)`."""
        _check_callable("create_service_fn", create_service_fn)
        return replace(self, create_service_fn=create_service_fn)

    def with_destroy_service_fn(self, destroy_service_fn: Callable[[Any], None]) -> ServiceFactory:
        """A copy releasing each processor's service with `destroy_service_fn(service)`."""
        _check_callable("destroy_service_fn", destroy_service_fn)
        return replace(self, destroy_service_fn=destroy_service_fn)

    def with_destroy_context_fn(self, destroy_context_fn: Callable[[Any], None]) -> ServiceFactory:
        """A copy releasing each member's service context with `destroy_context_fn(ctx)`, after
        the processors released their services."""
        _check_callable("destroy_context_fn", destroy_context_fn)
        return replace(self, destroy_context_fn=destroy_context_fn)

    def to_non_cooperative(self) -> ServiceFactory:
        """A copy whose processors run on threads of their own, free to block."""
        return replace(self, cooperative=False)

    @staticmethod
    def of(factory: ServiceFactory | ContextFactory) -> ServiceFactory:
        """`factory` itself, or a ContextFactory as the ServiceFactory of the same
        per-processor objects (`ServiceFactories.non_shared_service(create_fn, destroy_fn)`,
        cooperative as it was)."""
        if isinstance(factory, ServiceFactory):
            return factory
        if isinstance(factory, ContextFactory):
            service = ServiceFactories.non_shared_service(factory.create_fn, factory.destroy_fn)
            return replace(service, cooperative=factory.cooperative)
        raise TypeError(
            "expected a ServiceFactory (ServiceFactories.shared_service(fn), say) or a "
            f"ContextFactory, got {type(factory).__name__}"
        )


class ServiceFactories:
    """The common kinds of ServiceFactory (Jet 4's ServiceFactories)."""

    @staticmethod
    def shared_service(
        create_service_fn: Callable[[ProcessorSupplierContext], Any],
        destroy_service_fn: Callable[[Any], None] | None = None,
    ) -> ServiceFactory:
        """One service per member, `create_service_fn(supplier context)`, shared by the
        vertex's processors there (so it must be thread-safe); `destroy_service_fn(service)`
        once at the end."""
        factory = ServiceFactory.with_create_context_fn(create_service_fn).with_create_service_fn(
            _context_itself
        )
        if destroy_service_fn is None:
            return factory
        return factory.with_destroy_context_fn(destroy_service_fn)

    @staticmethod
    def non_shared_service(
        create_service_fn: Callable[[Context], Any],
        destroy_service_fn: Callable[[Any], None] | None = None,
    ) -> ServiceFactory:
        """One service per processor, `create_service_fn(processor context)`, released with
        `destroy_service_fn(service)` when the processor closes."""
        _check_callable("create_service_fn", create_service_fn)
        factory = ServiceFactory(_no_context, _PerProcessor(create_service_fn))
        if destroy_service_fn is None:
            return factory
        return factory.with_destroy_service_fn(destroy_service_fn)


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """The loop thread: runs `loop` until stopped, then cancels what still runs and closes it."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


class EventLoopThread:
    """An asyncio event loop on a daemon thread of its own, started by the first `submit` and
    ended by `stop`; `submit` may be called from any thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as a new loop of the same name, not started."""
        return (EventLoopThread, (self.name,))

    def submit(self, awaitable: Awaitable[Any]) -> concurrent.futures.Future[Any]:
        """Runs `awaitable` on the loop; the Future gives its result or its exception."""
        loop = self._loop or self._start()
        coroutine = awaitable if inspect.iscoroutine(awaitable) else _awaited(awaitable)
        return asyncio.run_coroutine_threadsafe(coroutine, loop)

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._stopped:
                raise RuntimeError(f"event loop {self.name} was stopped: the vertex has closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=_run_loop, args=(loop,), name=self.name, daemon=True
                )
                self._thread.start()
                self._loop = loop
            return self._loop

    def stop(self, timeout: float = LOOP_STOP_SECONDS) -> None:
        """Cancels what still runs on the loop and waits up to `timeout` seconds for its thread
        to end (a coroutine that blocks the loop leaves the thread behind)."""
        with self._lock:
            self._stopped = True
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)


class _ServiceSupplier(ProcessorSupplier):
    """The processors of a vertex using a service on one member: makes the service context in
    `init`; `close` stops the vertex's event loop there, then destroys the context."""

    def __init__(
        self, factory: ServiceFactory, new_processor: Callable[[_ServiceSupplier], Processor]
    ) -> None:
        self.factory = factory
        self._new_processor = new_processor
        self._service_context: Any = NOTHING
        self.loop = EventLoopThread("jetspark-service-loop")
        """The vertex's event loop on this member (started by its first awaitable)."""

    def init(self, context: ProcessorSupplierContext) -> None:
        self.loop.name = f"jetspark-{context.vertex_name}-{context.member_index}-loop"
        self._service_context = self.factory.create_context_fn(context)

    def get(self, count: int) -> list[Processor]:
        return [self._new_processor(self) for _ in range(count)]

    def bound(self, fn: Callable[[Any, Any], Any]) -> _ContextBound:
        """`fn(service, item)` as `bound(item)`, the service made from this member's service
        context when the processor opens it."""
        factory = self.factory
        return _ContextBound(
            fn, self._create_service, factory.destroy_service_fn, factory.cooperative
        )

    def _create_service(self, context: Context) -> Any:
        create = self.factory.create_service_fn
        assert create is not None, "checked by the processor factory"
        return create(context, self._service_context)

    def close(self, error: BaseException | None) -> None:
        try:
            self.loop.stop()
        finally:
            destroy = self.factory.destroy_context_fn
            if destroy is not None and self._service_context is not NOTHING:
                destroy(self._service_context)
            self._service_context = NOTHING


class _ServiceMetaSupplier(ProcessorMetaSupplier):
    """Gives every member a `_ServiceSupplier` of its own, with its own service context."""

    def __init__(
        self, factory: ServiceFactory, new_processor: Callable[[_ServiceSupplier], Processor]
    ) -> None:
        self.factory = factory
        self._new_processor = new_processor

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], ProcessorSupplier]:
        return self._supplier

    def _supplier(self, member_index: int) -> ProcessorSupplier:
        return _ServiceSupplier(self.factory, self._new_processor)


def _checked(factory: Any, where: str) -> ServiceFactory:
    """`factory` as a ServiceFactory that can make services; errors naming `where`."""
    try:
        service_factory = ServiceFactory.of(factory)
    except TypeError as error:
        raise TypeError(f"{where}: {error}") from None
    if service_factory.create_service_fn is None:
        raise ValueError(
            f"{where}: the ServiceFactory has no create_service_fn; add one with "
            "with_create_service_fn(fn), or use ServiceFactories.shared_service(fn) or "
            "non_shared_service(fn)"
        )
    return service_factory


def _check_count(name: str, value: Any) -> None:
    if type(value) is not int or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def _sync(
    factory: ServiceFactory | ContextFactory,
    fn: Callable[[Any, Any], Any],
    processor_type: Callable[[Callable[[Any], Any]], Processor],
    where: str,
) -> ProcessorMetaSupplier:
    service_factory = _checked(factory, where)
    _check_callable(f"{where}: the function", fn)
    return _ServiceMetaSupplier(service_factory, partial(_sync_processor, fn, processor_type))


def _sync_processor(
    fn: Callable[[Any, Any], Any],
    processor_type: Callable[[Callable[[Any], Any]], Processor],
    supplier: _ServiceSupplier,
) -> Processor:
    return _using_bound(supplier.bound(fn), processor_type)


def map_using_service_p(
    service_factory: ServiceFactory | ContextFactory, map_fn: Callable[[Any, Any], Any]
) -> ProcessorMetaSupplier:
    """Emits `map_fn(service, item)` per item; None drops the item (Jet's mapUsingServiceP)."""
    return _sync(service_factory, map_fn, MapP, "map_using_service_p")


def filter_using_service_p(
    service_factory: ServiceFactory | ContextFactory, filter_fn: Callable[[Any, Any], Any]
) -> ProcessorMetaSupplier:
    """Emits the items for which `filter_fn(service, item)` is true (Jet's
    filterUsingServiceP)."""
    _check_callable("filter_using_service_p: the function", filter_fn)
    return _sync(service_factory, _KeepIf(filter_fn), MapP, "filter_using_service_p")


def flat_map_using_service_p(
    service_factory: ServiceFactory | ContextFactory,
    flat_map_fn: Callable[[Any, Any], Traverser | Iterable[Any] | None],
) -> ProcessorMetaSupplier:
    """Emits the items of the traverser or iterable `flat_map_fn(service, item)` (None: no
    items; Jet's flatMapUsingServiceP)."""
    return _sync(service_factory, flat_map_fn, FlatMapP, "flat_map_using_service_p")


def _note_done(completed: deque[int], ticket: int, future: concurrent.futures.Future[Any]) -> None:
    """A done callback: appends the ticket of the completed unit (deque.append is atomic)."""
    completed.append(ticket)


class _AsyncTransformP(AbstractProcessor, abc.ABC):
    """What the async processors share (module docstring): takes units (items, or batches)
    from the inbox while fewer than `max_concurrent_ops` are in flight, starts `call(unit)` for
    each, and emits `results_fn(unit, result)` for the completed ones that `_next_done` gives.
    """

    def __init__(
        self,
        call: Callable[[Any], Any],
        loop: EventLoopThread,
        max_concurrent_ops: int,
        results_fn: _ResultsFn,
    ) -> None:
        self._call = call
        self._loop = loop
        self._max = max_concurrent_ops
        self._results_fn = results_fn

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._emitter = self.flat_mapper(as_traverser)
        """Emits one unit's results, resumable across full outboxes (fed with `hold`)."""

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self._flush()
        while self._in_flight_count() < self._max and not inbox.is_empty():
            self._submit(self._take(inbox))

    def _take(self, inbox: Inbox) -> Any:
        """The next unit: the head item."""
        return inbox.poll()

    def try_process(self) -> bool:
        self._flush()
        return True

    def try_process_watermark(self, watermark: Watermark) -> bool:
        """True (the runtime forwards the watermark) once the results of every item before it
        are emitted."""
        return self._flush()

    def complete(self) -> bool:
        return self._flush()

    def close(self) -> None:
        """Cancels the operations still in flight: the job has ended."""
        for future in self._futures():
            future.cancel()

    def _submit(self, unit: Any) -> None:
        """Starts the operation of `unit` (none when `call` returns None: dropped)."""
        pending = self._call(unit)
        if pending is None:
            return
        if isinstance(pending, concurrent.futures.Future):
            future = pending
        elif inspect.isawaitable(pending):
            future = self._loop.submit(pending)
        else:
            raise TypeError(
                f"vertex '{self.context.vertex_name}': the async function returned "
                f"{type(pending).__name__} for {_REPR.repr(unit)}; it must return an awaitable "
                "(a coroutine, say), a concurrent.futures.Future, or None to drop the item"
            )
        self._track(unit, future)

    def _flush(self) -> bool:
        """Emits the results it may emit now; True when nothing is in flight any more."""
        emitter = self._emitter
        if not emitter.idle and not emitter.try_process(None):
            return False
        while (done := self._next_done()) is not None:
            unit, future = done
            emitter.hold(self._results_of(unit, future))
            if not emitter.try_process(None):
                return False
        return self._in_flight_count() == 0

    def _results_of(self, unit: Any, future: concurrent.futures.Future[Any]) -> Any:
        """The items to emit for `unit`, whose `future` is done; its exception fails the job."""
        try:
            result = future.result()
        except Exception as error:
            raise RuntimeError(
                f"the async operation of vertex '{self.context.vertex_name}' for "
                f"{_REPR.repr(unit)} completed exceptionally: {type(error).__name__}: {error}"
            ) from error
        return self._results_fn(unit, result)

    @abc.abstractmethod
    def _track(self, unit: Any, future: concurrent.futures.Future[Any]) -> None:
        """Keeps `unit`, whose operation `future` runs, in flight."""

    @abc.abstractmethod
    def _next_done(self) -> tuple[Any, concurrent.futures.Future[Any]] | None:
        """Removes and returns the next unit whose results may be emitted now, or None."""

    @abc.abstractmethod
    def _in_flight_count(self) -> int:
        """How many units are in flight."""

    @abc.abstractmethod
    def _futures(self) -> list[concurrent.futures.Future[Any]]:
        """The futures of the units in flight."""


class AsyncTransformOrderedP(_AsyncTransformP):
    """Emits the results in input order; `save_to_snapshot` waits until nothing is in flight
    and saves nothing (Jet 4's AsyncTransformUsingServiceOrderedP)."""

    def __init__(
        self,
        call: Callable[[Any], Any],
        loop: EventLoopThread,
        max_concurrent_ops: int,
        results_fn: _ResultsFn,
    ) -> None:
        super().__init__(call, loop, max_concurrent_ops, results_fn)
        self._in_flight: deque[tuple[Any, concurrent.futures.Future[Any]]] = deque()

    def save_to_snapshot(self) -> bool:
        return self._flush()

    def _track(self, unit: Any, future: concurrent.futures.Future[Any]) -> None:
        self._in_flight.append((unit, future))

    def _next_done(self) -> tuple[Any, concurrent.futures.Future[Any]] | None:
        in_flight = self._in_flight
        if in_flight and in_flight[0][1].done():
            return in_flight.popleft()
        return None

    def _in_flight_count(self) -> int:
        return len(self._in_flight)

    def _futures(self) -> list[concurrent.futures.Future[Any]]:
        return [future for _, future in self._in_flight]


class AsyncTransformUnorderedP(_AsyncTransformP):
    """Emits the results as they complete; saves the items in flight to the snapshot and
    starts them again when restored (Jet 4's AsyncTransformUsingServiceUnorderedP)."""

    def __init__(
        self,
        call: Callable[[Any], Any],
        loop: EventLoopThread,
        max_concurrent_ops: int,
        results_fn: _ResultsFn,
        key_fn: Callable[[Any], Any] | None = None,
    ) -> None:
        super().__init__(call, loop, max_concurrent_ops, results_fn)
        self._key_fn = key_fn
        self._tickets = count()
        self._in_flight: dict[int, tuple[Any, concurrent.futures.Future[Any]]] = {}
        """ticket -> (item, future), in the order the items were started."""
        self._completed: deque[int] = deque()
        """Tickets of completed items, appended by whichever thread completed them."""
        self._restored: deque[Any] = deque()
        self._saving = ResumableEmission(self.emit_from_traverser_to_snapshot)

    def save_to_snapshot(self) -> bool:
        emitter = self._emitter
        if not emitter.idle and not emitter.try_process(None):
            return False
        return self._saving.emit(self._snapshot_entries)

    def _snapshot_entries(self) -> list[tuple[Any, Any]]:
        """The items in flight: under their keys with a `key_fn`, else as the processor's."""
        items = [item for item, _ in self._in_flight.values()]
        if not items:
            return []
        key_fn = self._key_fn
        if key_fn is None:
            return [_IN_FLIGHT.entry(self.context, items)]
        by_key: dict[Any, list[Any]] = {}
        for item in items:
            by_key.setdefault(key_fn(item), []).append(item)
        return list(by_key.items())

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if isinstance(key, BroadcastKey):
            saved = _IN_FLIGHT.saved(key, value)
            if ProcessorState.owns(self.context, saved):
                self._restored.extend(saved.value)
        else:
            self._restored.extend(value)

    def finish_snapshot_restore(self) -> bool:
        """Starts the restored items, `max_concurrent_ops` at most in flight; True once all
        were started and no result is half emitted."""
        self._flush()
        restored = self._restored
        while restored and len(self._in_flight) < self._max:
            self._submit(restored.popleft())
        return not restored and self._emitter.idle

    def _track(self, unit: Any, future: concurrent.futures.Future[Any]) -> None:
        ticket = next(self._tickets)
        self._in_flight[ticket] = (unit, future)
        future.add_done_callback(partial(_note_done, self._completed, ticket))

    def _next_done(self) -> tuple[Any, concurrent.futures.Future[Any]] | None:
        if not self._completed:
            return None
        return self._in_flight.pop(self._completed.popleft())

    def _in_flight_count(self) -> int:
        return len(self._in_flight)

    def _futures(self) -> list[concurrent.futures.Future[Any]]:
        return [future for _, future in self._in_flight.values()]


class AsyncTransformBatchedP(AsyncTransformOrderedP):
    """Ordered, each unit a batch of up to `max_batch_size` inbox items (as many as wait, never
    waiting for more) whose result is a list of one result per item (Jet 4's
    AsyncTransformUsingServiceBatchedP)."""

    def __init__(
        self,
        call: Callable[[Any], Any],
        loop: EventLoopThread,
        max_concurrent_ops: int,
        max_batch_size: int,
    ) -> None:
        super().__init__(call, loop, max_concurrent_ops, self._checked_results)
        self._max_batch_size = max_batch_size

    def _take(self, inbox: Inbox) -> list[Any]:
        batch: list[Any] = []
        while len(batch) < self._max_batch_size and not inbox.is_empty():
            batch.append(inbox.poll())
        return batch

    def _checked_results(self, batch: list[Any], results: Any) -> list[Any]:
        """`results` as a list of one result per item of `batch`, or an error naming the
        vertex."""
        vertex = self.context.vertex_name
        try:
            checked = list(results)
        except TypeError:
            raise TypeError(
                f"vertex '{vertex}': the batch function's result for {len(batch)} items is "
                f"{type(results).__name__}; it must be a list of one result per item"
            ) from None
        if len(checked) != len(batch):
            raise ValueError(
                f"vertex '{vertex}': the batch function returned {len(checked)} results for a "
                f"batch of {len(batch)} items; it must return one result per item, in order "
                "(None drops an item)"
            )
        return checked


def _one_result(unit: Any, result: Any) -> tuple[Any, ...] | None:
    return None if result is None else (result,)


def _all_results(unit: Any, result: Any) -> Any:
    return result


@dataclass(frozen=True)
class _AsyncProcessors:
    """How the processors of an async vertex are made, on the member of `supplier`."""

    fn: AsyncFn
    max_concurrent_ops: int
    preserve_order: bool = True
    results_fn: _ResultsFn = _one_result
    key_fn: Callable[[Any], Any] | None = None
    max_batch_size: int | None = None

    def __call__(self, supplier: _ServiceSupplier) -> Processor:
        return _using_bound(supplier.bound(self.fn), partial(self._processor, supplier.loop))

    def _processor(self, loop: EventLoopThread, call: Callable[[Any], Any]) -> Processor:
        if self.max_batch_size is not None:
            return AsyncTransformBatchedP(call, loop, self.max_concurrent_ops, self.max_batch_size)
        if self.preserve_order:
            return AsyncTransformOrderedP(call, loop, self.max_concurrent_ops, self.results_fn)
        return AsyncTransformUnorderedP(
            call, loop, self.max_concurrent_ops, self.results_fn, self.key_fn
        )


def _async(
    factory: ServiceFactory | ContextFactory, processors: _AsyncProcessors, where: str
) -> ProcessorMetaSupplier:
    service_factory = _checked(factory, where)
    _check_callable(f"{where}: the function", processors.fn)
    _check_count(f"{where}: max_concurrent_ops", processors.max_concurrent_ops)
    if processors.key_fn is not None:
        _check_callable(f"{where}: key_fn", processors.key_fn)
    return _ServiceMetaSupplier(service_factory, processors)


def map_using_service_async_p(
    service_factory: ServiceFactory | ContextFactory,
    map_async_fn: AsyncFn,
    max_concurrent_ops: int = DEFAULT_MAX_CONCURRENT_OPS,
    preserve_order: bool = DEFAULT_PRESERVE_ORDER,
    key_fn: Callable[[Any], Any] | None = None,
) -> ProcessorMetaSupplier:
    """Emits the result of the awaitable or Future `map_async_fn(service, item)` returns (None,
    or a None result, drops the item), at most `max_concurrent_ops` items in flight per
    processor, in input order unless `preserve_order=False`. `key_fn`: the key the input edge
    is partitioned by, under which the unordered processor saves its items in flight (module
    docstring). Jet's mapUsingServiceAsyncP."""
    processors = _AsyncProcessors(
        map_async_fn, max_concurrent_ops, preserve_order, _one_result, key_fn
    )
    return _async(service_factory, processors, "map_using_service_async_p")


def flat_map_using_service_async_p(
    service_factory: ServiceFactory | ContextFactory,
    flat_map_async_fn: AsyncFn,
    max_concurrent_ops: int = DEFAULT_MAX_CONCURRENT_OPS,
    preserve_order: bool = DEFAULT_PRESERVE_ORDER,
    key_fn: Callable[[Any], Any] | None = None,
) -> ProcessorMetaSupplier:
    """As `map_using_service_async_p`, emitting every item of the traverser or iterable the
    operation completes with (None: none). Jet's flatMapUsingServiceAsyncP."""
    processors = _AsyncProcessors(
        flat_map_async_fn, max_concurrent_ops, preserve_order, _all_results, key_fn
    )
    return _async(service_factory, processors, "flat_map_using_service_async_p")


def map_using_service_async_batched_p(
    service_factory: ServiceFactory | ContextFactory,
    max_batch_size: int,
    map_async_batched_fn: AsyncFn,
    max_concurrent_ops: int = MAX_CONCURRENT_ASYNC_BATCHES,
) -> ProcessorMetaSupplier:
    """Calls `map_async_batched_fn(service, items)` for up to `max_batch_size` inbox items at a
    time (as many as wait, never waiting for more); the operation completes with a list of one
    result per item, emitted in input order (None drops an item). At most `max_concurrent_ops`
    batches in flight per processor. Jet's mapUsingServiceAsyncBatched."""
    _check_count("map_using_service_async_batched_p: max_batch_size", max_batch_size)
    processors = _AsyncProcessors(
        map_async_batched_fn, max_concurrent_ops, max_batch_size=max_batch_size
    )
    return _async(service_factory, processors, "map_using_service_async_batched_p")
