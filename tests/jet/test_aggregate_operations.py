"""Port of Jet 0.7 `com.hazelcast.jet.aggregate.AggregateOperationsTest`, for the operations
jetspark has (docs/jet_conformance.md lists the others).

Deliberate differences, all from jetspark's value-returning accumulators (`acc =
accumulate(acc, item)`, `acc = combine(acc, other)`, `acc = deduct(acc, other)`):

- Jet's `validateOp` reads a mutable accumulator through a getter (`LongAccumulator::get`,
  `MutableReference::get`); here the accumulator is the value: an int, a `(count, sum)` tuple,
  the picked item, a list, a set, a tuple of accumulators for `all_of`.
- Jet checks the exported result is `assertNotSame` the accumulator; that matters only for a
  mutable accumulator, so it is checked for lists and sets, and "stays unchanged after a later
  combine" is checked for every result (Jet compares serialized bytes, here a pickled copy).
- `summingLong`/`summingDouble` are one `summing`, `averagingLong`/`averagingDouble` one
  `averaging`; `minBy`/`maxBy` take a key function, not a comparator.
- Python ints do not overflow, so Jet's `..._Overflow_thenException` tests assert the exact
  result instead of an ArithmeticException.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from jetspark.processors import entry_key, entry_value
from jetspark.processors.aggregate import (
    AggregateOperation,
    all_of,
    averaging,
    counting,
    linear_trend,
    mapping,
    max_by,
    min_by,
    pick_any,
    reducing,
    summing,
    to_list,
    to_map,
    to_set,
)

MUTABLE = (list, set, dict)


def identity(value: Any) -> Any:
    return value


def accumulate(op: AggregateOperation, *items: Any) -> Any:
    acc = op.create_fn()
    for item in items:
        acc = op.accumulate_fn()(acc, item)
    return acc


def _validate(
    op: AggregateOperation,
    acc_value: Callable[[Any], Any],
    item1: Any,
    item2: Any,
    expect_acced1: Any,
    expect_combined: Any,
    expect_finished: Any,
) -> Any:
    """Jet's `validateOp` up to the deduct step; returns (acc1 after combine, acc2)."""
    acc1 = accumulate(op, item1)
    acc2 = accumulate(op, item2)
    assert acc_value(acc1) == expect_acced1, "accumulated"
    acc1_exported = op.export_fn(acc1)
    acc1_exported_serialized = pickle.dumps(acc1_exported)
    acc1 = op.combine_fn(acc1, acc2)
    assert acc_value(acc1) == expect_combined, "combined"
    # acc1 changed: what was exported before must not have
    assert pickle.dumps(acc1_exported) == acc1_exported_serialized
    exported = op.export_fn(acc1)
    assert exported == expect_finished, "exported"
    if isinstance(acc1, MUTABLE):
        assert exported is not acc1
    assert op.finish_fn(acc1) == expect_finished, "finished"
    return acc1, acc2


def _validate_both_in_one(op: AggregateOperation, acc_value: Callable, item1, item2, expected):
    assert acc_value(accumulate(op, item1, item2)) == expected, "accumulated"


def validate_op(op, acc_value, item1, item2, expect_acced1, expect_combined, expect_finished):
    """Jet's `AggregateOperationsTest.validateOp`: create, accumulate, combine, export, finish,
    deduct and accumulate-both, each checked."""
    assert op.deduct_fn is not None, "deduct_fn was None"
    acc1, acc2 = _validate(
        op, acc_value, item1, item2, expect_acced1, expect_combined, expect_finished
    )
    assert acc_value(op.deduct_fn(acc1, acc2)) == expect_acced1, "deducted"
    _validate_both_in_one(op, acc_value, item1, item2, expect_combined)


