"""The processor verification harness (manual §8.8.2): TestSupport and its test doubles.

    TestSupport.verify_processor(MyProcessor).input([1, 2]).expect_output([2, 4])

runs the processor in every mode (inbox of one item / of all items; snapshots off, restoring
every snapshot, restoring every other one) and fails with an AssertionError that says what was
expected, what came out, where they first differ and which callback on which input produced it.
"""

from __future__ import annotations

from jetspark.core.test_support.boxes import TestInbox, TestOutbox, TestProcessorContext
from jetspark.core.test_support.builder import TestSupport
from jetspark.core.test_support.driver import VerificationFailure
from jetspark.core.test_support.modes import (
    ALL_AT_ONCE,
    ALL_AT_ONCE_RESTORE_EVERY,
    ALL_AT_ONCE_RESTORE_EVERY_OTHER,
    ALL_ITEMS,
    DEFAULT_MODES,
    ONE_ITEM,
    ONE_ITEM_RESTORE_EVERY,
    ONE_ITEM_RESTORE_EVERY_OTHER,
    TestMode,
)
from jetspark.core.test_support.report import OutputChecker, exact_equality, same_items_any_order

SAME_ITEMS_ANY_ORDER = same_items_any_order
"""Module-level alias of `TestSupport.SAME_ITEMS_ANY_ORDER`."""

__all__ = [
    "ALL_AT_ONCE",
    "ALL_AT_ONCE_RESTORE_EVERY",
    "ALL_AT_ONCE_RESTORE_EVERY_OTHER",
    "ALL_ITEMS",
    "DEFAULT_MODES",
    "ONE_ITEM",
    "ONE_ITEM_RESTORE_EVERY",
    "ONE_ITEM_RESTORE_EVERY_OTHER",
    "SAME_ITEMS_ANY_ORDER",
    "OutputChecker",
    "TestInbox",
    "TestMode",
    "TestOutbox",
    "TestProcessorContext",
    "TestSupport",
    "VerificationFailure",
    "exact_equality",
    "same_items_any_order",
]
