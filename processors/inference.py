"""Model inference in a stream: items mapped in batches, and a model replaced while the job runs.

`map_batched_using_context_p(context_factory, batch_fn, max_batch_size)` calls
`batch_fn(ctx, items)` on up to `max_batch_size` items taken from the head of the inbox as they
are: it never waits for a batch to fill, so a lone item goes through at once, and a backlog goes
through in full batches (a numpy model's cost per call hardly depends on its rows). The
results are emitted in order, one per item (None drops the item); an item leaves the inbox only
once its result is accepted, so a full outbox loses and repeats nothing, and `batch_fn` is called
once per item. Stateless, like `map_using_context_p`.

`map_using_model_p(load_model, predict_batch, max_batch_size)` does the same with a model that
a second input replaces: inbound ordinal 0 carries the items, ordinal 1 model references (a path,
a version: whatever `load_model(reference)` takes). A reference replaces the model for the items
after it; the model is loaded when the next batch of items needs it, and
`predict_batch(model, items)` gives one result per item. Items that arrive before the first
reference are held by the processor, up to `max_items_waiting`, and predicted by the first
model, before anything else (watermarks pass them meanwhile); past that bound the processor
leaves its ordinal-0 inbox as it is (backpressure: the runtime then reads ordinal 1 alone),
and the vertex logs one warning per member, until a reference comes, or the runtime needs the
inbox emptied (`ArrayDequeInbox.must_drain`: a snapshot's barrier came in on every input, or a
micro-batch is to end), when it holds them all. From the first reference on, every item stays
in the inbox until its result is accepted, which is backpressure too. Non-cooperative: loading
a model blocks.

Snapshot: the reference, never the model, under a broadcast key, so every processor restored at
any parallelism loads the same model again (the oldest reference among the saved processors',
which the replayed reference stream goes on from: with exactly-once all are the same); and the
items held for the first model, if any, tagged with the processor (restored into processor
i mod the new total parallelism).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.inbox import ArrayDequeInbox, Inbox
from jetspark.core.outbox import Outbox, is_plain_batch, offer_items_of
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.core.suppliers import ProcessorFn
from jetspark.core.watermark import Watermark
from jetspark.processors.emission import ResumableEmission, offer_batch
from jetspark.processors.functions import NOTHING
from jetspark.processors.snapshots import ProcessorState
from jetspark.processors.transforms import ContextFactory, _using_context

DEFAULT_MAX_BATCH_SIZE = 256
"""Items per call of `batch_fn` / `predict_batch` unless told otherwise."""
DEFAULT_MAX_ITEMS_WAITING = 10_000
"""Items `map_using_model_p` holds for its first model unless told otherwise."""

BatchFn = Callable[[list[Any]], Sequence[Any]]
"""items -> one result per item, in order."""

_REFERENCE = broadcast_key("model_reference")
_WAITING = ProcessorState("items_waiting_for_a_model")


class _HeadOnly:
    """An Inbox of the user's own seen as the deque of its head item: the Inbox protocol shows
    no further, so such an inbox is mapped one item per batch."""

    __slots__ = ("_inbox",)

    def __init__(self, inbox: Inbox) -> None:
        self._inbox = inbox

    def __bool__(self) -> bool:
        return not self._inbox.is_empty()

    def __iter__(self) -> Iterator[Any]:
        head = self._inbox.peek()
        return iter(() if head is None else (head,))

    def popleft(self) -> Any:
        return self._inbox.remove()


def _queue_of(inbox: Inbox) -> deque[Any] | _HeadOnly:
    return inbox.queue if isinstance(inbox, ArrayDequeInbox) else _HeadOnly(inbox)


class BatchMapper:
    """Maps the items at the head of a deque in batches of up to `max_batch_size` and emits the
    results in order, removing each item once its result is accepted (None: dropped)."""

    __slots__ = (
        "_fn_name",
        "_map_batch",
        "_max_batch_size",
        "_offer_items",
        "_plain",
        "_position",
        "_processor",
        "_results",
    )

    def __init__(
        self,
        processor: AbstractProcessor,
        map_batch: BatchFn,
        max_batch_size: int,
        fn_name: str,
    ) -> None:
        self._processor = processor
        self._map_batch = map_batch
        self._max_batch_size = max_batch_size
        self._fn_name = fn_name
        self._offer_items = offer_items_of(processor.outbox)
        self._results: list[Any] | None = None
        """The results of the batch at the head of the deque, while some are not yet emitted."""
        self._position = 0
        self._plain = True

    def drain(self, items: deque[Any] | _HeadOnly) -> bool:
        """Maps and emits `items` from the head: True once it is empty, False when the outbox
        refused a result (call again with the same deque; that result is offered first)."""
        while True:
            results = self._results
            if results is None:
                batch = list(islice(items, self._max_batch_size))
                if not batch:
                    return True
                results = self._results = self._checked(self._map_batch(batch), len(batch))
                self._plain, self._position = is_plain_batch(results), 0
            start = self._position
            end = offer_batch(self._processor, self._offer_items, results, start, self._plain)
            for _ in range(end - start):
                items.popleft()
            if end < len(results):
                self._position = end
                return False
            self._results = None

    def _checked(self, results: Any, count: int) -> list[Any]:
        """`results` as a list of `count` results, or an error naming the vertex."""
        vertex = self._processor.context.vertex_name
        try:
            checked = list(results)
        except TypeError:
            raise TypeError(
                f"vertex '{vertex}': {self._fn_name} returned {type(results).__name__} for a "
                f"batch of {count} items; it must return a sequence of one result per item"
            ) from None
        if len(checked) != count:
            raise ValueError(
                f"vertex '{vertex}': {self._fn_name} returned {len(checked)} results for a batch "
                f"of {count} items; it must return one result per item, in order (None drops "
                "an item)"
            )
        return checked


class MapBatchedP(AbstractProcessor):
    """Emits `map_batch(items)`'s results for batches of up to `max_batch_size` inbox items."""

    def __init__(self, map_batch: BatchFn, max_batch_size: int) -> None:
        self._map_batch = map_batch
        self._max_batch_size = max_batch_size

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._mapper = BatchMapper(self, self._map_batch, self._max_batch_size, "batch_fn")

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self._mapper.drain(_queue_of(inbox))


