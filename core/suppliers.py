"""The three ways to supply a vertex's processors (manual §8.1.1, §8.7.1), and their normal form.

Every vertex ends up with a ProcessorMetaSupplier: the engine calls it once per job, then the
ProcessorSupplier it returns once per member, then that supplier's `get(local_parallelism)`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from jetspark.core.context import ProcessorMetaSupplierContext, ProcessorSupplierContext
from jetspark.core.errors import DagValidationError
from jetspark.core.processor import Processor

ProcessorFn = Callable[[], Processor]
"""A zero-argument callable returning a new Processor (a Processor subclass qualifies)."""


class ProcessorSupplier:
    """Creates all processors of a vertex on one member; may specialise each one."""

    def init(self, context: ProcessorSupplierContext) -> None:
        """Called once on the member before `get`."""

    def get(self, count: int) -> Sequence[Processor]:
        """Returns `count` new processors for this member."""
        raise TypeError(f"{type(self).__name__} must override get(count)")

    def close(self, error: BaseException | None) -> None:
        """Called once at the end of the job on the member; `error` is None on success."""

    @staticmethod
    def of(processor_fn: ProcessorFn) -> ProcessorSupplier:
        """A supplier calling `processor_fn()` once per processor."""
        return _ProcessorFnSupplier(processor_fn)


class ProcessorMetaSupplier:
    """Creates one ProcessorSupplier per member; the most general way to supply a vertex."""

    def preferred_local_parallelism(self) -> int:
        """The local parallelism to use when the vertex does not set one (-1: engine default)."""
        return -1

    def init(self, context: ProcessorMetaSupplierContext) -> None:
        """Called once per job before `get`."""

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], Any]:
        """Returns a function from member index to that member's ProcessorSupplier.

        The function may return a ProcessorSupplier or a plain `count -> [processors]` callable.
        """
        raise TypeError(f"{type(self).__name__} must override get(member_indexes)")

    def close(self, error: BaseException | None) -> None:
        """Called once at the end of the job; `error` is None on success."""

    @staticmethod
    def of(
        supplier: ProcessorSupplier | ProcessorFn, preferred_local_parallelism: int = -1
    ) -> ProcessorMetaSupplier:
        """A meta-supplier giving every member (its own copy of) the same ProcessorSupplier."""
        if not isinstance(supplier, ProcessorSupplier):
            supplier = ProcessorSupplier.of(supplier)
        return _SameOnEveryMember(supplier, preferred_local_parallelism)


class _ProcessorFnSupplier(ProcessorSupplier):
    """Wraps a zero-argument processor factory."""

    def __init__(self, processor_fn: ProcessorFn) -> None:
        self.processor_fn = processor_fn

    def get(self, count: int) -> list[Processor]:
        return [self.processor_fn() for _ in range(count)]

    def __repr__(self) -> str:
        return f"ProcessorSupplier.of({_describe(self.processor_fn)})"


class _CountFnSupplier(ProcessorSupplier):
    """Wraps a `count -> [processors]` callable, the Python form of Jet's supplier lambda."""

    def __init__(self, get_fn: Callable[[int], Sequence[Processor]]) -> None:
        self.get_fn = get_fn

    def get(self, count: int) -> Sequence[Processor]:
        return self.get_fn(count)


class _SameOnEveryMember(ProcessorMetaSupplier):
    """Jet's `ProcessorMetaSupplier.of(supplier)`."""

    def __init__(self, supplier: ProcessorSupplier, preferred_local_parallelism: int) -> None:
        self.supplier = supplier
        self._preferred = preferred_local_parallelism

    def preferred_local_parallelism(self) -> int:
        return self._preferred

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], ProcessorSupplier]:
        return lambda member_index: self.supplier

    def __repr__(self) -> str:
        return repr(self.supplier)


def as_processor_supplier(obj: Any, where: str) -> ProcessorSupplier:
    """Normalises what a meta-supplier's function returned; `where` names it in errors."""
    if isinstance(obj, ProcessorSupplier):
        return obj
    if callable(obj):
        return _CountFnSupplier(obj)
    raise TypeError(
        f"{where}: the meta-supplier's function returned {type(obj).__name__}, expected a "
        "ProcessorSupplier or a callable taking the processor count"
    )


