"""Where the harness gets processor instances: a supplier of any form, or a template instance."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from jetspark.core.context import ProcessorMetaSupplierContext, ProcessorSupplierContext
from jetspark.core.processor import Processor
from jetspark.core.suppliers import ProcessorSupplier, as_meta_supplier, as_processor_supplier


class ProcessorSource:
    """Creates the processors of a verification, through the suppliers' init/get/close lifecycle.

    A Processor instance is a template: every instance the harness needs (one per mode, one per
    snapshot restore) is a deep copy of it, taken before any callback ran on it.
    """

    def __init__(self, supplier: Any, vertex_name: str) -> None:
        self.vertex_name = vertex_name
        self._template: Processor | None = None
        if isinstance(supplier, Processor):
            self._template = _copy_of(supplier)
        else:
            self._meta = as_meta_supplier(supplier, vertex_name)

    @contextmanager
    def session(self, members: int, local_parallelism: int) -> Iterator[Callable[[int], Processor]]:
        """Yields `new_processor(member_index)` for a vertex of that shape; closes the suppliers."""
        if self._template is not None:
            template = self._template
            yield lambda member_index: _copy_of(template)
            return
        shape: dict[str, Any] = {
            "vertex_name": self.vertex_name,
            "total_parallelism": members * local_parallelism,
            "local_parallelism": local_parallelism,
            "member_count": members,
        }
        self._meta.init(ProcessorMetaSupplierContext(**shape))
        supplier_of = self._meta.get(list(range(members)))
        suppliers: dict[int, ProcessorSupplier] = {}

        def new_processor(member_index: int) -> Processor:
            if member_index not in suppliers:
                where = f"vertex '{self.vertex_name}', member {member_index}"
                supplier = as_processor_supplier(supplier_of(member_index), where)
                supplier.init(ProcessorSupplierContext(**shape, member_index=member_index))
                suppliers[member_index] = supplier
            return _one_processor(suppliers[member_index])

        error: BaseException | None = None
        try:
            yield new_processor
        except BaseException as raised:
            error = raised
            raise
        finally:
            for supplier in suppliers.values():
                supplier.close(error)
            self._meta.close(error)


def _one_processor(supplier: ProcessorSupplier) -> Processor:
    processors = list(supplier.get(1))
    if len(processors) != 1 or not isinstance(processors[0], Processor):
        raise TypeError(
            f"{supplier!r}.get(1) returned {processors!r}; expected a list of one Processor"
        )
    return processors[0]


def _copy_of(processor: Processor) -> Processor:
    """A deep copy that keeps sentinels (bare `object()` values) identical, so `is` still works."""
    memo: dict[int, Any] = {id(s): s for s in _sentinels(_attribute_values(processor), set())}
    try:
        return copy.deepcopy(processor, memo)
    except Exception as error:
        raise TypeError(
            f"cannot copy the {type(processor).__name__} instance given to verify_processor() "
            f"({error}); the harness needs a new instance per run and per snapshot restore, so "
            "pass the class or a zero-argument factory instead"
        ) from error


def _attribute_values(processor: Processor) -> list[Any]:
    values = list(getattr(processor, "__dict__", {}).values())
    for cls in type(processor).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(processor, name):
                values.append(getattr(processor, name))
    return values


def _sentinels(values: Iterable[Any], seen: set[int]) -> Iterator[Any]:
    """The bare `object()` instances among `values`, looking inside lists, tuples, sets, dicts."""
    for value in values:
        if id(value) in seen:
            continue
        seen.add(id(value))
        if type(value) is object:
            yield value
        elif isinstance(value, dict):
            yield from _sentinels([*value.keys(), *value.values()], seen)
        elif isinstance(value, (list, tuple, set, frozenset)):
            yield from _sentinels(value, seen)