class _Once:
    """True from `first()` once, for all processors of a vertex in one process (a member):
    `list.pop` is atomic, and the object pickles with its vertex's supplier."""

    __slots__ = ("_left",)

    def __init__(self) -> None:
        self._left = [True]

    def first(self) -> bool:
        try:
            return self._left.pop()
        except IndexError:
            return False


class MapUsingModelP(AbstractProcessor):
    """Predicts the items of ordinal 0 in batches with the model of the latest reference of
    ordinal 1 (module docstring). Non-cooperative."""

    def __init__(
        self,
        load_model: Callable[[Any], Any],
        predict_batch: Callable[[Any, list[Any]], Sequence[Any]],
        max_batch_size: int,
        max_items_waiting: int = DEFAULT_MAX_ITEMS_WAITING,
        warning: _Once | None = None,
    ) -> None:
        self._load_model = load_model
        self._predict_batch = predict_batch
        self._max_batch_size = max_batch_size
        self._max_items_waiting = max_items_waiting
        self._warning = _Once() if warning is None else warning
        """Shared by the processors of the vertex in one process: one warning among them."""
        self._reference: Any = NOTHING
        self._references_taken = 0
        """References taken from ordinal 1 so far (restored with the reference)."""
        self._model: Any = NOTHING
        """The model of `_reference`, or NOTHING until a batch needs it."""
        self._waiting: deque[Any] = deque()
        """Items that arrived before the first reference, in arrival order."""
        self._restored: list[tuple[int, Any]] = []
        self._snapshot = ResumableEmission(self.emit_from_traverser_to_snapshot)

    def is_cooperative(self) -> bool:
        return False

    def snapshot_unaligned_ordinals(self) -> tuple[int, ...]:
        """The references keep coming while a snapshot waits for items held back on ordinal 0
        (a reference taken twice after a restore loads the same model)."""
        return (1,)

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._mapper = BatchMapper(self, self._predict, self._max_batch_size, "predict_batch")

    def process(self, ordinal: int, inbox: Inbox) -> None:
        if ordinal == 1:
            self._take_references(inbox)
        elif ordinal != 0:
            raise ValueError(
                f"vertex '{self.context.vertex_name}': map_using_model_p takes items on inbound "
                f"ordinal 0 and model references on ordinal 1, but items came on ordinal {ordinal}"
            )
        elif self._reference is NOTHING:
            self._hold(inbox)  # the first model predicts them
        elif self._flush_waiting():
            self._mapper.drain(_queue_of(inbox))

    def _hold(self, inbox: Inbox) -> None:
        """Takes the items of `inbox` into the ones waiting for the first model, up to
        `max_items_waiting` unless the runtime needs the inbox emptied (module docstring)."""
        room = self._max_items_waiting - len(self._waiting)
        if room >= len(inbox) or getattr(inbox, "must_drain", False):
            inbox.drain_to(self._waiting)
            return
        for _ in range(room):
            self._waiting.append(inbox.remove())
        if self._warning.first():
            self.context.logger.warning(
                "vertex '%s': %d items wait for the first model reference on inbound ordinal "
                "1; taking no more items from ordinal 0 until one comes (backpressure; "
                "max_items_waiting=%d)",
                self.context.vertex_name,
                len(self._waiting),
                self._max_items_waiting,
            )

    def _take_references(self, inbox: Inbox) -> None:
        while (reference := inbox.peek()) is not None:
            if not self._flush_waiting():  # the items before it get the model before it
                return
            self._reference, self._model = reference, NOTHING
            self._references_taken += 1
            inbox.remove()

    def _flush_waiting(self) -> bool:
        """Emits the results of the items held for the first model, once there is a reference;
        True when none are held any more, or there is no model to predict them yet."""
        return not self._waiting or self._reference is NOTHING or self._mapper.drain(self._waiting)

    def _predict(self, items: list[Any]) -> Sequence[Any]:
        if self._model is NOTHING:
            reference = self._reference
            try:
                self._model = self._load_model(reference)
            except Exception as error:
                raise RuntimeError(
                    f"vertex '{self.context.vertex_name}': load_model({reference!r}) failed: "
                    f"{type(error).__name__}: {error}"
                ) from error
        return self._predict_batch(self._model, items)

    def try_process(self) -> bool:
        return self._flush_waiting()

    def try_process_watermark(self, watermark: Watermark) -> bool:
        return self._flush_waiting()

    def complete(self) -> bool:
        if self._waiting and self._reference is NOTHING:
            raise RuntimeError(
                f"vertex '{self.context.vertex_name}': the input ended with "
                f"{len(self._waiting)} items still waiting for a model: no model reference "
                "came on inbound ordinal 1"
            )
        return self._flush_waiting()

    def save_to_snapshot(self) -> bool:
        return self._snapshot.emit(self._entries)

    def _entries(self) -> Iterator[tuple[Any, Any]]:
        if self._reference is not NOTHING:
            yield _REFERENCE, (self._references_taken, self._reference)
        if self._waiting:
            yield _WAITING.entry(self.context, tuple(self._waiting))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if key == _REFERENCE:
            self._restored.append(value)
            return
        saved = _WAITING.saved(key, value)
        if ProcessorState.owns(self.context, saved):
            self._waiting.extend(saved.value)

    def finish_snapshot_restore(self) -> bool:
        if self._restored:
            taken, reference = min(self._restored, key=lambda restored: restored[0])
            self._references_taken, self._reference, self._model = taken, reference, NOTHING
            self._restored = []
        return True


