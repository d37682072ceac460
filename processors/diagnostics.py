"""Peeking wrappers that log what a vertex receives, emits or saves (manual §8.8.1).

Wrap any supplier form: `dag.new_vertex("combine", peek_input_p(combine_by_key_p(counting())))`.
Items are logged at INFO on the vertex's logger, on the machine that runs the processor;
`to_string` formats an item, `should_log` picks the items worth logging (watermarks are always
logged). The wrappers are transparent: the wrapped processor's state and snapshots are its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, MutableSequence
from typing import Any

from jetspark.core.context import Context
from jetspark.core.inbox import Inbox
from jetspark.core.outbox import Ordinals, Outbox
from jetspark.core.processor import Processor
from jetspark.core.suppliers import ProcessorMetaSupplier
from jetspark.core.watermark import Watermark
from jetspark.processors.wrappers import ProcessorWrapper, wrap_supplier

ToString = Callable[[Any], str]
ShouldLog = Callable[[Any], bool]


def _always(item: Any) -> bool:
    return True


class _Peeker:
    """Formats and logs the items that pass `should_log` (watermarks always)."""

    def __init__(self, to_string: ToString, should_log: ShouldLog) -> None:
        self.to_string = to_string
        self.should_log = should_log
        self.logger: logging.Logger = logging.getLogger("jetspark")

    def log(self, prefix: str, item: Any) -> None:
        """Logs `prefix: to_string(item)` if the item is to be logged."""
        if isinstance(item, Watermark):
            self.logger.info("%s: %s", prefix, item)
        elif self.should_log(item):
            self.logger.info("%s: %s", prefix, self.to_string(item))


class _LoggingInbox:
    """An Inbox that logs each item as the processor removes it."""

    def __init__(self, inner: Inbox, peeker: _Peeker, prefix: str) -> None:
        self._inner = inner
        self._peeker = peeker
        self._prefix = prefix

    def is_empty(self) -> bool:
        return self._inner.is_empty()

    def peek(self) -> Any:
        return self._inner.peek()

    def poll(self) -> Any:
        item = self._inner.poll()
        if item is not None:
            self._peeker.log(self._prefix, item)
        return item

    def remove(self) -> Any:
        item = self._inner.remove()
        self._peeker.log(self._prefix, item)
        return item

    def drain(self, fn: Callable[[Any], Any]) -> int:
        def logged(item: Any) -> Any:
            self._peeker.log(self._prefix, item)
            return fn(item)

        return self._inner.drain(logged)

    def drain_to(self, target: MutableSequence[Any]) -> int:
        return self.drain(target.append)

    def __len__(self) -> int:
        return len(self._inner)


class _LoggingOutbox:
    """An Outbox that logs each item once it is accepted: "Output to ordinal N: item", or once
    as "Output: item" when offered to every ordinal; snapshot entries as "Output to snapshot"."""

    def __init__(self, inner: Outbox, peeker: _Peeker, log_items: bool, log_snapshot: bool) -> None:
        self._inner = inner
        self._peeker = peeker
        self._log_items = log_items
        self._log_snapshot = log_snapshot

    def offer(self, item: Any, ordinal: Ordinals = None) -> bool:
        accepted = self._inner.offer(item, ordinal)
        if accepted and self._log_items:
            where = "Output" if ordinal is None else f"Output to ordinal {ordinal}"
            self._peeker.log(where, item)
        return accepted

    def offer_to_snapshot(self, key: Any, value: Any) -> bool:
        accepted = self._inner.offer_to_snapshot(key, value)
        if accepted and self._log_snapshot:
            self._peeker.log("Output to snapshot", (key, value))
        return accepted

    def has_unfinished_item(self) -> bool:
        return self._inner.has_unfinished_item()

    def bucket_count(self) -> int:
        return self._inner.bucket_count()


class PeekWrappedP(ProcessorWrapper):
    """Logs the wrapped processor's input, output and/or snapshot entries."""

    def __init__(
        self,
        wrapped: Processor,
        peeker: _Peeker,
        *,
        peek_input: bool = False,
        peek_output: bool = False,
        peek_snapshot: bool = False,
    ) -> None:
        super().__init__(wrapped)
        self._peeker = peeker
        self._peek_input = peek_input
        self._peek_output = peek_output
        self._peek_snapshot = peek_snapshot

    def init(self, outbox: Outbox, context: Context) -> None:
        self._peeker.logger = context.logger
        if self._peek_output or self._peek_snapshot:
            outbox = _LoggingOutbox(outbox, self._peeker, self._peek_output, self._peek_snapshot)
        super().init(outbox, context)

    def process(self, ordinal: int, inbox: Inbox) -> None:
        if self._peek_input:
            inbox = _LoggingInbox(inbox, self._peeker, f"Input from ordinal {ordinal}")
        super().process(ordinal, inbox)

    def try_process_watermark(self, watermark: Watermark) -> bool:
        done = super().try_process_watermark(watermark)
        if done and self._peek_input:
            self._peeker.log("Input", watermark)
        if done and self._peek_output:
            self._peeker.log("Output forwarded", watermark)
        return done


def _peek(
    supplier: Any, name: str, to_string: ToString, should_log: ShouldLog | None, **what: bool
) -> ProcessorMetaSupplier:
    def wrap(processor: Processor) -> Processor:
        return PeekWrappedP(processor, _Peeker(to_string, should_log or _always), **what)

    return wrap_supplier(supplier, wrap, name)


def peek_input_p(
    supplier: Any, to_string: ToString = str, should_log: ShouldLog | None = None
) -> ProcessorMetaSupplier:
    """Logs every item the processors of `supplier` take from any inbound edge."""
    return _peek(supplier, "peek_input_p", to_string, should_log, peek_input=True)


def peek_output_p(
    supplier: Any, to_string: ToString = str, should_log: ShouldLog | None = None
) -> ProcessorMetaSupplier:
    """Logs every item the processors of `supplier` emit (once, whatever the ordinals)."""
    return _peek(supplier, "peek_output_p", to_string, should_log, peek_output=True)


def peek_snapshot_p(
    supplier: Any, to_string: ToString = str, should_log: ShouldLog | None = None
) -> ProcessorMetaSupplier:
    """Logs every `(key, value)` state entry the processors of `supplier` save to snapshots."""
    return _peek(supplier, "peek_snapshot_p", to_string, should_log, peek_snapshot=True)
