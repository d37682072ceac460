"""AbstractProcessor: the convenience base class for writing processors (manual §8.4)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from jetspark.core.context import Context
from jetspark.core.errors import CallbackResultError, UnsupportedOperationError
from jetspark.core.inbox import ArrayDequeInbox, Inbox
from jetspark.core.outbox import Ordinals, Outbox, is_plain_batch, offer_items_of
from jetspark.core.processor import Processor
from jetspark.core.traverser import Traverser, as_traverser

_NOTHING = object()


class AbstractProcessor(Processor):
    """Receives items one at a time through `try_process0..4` and emits through traversers.

    Override `try_process_item(ordinal, item)` (any ordinal) or `try_processN(item)` (ordinal N);
    return False to be called again with the same item, which stays in the inbox until True.
    Subclasses overriding `init` must call `super().init(outbox, context)`.
    """

    outbox: Outbox
    context: Context
    logger: logging.Logger

    def init(self, outbox: Outbox, context: Context) -> None:
        """Keeps the outbox, context and logger for the subclass."""
        self.outbox = outbox
        self.context = context
        self.logger = context.logger
        self._pending_item: Any = _NOTHING
        self._pending_snapshot_item: Any = _NOTHING
        # the plain iterable being emitted and its traverser, per kind (items, snapshot entries)
        self._iterable_traversers: dict[bool, tuple[Any, Traverser]] = {}

    def process(self, ordinal: int, inbox: Inbox) -> None:
        """Feeds items to the ordinal's try-method; each leaves the inbox once it returned True.

        A result other than True or False (None: a forgotten `return True`) raises
        CallbackResultError naming the try-method, instead of calling it again forever.
        """
        try_process = self._item_handler(ordinal)
        if type(inbox) is ArrayDequeInbox:
            queue = inbox.queue
            while queue:
                done = try_process(queue[0])
                if done is not True:
                    self._refuse_unless_false(done, ordinal)
                    return
                queue.popleft()
            return
        while (item := inbox.peek()) is not None:
            done = try_process(item)
            if done is not True:
                self._refuse_unless_false(done, ordinal)
                return
            inbox.remove()

    def _refuse_unless_false(self, result: object, ordinal: int) -> None:
        """Raises CallbackResultError unless `result`, a try-method's for `ordinal`, is False."""
        if result is not False:
            raise CallbackResultError.of(self._item_handler_name(ordinal), result)

    def _item_handler_name(self, ordinal: int) -> str:
        """The try-method the processor overrides for `ordinal`: `try_processN` or the catch-all."""
        name = f"try_process{ordinal}"
        inherited = getattr(AbstractProcessor, name, None)
        if inherited is not None and getattr(type(self), name) is not inherited:
            return name
        return "try_process_item"

    def _item_handler(self, ordinal: int) -> Callable[[Any], object]:
        if ordinal == 0:
            return self.try_process0
        if ordinal == 1:
            return self.try_process1
        if ordinal == 2:
            return self.try_process2
        if ordinal == 3:
            return self.try_process3
        if ordinal == 4:
            return self.try_process4
        return lambda item: self.try_process_item(ordinal, item)

    def try_process0(self, item: Any) -> bool:
        """Processes an item of ordinal 0; by default delegates to `try_process_item`."""
        return self.try_process_item(0, item)

    def try_process1(self, item: Any) -> bool:
        """Processes an item of ordinal 1; by default delegates to `try_process_item`."""
        return self.try_process_item(1, item)

    def try_process2(self, item: Any) -> bool:
        """Processes an item of ordinal 2; by default delegates to `try_process_item`."""
        return self.try_process_item(2, item)

    def try_process3(self, item: Any) -> bool:
        """Processes an item of ordinal 3; by default delegates to `try_process_item`."""
        return self.try_process_item(3, item)

    def try_process4(self, item: Any) -> bool:
        """Processes an item of ordinal 4; by default delegates to `try_process_item`."""
        return self.try_process_item(4, item)

    def try_process_item(self, ordinal: int, item: Any) -> bool:
        """The catch-all for items of any ordinal; override it or a `try_processN`."""
        raise UnsupportedOperationError(
            f"{type(self).__name__} received item {item!r} on inbound ordinal {ordinal} but "
            f"overrides neither try_process{ordinal}(item) nor try_process_item(ordinal, item)"
        )

    def try_emit(self, item: Any, ordinal: Ordinals = None) -> bool:
        """Offers `item` to the outbox (all ordinals by default); False means stop and return."""
        return self.outbox.offer(item, ordinal)

    def emit_from_traverser(
        self, traverser: Traverser | Iterable[Any], ordinal: Ordinals = None
    ) -> bool:
        """Emits items until the outbox refuses one (False) or the traverser is exhausted (True).

        Call it again with the same traverser after False; the refused item is kept and resent.
        A plain iterable works too, as long as the same object is passed on every retry.
        """
        source = self._traverser_for(traverser, snapshot=False)
        offer = self.outbox.offer
        item = self._pending_item
        if item is _NOTHING:
            item = source.next()
        while item is not None:
            if not offer(item, ordinal):
                self._pending_item = item
                return False
            item = source.next()
        self._pending_item = _NOTHING
        self._iterable_traversers.pop(False, None)
        return True

    def _traverser_for(self, source: Traverser | Iterable[Any], snapshot: bool) -> Traverser:
        """`source` itself, or the traverser kept for a plain iterable until it is exhausted.

        Forgotten once exhausted, so a list emitted again (refilled, say) starts from its head.
        """
        if isinstance(source, Traverser):
            return source
        kept = self._iterable_traversers.get(snapshot)
        if kept is None or kept[0] is not source:
            kept = self._iterable_traversers[snapshot] = (source, as_traverser(source))
        return kept[1]

    def try_emit_to_snapshot(self, key: Any, value: Any) -> bool:
        """Offers a state entry to the snapshot; False means stop and return from the callback."""
        return self.outbox.offer_to_snapshot(key, value)

    def emit_from_traverser_to_snapshot(self, traverser: Traverser | Iterable[Any]) -> bool:
        """Offers `(key, value)` entries to the snapshot until refused (False) or done (True).

        An outbox with `offer_snapshot_entries` (OutboxImpl's) takes the entries that fit as
        one slice; any other gets one `offer_to_snapshot` per entry.
        """
        source = self._traverser_for(traverser, snapshot=True)
        offer = self.outbox.offer_to_snapshot
        take_entries = getattr(self.outbox, "offer_snapshot_entries", None)
        entry = self._pending_snapshot_item
        if entry is _NOTHING:
            entry = source.next()
        while entry is not None:
            key, value = entry
            if not offer(key, value):
                self._pending_snapshot_item = entry
                return False
            entry = source.next() if take_entries is None else take_entries(iter(source.next, None))
        self._pending_snapshot_item = _NOTHING
        self._iterable_traversers.pop(True, None)
        return True

    def restore_from_snapshot(self, inbox: Inbox) -> None:
        """Passes each `(key, value)` entry to `restore_from_snapshot_entry`."""
        while (entry := inbox.poll()) is not None:
            key, value = entry
            self.restore_from_snapshot_entry(key, value)

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        """Restores one state entry saved by this processor's `save_to_snapshot`."""
        raise UnsupportedOperationError(
            f"{type(self).__name__} was given snapshot entry {key!r} to restore but does not "
            "override restore_from_snapshot_entry(key, value)"
        )

    def flat_mapper(
        self, fn: Callable[[Any], Traverser | Iterable[Any] | None], ordinal: Ordinals = None
    ) -> FlatMapper:
        """A FlatMapper emitting the items `fn(item)` returns, resumable across full outboxes."""
        return FlatMapper(self, fn, ordinal)