def validate_op_without_deduct(
    op, acc_value, item1, item2, expect_acced1, expect_combined, expect_finished
):
    """Jet's `AggregateOperationsTest.validateOpWithoutDeduct`."""
    assert op.deduct_fn is None, "deduct_fn must be None"
    _validate(op, acc_value, item1, item2, expect_acced1, expect_combined, expect_finished)
    _validate_both_in_one(op, acc_value, item1, item2, expect_combined)


def test_when_counting() -> None:
    """`AggregateOperationsTest.when_counting`."""
    validate_op(counting(), identity, None, None, 1, 2, 2)


def test_when_summing_to_long() -> None:
    """`AggregateOperationsTest.when_summingToLong`."""
    validate_op(summing(), identity, 1, 2, 1, 3, 3)


def test_when_summing_to_double() -> None:
    """`AggregateOperationsTest.when_summingToDouble`."""
    validate_op(summing(), identity, 0.5, 1.5, 0.5, 2.0, 2.0)


def test_when_averaging_long() -> None:
    """`AggregateOperationsTest.when_averagingLong`: the accumulator is (count, sum)."""
    validate_op(averaging(), identity, 1, 2, (1, 1), (2, 3), 1.5)


def test_when_averaging_long_overflow_then_exception() -> None:
    """`AggregateOperationsTest.when_averagingLongOverflow_thenException`: Python ints do not
    overflow, so the count goes past Java's Long.MAX_VALUE exactly instead of raising."""
    acc = averaging().accumulate_fn()((2**63 - 1, 0), 0)
    assert acc == (2**63, 0)


def test_when_averaging_double() -> None:
    """`AggregateOperationsTest.when_averagingDouble`."""
    validate_op(averaging(), identity, 1.5, 2.5, (1, 1.5), (2, 4.0), 2.0)


def test_when_averaging_double_overflow_then_exception() -> None:
    """`AggregateOperationsTest.when_averagingDoubleOverflow_thenException`: as the long case,
    the count is exact past Long.MAX_VALUE."""
    acc = averaging().accumulate_fn()((2**63 - 1, 0.0), 0.0)
    assert acc == (2**63, 0.0)


def test_when_max_by() -> None:
    """`AggregateOperationsTest.when_maxBy`."""
    validate_op_without_deduct(max_by(), identity, 10, 11, 10, 11, 11)


def test_when_min_by() -> None:
    """`AggregateOperationsTest.when_minBy`."""
    validate_op_without_deduct(min_by(), identity, 10, 11, 10, 10, 10)


def test_when_all_of2() -> None:
    """`AggregateOperationsTest.when_allOf2`."""
    validate_op(all_of(counting(), summing()), identity, 10, 11, (1, 10), (2, 21), (2, 21))


def test_when_all_of_without_deduct_then_no_deduct() -> None:
    """`AggregateOperationsTest.when_allOfWithoutDeduct_then_noDeduct`."""
    validate_op_without_deduct(
        all_of(counting(), max_by()), identity, 10, 11, (1, 10), (2, 11), (2, 11)
    )


def test_when_all_of3() -> None:
    """`AggregateOperationsTest.when_allOf3`."""
    validate_op(
        all_of(counting(), summing(), averaging()),
        identity,
        10,
        11,
        (1, 10, (1, 10)),
        (2, 21, (2, 21)),
        (2, 21, 10.5),
    )


def test_when_all_of_without_combine_then_no_combine() -> None:
    """`AggregateOperationsTest.when_allOfWithoutCombine_then_noCombine`."""
    no_combine = AggregateOperation.with_create(int).and_accumulate(lambda acc, x: acc + x)
    composite = all_of(no_combine.and_export_finish(identity), summing())
    assert composite.combine_fn is None


