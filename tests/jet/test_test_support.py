"""Port of Jet 0.7 `com.hazelcast.jet.core.test.TestSupportTest`.

Deliberate difference: Jet's test names the supplier's `close(error)` "complete"; the
callback is jetspark's `ProcessorSupplier.close(error)` as well.
"""

from __future__ import annotations

from collections.abc import Sequence

from jetspark.core import ProcessorMetaSupplier, ProcessorSupplier
from jetspark.core.processor import Processor
from jetspark.core.test_support import TestSupport
from jetspark.processors import noop_p


def test_compare_as_set() -> None:
    """`TestSupportTest.test_compareAsSet`."""
    assert TestSupport.SAME_ITEMS_ANY_ORDER(["a", "b", "a"], ["a", "a", "b"])
    assert not TestSupport.SAME_ITEMS_ANY_ORDER(["a", "b", "a"], ["a", "b", "b"])


class NoopSupplier(ProcessorSupplier):
    """One noop processor; records that `close` was called."""

    def __init__(self) -> None:
        self.closed = False

    def get(self, count: int) -> Sequence[Processor]:
        assert count == 1
        return [noop_p()()]

    def close(self, error: BaseException | None) -> None:
        self.closed = True


def test_when_processor_supplier_tested_then_complete_called() -> None:
    """`TestSupportTest.when_processorSupplierTested_then_completeCalled`."""
    supplier = NoopSupplier()
    TestSupport.verify_processor(supplier).expect_output([])
    assert supplier.closed, "ProcessorSupplier.close not called"
    # once more through a ProcessorMetaSupplier
    supplier.closed = False
    TestSupport.verify_processor(ProcessorMetaSupplier.of(supplier)).expect_output([])
    assert supplier.closed, "ProcessorSupplier.close not called when using a meta-supplier"