class FlatMapper:
    """Emits `fn(item)`'s items; `try_process(item)` is False while some are still unsent.

    A list or tuple of plain items (`is_plain_batch`), the usual result, goes to the outbox as a
    batch (`offer_items`) when it is for every ordinal; anything else through a traverser.
    """

    __slots__ = ("_fn", "_ordinal", "_out", "_position", "_processor")

    def __init__(
        self,
        processor: AbstractProcessor,
        fn: Callable[[Any], Traverser | Iterable[Any] | None],
        ordinal: Ordinals = None,
    ) -> None:
        self._processor = processor
        self._fn = fn
        self._ordinal = ordinal
        self._out: Sequence[Any] | Traverser | None = None
        self._position = 0
        """How many items of a batch `_out` went out."""

    @property
    def idle(self) -> bool:
        """True when no item's results are waiting to go out."""
        return self._out is None

    def hold(self, result: Traverser | Iterable[Any] | None) -> Sequence[Any] | Traverser:
        """Takes `result` as `fn`'s for the item of the next `try_process` call (for a caller
        that computed it already); returns it as it will be emitted, a batch or a Traverser."""
        out: Sequence[Any] | Traverser
        if (
            self._ordinal is None
            and (type(result) is list or type(result) is tuple)
            and is_plain_batch(result)
        ):
            out = result
        else:
            out = as_traverser(result)
        self._out, self._position = out, 0
        return out

    def try_process(self, item: Any) -> bool:
        """True when all items of `fn(item)` are emitted; call again with the same item if False."""
        out = self._out
        if out is None:
            out = self.hold(self._fn(item))
        if isinstance(out, Traverser):
            done = self._processor.emit_from_traverser(out, self._ordinal)
        else:
            self._position = offer_items_of(self._processor.outbox)(out, self._position)
            done = self._position == len(out)
        if done:
            self._out = None
        return done