def _check_batch_size(factory: str, max_batch_size: int, setting: str = "max_batch_size") -> None:
    if type(max_batch_size) is not int or max_batch_size < 1:
        raise ValueError(f"{factory}: {setting} must be an int >= 1, got {max_batch_size!r}")


def map_batched_using_context_p(
    context_factory: ContextFactory,
    batch_fn: Callable[[Any, list[Any]], Sequence[Any]],
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
) -> ProcessorFn:
    """Emits the results of `batch_fn(ctx, items)` for up to `max_batch_size` items at a time,
    as many as wait in the inbox (never waiting for more); one result per item, in order, None
    dropping an item. `ctx` comes from `context_factory`; cooperative unless it says not."""
    _check_batch_size("map_batched_using_context_p", max_batch_size)
    return lambda: _using_context(
        context_factory, batch_fn, lambda bound: MapBatchedP(bound, max_batch_size)
    )


def map_using_model_p(
    load_model: Callable[[Any], Any],
    predict_batch: Callable[[Any, list[Any]], Sequence[Any]],
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_items_waiting: int = DEFAULT_MAX_ITEMS_WAITING,
) -> ProcessorFn:
    """Emits `predict_batch(model, items)`'s results (one per item) for the items of inbound
    ordinal 0, in batches of up to `max_batch_size`, with the model `load_model(reference)` of
    the latest reference that came on ordinal 1; up to `max_items_waiting` items are held for
    the first model, then ordinal 0 is backpressured; snapshots hold the reference (module
    docstring). Non-cooperative."""
    _check_batch_size("map_using_model_p", max_batch_size)
    _check_batch_size("map_using_model_p", max_items_waiting, "max_items_waiting")
    warning = _Once()
    return lambda: MapUsingModelP(
        load_model, predict_batch, max_batch_size, max_items_waiting, warning
    )
