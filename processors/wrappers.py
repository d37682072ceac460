"""Processor wrappers: decorate every processor a supplier creates, whatever its form.

A wrapper delegates each Processor callback to the wrapped processor; subclasses override the
callbacks they change. `wrap_supplier` applies a wrapper to a zero-argument factory, a
ProcessorSupplier or a ProcessorMetaSupplier alike, keeping its init/close lifecycle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jetspark.core.context import Context, ProcessorMetaSupplierContext, ProcessorSupplierContext
from jetspark.core.inbox import Inbox
from jetspark.core.outbox import Outbox
from jetspark.core.processor import Processor
from jetspark.core.suppliers import (
    ProcessorMetaSupplier,
    ProcessorSupplier,
    as_meta_supplier,
    as_processor_supplier,
)
from jetspark.core.watermark import Watermark

WrapFn = Callable[[Processor], Processor]


class ProcessorWrapper(Processor):
    """Delegates every callback to `wrapped`."""

    def __init__(self, wrapped: Processor) -> None:
        self.wrapped = wrapped

    def init(self, outbox: Outbox, context: Context) -> None:
        self.wrapped.init(outbox, context)

    def is_cooperative(self) -> bool:
        return self.wrapped.is_cooperative()

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self.wrapped.process(ordinal, inbox)

    def try_process_watermark(self, watermark: Watermark) -> bool:
        return self.wrapped.try_process_watermark(watermark)

    def try_process(self) -> bool:
        return self.wrapped.try_process()

    def complete_edge(self, ordinal: int) -> bool:
        return self.wrapped.complete_edge(ordinal)

    def complete(self) -> bool:
        return self.wrapped.complete()

    def save_to_snapshot(self) -> bool:
        return self.wrapped.save_to_snapshot()

    def restore_from_snapshot(self, inbox: Inbox) -> None:
        self.wrapped.restore_from_snapshot(inbox)

    def finish_snapshot_restore(self) -> bool:
        return self.wrapped.finish_snapshot_restore()

    def snapshot_committed(self) -> None:
        self.wrapped.snapshot_committed()

    def close(self) -> None:
        self.wrapped.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.wrapped!r})"


class _WrappingSupplier(ProcessorSupplier):
    """Wraps each processor of `inner`."""

    def __init__(self, inner: ProcessorSupplier, wrap: WrapFn) -> None:
        self.inner = inner
        self.wrap = wrap

    def init(self, context: ProcessorSupplierContext) -> None:
        self.inner.init(context)

    def get(self, count: int) -> list[Processor]:
        return [self.wrap(p) for p in self.inner.get(count)]

    def close(self, error: BaseException | None) -> None:
        self.inner.close(error)


class _WrappingMetaSupplier(ProcessorMetaSupplier):
    """Wraps each ProcessorSupplier of `inner`."""

    def __init__(self, inner: ProcessorMetaSupplier, wrap: WrapFn, name: str) -> None:
        self.inner = inner
        self.wrap = wrap
        self.name = name

    def preferred_local_parallelism(self) -> int:
        return self.inner.preferred_local_parallelism()

    def init(self, context: ProcessorMetaSupplierContext) -> None:
        self.inner.init(context)

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], ProcessorSupplier]:
        supplier_of = self.inner.get(member_indexes)

        def wrapped_supplier(member_index: int) -> ProcessorSupplier:
            supplier = as_processor_supplier(supplier_of(member_index), self.name)
            return _WrappingSupplier(supplier, self.wrap)

        return wrapped_supplier

    def close(self, error: BaseException | None) -> None:
        self.inner.close(error)


def wrap_supplier(supplier: Any, wrap: WrapFn, name: str) -> ProcessorMetaSupplier:
    """A meta-supplier giving `wrap(p)` for every processor `p` that `supplier` creates."""
    return _WrappingMetaSupplier(as_meta_supplier(supplier, name), wrap, name)


class NonCooperativeP(ProcessorWrapper):
    """Declares the wrapped processor non-cooperative: it gets its own thread and may block."""

    def is_cooperative(self) -> bool:
        return False


def non_cooperative_p(supplier: Any) -> ProcessorMetaSupplier:
    """Makes every processor of `supplier` non-cooperative (for blocking calls)."""
    return wrap_supplier(supplier, NonCooperativeP, "non_cooperative_p")