def test_when_linear_trend() -> None:
    """`AggregateOperationsTest.when_linearTrend`."""
    op = linear_trend(entry_key, entry_value)
    assert op.deduct_fn is not None
    a1 = accumulate(op, (1, 3), (2, 5))
    assert op.finish_fn(a1) == 2.0
    a2 = accumulate(op, (5, 11), (6, 13))
    assert op.finish_fn(a2) == 2.0
    a1 = op.combine_fn(a1, a2)
    assert op.finish_fn(a1) == 2.0
    a1 = op.deduct_fn(a1, a2)
    assert op.finish_fn(a1) == 2.0

    acc = op.create_fn()
    assert math.isnan(op.finish_fn(acc)), "NaN expected if nothing accumulated"
    acc = op.accumulate_fn()(acc, (2, 1))
    assert math.isnan(op.finish_fn(acc)), "NaN expected if just single point accumulated"
    acc = op.accumulate_fn()(acc, (2, 1))
    assert math.isnan(op.finish_fn(acc)), "NaN expected if all data points are equal"
    acc = op.accumulate_fn()(acc, (2, 2))
    assert math.isnan(op.finish_fn(acc)), "NaN expected if all data points have same x value"


def test_when_to_list() -> None:
    """`AggregateOperationsTest.when_toList`."""
    validate_op_without_deduct(to_list(), identity, 1, 2, [1], [1, 2], [1, 2])


def test_when_to_set() -> None:
    """`AggregateOperationsTest.when_toSet`."""
    validate_op_without_deduct(to_set(), identity, 1, 2, {1}, {1, 2}, {1, 2})


def test_when_pick_any() -> None:
    """`AggregateOperationsTest.when_pickAny`."""
    validate_op_without_deduct(pick_any(), identity, 1, 2, 1, 1, 1)


def test_when_reducing() -> None:
    """`AggregateOperationsTest.when_reducing`."""
    op = reducing(0, int, lambda x, y: x + y, lambda x, y: x - y)
    validate_op(op, identity, 1, 2, 1, 3, 3)


def test_when_to_map() -> None:
    """`AggregateOperationsTest.when_toMap`."""
    op = to_map(entry_key, entry_value)
    validate_op_without_deduct(op, identity, (1, 1), (2, 2), {1: 1}, {1: 1, 2: 2}, {1: 1, 2: 2})


def test_when_to_map_duplicate_accumulate_then_fail() -> None:
    """`AggregateOperationsTest.when_toMapDuplicateAccumulate_then_fail` (Jet: an
    IllegalStateException)."""
    op = to_map(entry_key, entry_value)
    acc = accumulate(op, (1, 1))
    with pytest.raises(ValueError, match="duplicate key 1"):
        op.accumulate_fn()(acc, (1, 2))


def test_when_to_map_duplicate_combine_then_fail() -> None:
    """`AggregateOperationsTest.when_toMapDuplicateCombine_then_fail`."""
    op = to_map(entry_key, entry_value)
    with pytest.raises(ValueError, match="duplicate key 1"):
        op.combine_fn(accumulate(op, (1, 1)), accumulate(op, (1, 2)))


def test_when_to_map_with_merge_then_merged() -> None:
    """`AggregateOperationsTest.when_toMapWithMerge_then_merged`."""
    op = to_map(entry_key, entry_value, lambda a, b: a + b)
    validate_op_without_deduct(op, identity, (1, 1), (1, 2), {1: 1}, {1: 3}, {1: 3})


def test_when_mapping_without_deduct() -> None:
    """`AggregateOperationsTest.when_mappingWithoutDeduct`."""
    op = mapping(entry_value, max_by())
    validate_op_without_deduct(op, identity, ("a", 1), ("b", 2), 1, 2, 2)


def test_when_mapping_with_deduct() -> None:
    """`AggregateOperationsTest.when_mappingWithDeduct`."""
    validate_op(mapping(entry_value, summing()), identity, ("a", 1), ("b", 2), 1, 3, 3)


def test_when_mapping_to_none_then_do_not_aggregate() -> None:
    """`AggregateOperationsTest.when_mappingToNull_then_doNotAggregate`."""
    validate_op(mapping(entry_value, summing()), identity, ("a", None), ("b", 2), 0, 2, 2)
