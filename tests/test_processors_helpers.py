"""Helpers shared by the processor-library tests (this module holds no tests of its own)."""

from __future__ import annotations

import dataclasses
from typing import Any

from jetspark.core.stores import Stores
from jetspark.core.test_support import ONE_ITEM, TestSupport
from jetspark.processors.wrappers import ProcessorWrapper, wrap_supplier


def verify(supplier: Any) -> TestSupport:
    """TestSupport for `supplier`, quiet."""
    return TestSupport.verify_processor(supplier).disable_logging()


def any_order(supplier: Any) -> TestSupport:
    """TestSupport for `supplier`, quiet, comparing the output in any order."""
    return verify(supplier).output_checker(TestSupport.SAME_ITEMS_ANY_ORDER)


def output_of(builder: TestSupport, items: list[Any] | None = None) -> list[Any]:
    """What one processor emits on ordinal 0 (one-item inbox, no snapshots), e.g. for a second
    stage's input; `builder` is a TestSupport or a supplier.
    """
    if not isinstance(builder, TestSupport):
        builder = verify(builder)
    if items is not None:
        builder.input(items)
    captured: list[Any] = []

    def capture(expected: list[Any], actual: list[Any]) -> bool:
        captured[:] = actual
        return True

    builder.modes(ONE_ITEM).output_checker(capture).expect_output([])
    return captured


class FakeClock:
    """Milliseconds that move only when the test says so."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class _WithStores(ProcessorWrapper):
    """Gives the wrapped processor a context whose `stores` are the test's (the engine's role)."""

    def __init__(self, wrapped: Any, stores: Stores) -> None:
        super().__init__(wrapped)
        self.stores = stores

    def init(self, outbox: Any, context: Any) -> None:
        super().init(outbox, dataclasses.replace(context, stores=self.stores))


def with_stores(supplier: Any, stores: Stores) -> Any:
    """`supplier` whose processors read and write `stores`."""
    return wrap_supplier(supplier, lambda p: _WithStores(p, stores), "with_stores")