def as_meta_supplier(supplier: Any, vertex_name: str) -> ProcessorMetaSupplier:
    """Normalises any accepted supplier form; raises DagValidationError naming the vertex."""
    if isinstance(supplier, ProcessorMetaSupplier):
        return supplier
    if isinstance(supplier, ProcessorSupplier):
        return ProcessorMetaSupplier.of(supplier)
    if isinstance(supplier, type) and issubclass(
        supplier, (ProcessorSupplier, ProcessorMetaSupplier)
    ):
        raise DagValidationError(
            f"vertex '{vertex_name}': pass an instance of {supplier.__name__}, not the class"
        )
    if isinstance(supplier, Processor):
        raise DagValidationError(
            f"vertex '{vertex_name}': got a Processor instance ({type(supplier).__name__}); every "
            "processor needs its own instance, so pass the class or a lambda returning a new one"
        )
    if callable(supplier):
        if not _accepts_no_arguments(supplier):
            raise DagValidationError(
                f"vertex '{vertex_name}': the supplier {_describe(supplier)} requires arguments; "
                "give a zero-argument callable returning a Processor, a ProcessorSupplier or a "
                "ProcessorMetaSupplier"
            )
        return ProcessorMetaSupplier.of(ProcessorSupplier.of(supplier))
    raise DagValidationError(
        f"vertex '{vertex_name}': the supplier must be a zero-argument callable returning a "
        f"Processor, a ProcessorSupplier or a ProcessorMetaSupplier; got {type(supplier).__name__}"
    )


def _accepts_no_arguments(fn: Callable[..., Any]) -> bool:
    try:
        inspect.signature(fn).bind()
    except TypeError:
        return False
    except ValueError:  # no introspectable signature (some builtins): let the call decide
        return True
    return True


def _describe(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def supplier_holders(supplier: Any) -> list[Any]:
    """A vertex's supplier in any form, then the supplier a meta-supplier of `of` wraps, then
    the processor function a supplier of `of` calls: where markers such as `unbounded` sit."""
    holders = [supplier]
    if isinstance(supplier, _SameOnEveryMember):
        holders.append(supplier.supplier)
    if isinstance(holders[-1], _ProcessorFnSupplier):
        holders.append(holders[-1].processor_fn)
    return holders


def processor_fn_of(supplier: Any) -> Any:
    """The processor function (or Processor class) behind a vertex's supplier, None when the
    supplier is a ProcessorSupplier or ProcessorMetaSupplier of the user's own."""
    innermost = supplier_holders(supplier)[-1]
    if isinstance(innermost, (ProcessorSupplier, ProcessorMetaSupplier)):
        return None
    return innermost


def unbounded(supplier: Any) -> Any:
    """Marks a source's supplier (a processor function, a supplier or a meta-supplier) as
    unbounded: it never completes by itself. SparkEngine's AUTO execution mode runs a DAG with
    such a source continuously. Returns `supplier`."""
    supplier.unbounded = True
    return supplier


def declares_unbounded(meta_supplier: Any) -> bool:
    """True when a vertex's meta-supplier, its supplier or its processor function was marked
    with `unbounded`."""
    return any(
        getattr(holder, "unbounded", False) is True for holder in supplier_holders(meta_supplier)
    )


def writes_directory(supplier: Any, directory: str) -> Any:
    """Marks a sink's supplier as writing files into `directory`, which on a cluster must be
    storage every executor and the driver share (checked before the job starts). Returns
    `supplier`."""
    supplier.writes_directory = directory
    return supplier


def declared_directory(meta_supplier: Any) -> str | None:
    """The directory a vertex's meta-supplier, its supplier or its processor function was
    marked with by `writes_directory`, or None."""
    for holder in supplier_holders(meta_supplier):
        directory = getattr(holder, "writes_directory", None)
        if isinstance(directory, str):
            return directory
    return None


def reads_fixed_ranges(supplier: Any) -> Any:
    """Marks a replayable source whose snapshot fixes what it reads next: in a micro-batch it
    reads exactly the range its restored state names (Kafka offsets up to the end offsets the
    previous batch saved), so it gets no item budget and a task run again reads the same
    items. Returns `supplier`."""
    supplier.reads_fixed_ranges = True
    return supplier


def declares_fixed_ranges(meta_supplier: Any) -> bool:
    """True when a vertex's meta-supplier was marked with `reads_fixed_ranges`."""
    return getattr(meta_supplier, "reads_fixed_ranges", False) is True
