"""Port of Jet 0.7 `com.hazelcast.jet.aggregate.AggregateOperationTest`.

Deliberate differences: Jet's tags (`tag0()`, `tag1()`) are inbound ordinals in jetspark
(`and_accumulate([fn0, fn1])`, `accumulate_fn(ordinal)`), so Jet's duplicate-tag and
non-contiguous-tag tests have nothing to test (a list has neither) and are not ported; nor is
`when_andThen_then_exportAndFinishChanged` (jetspark has no `andThen` or co-aggregation
builder). Accumulators are values: a combining accumulate function returns the combined
accumulator instead of mutating a `LongAccumulator`. Asking for an ordinal beyond the given
functions raises ValueError (Jet: IllegalArgumentException).
"""

from __future__ import annotations

import pytest

from jetspark.processors import whole_item
from jetspark.processors.aggregate import AggregateOperation


def test_when_build_then_all_parts_there() -> None:
    """`AggregateOperationTest.when_build_then_allPartsThere`."""

    def acc_fn0(acc: int, item: object) -> int:
        return acc + 1

    def acc_fn1(acc: int, item: object) -> int:
        return acc + 10

    def combine_fn(acc: int, other: int) -> int:
        return acc + other

    def deduct_fn(acc: int, other: int) -> int:
        return acc - other

    def finish_fn(acc: int) -> int:
        return acc

    aggr_op = (
        AggregateOperation.with_create(int)
        .and_accumulate([acc_fn0, acc_fn1])
        .and_combine(combine_fn)
        .and_deduct(deduct_fn)
        .and_export_finish(finish_fn)
    )
    assert aggr_op.create_fn is int
    assert aggr_op.accumulate_fn(0) is acc_fn0
    assert aggr_op.accumulate_fn(1) is acc_fn1
    assert aggr_op.combine_fn is combine_fn
    assert aggr_op.deduct_fn is deduct_fn
    assert aggr_op.finish_fn is finish_fn


def test_when_ask_for_nonexistent_tag_then_exception() -> None:
    """`AggregateOperationTest.when_askForNonexistentTag_then_exception`."""
    aggr_op = (
        AggregateOperation.with_create(int)
        .and_accumulate([lambda acc, item: acc + 1, lambda acc, item: acc + 10])
        .and_export_finish(whole_item)
    )
    with pytest.raises(ValueError, match="ordinal 2"):
        aggr_op.accumulate_fn(2)


def test_when_with_identity_finish() -> None:
    """`AggregateOperationTest.when_withIdentityFinish`."""
    aggr_op = (
        AggregateOperation.with_create(list)
        .and_accumulate(lambda acc, item: acc)
        .and_export_finish(len)
    )
    new_aggr_op = aggr_op.with_identity_finish()
    acc = new_aggr_op.create_fn()
    assert new_aggr_op.finish_fn(acc) is acc


def test_when_with_combining_accumulate_fn_then_accumulate_fn_combines() -> None:
    """`AggregateOperationTest.when_withCombiningAccumulateFn_then_accumulateFnCombines`."""
    aggr_op = (
        AggregateOperation.with_create(int)
        .and_accumulate([lambda acc, item: acc + 1, lambda acc, item: acc + 10])
        .and_combine(lambda acc, other: acc + other)
        .and_export_finish(whole_item)
    )
    combining = aggr_op.with_combining_accumulate_fn(whole_item)
    acc_fn = combining.accumulate_fn(0)
    partial_acc1, partial_acc2 = 2, 3
    combined_acc = combining.create_fn()
    combined_acc = acc_fn(combined_acc, partial_acc1)
    combined_acc = acc_fn(combined_acc, partial_acc2)
    assert combined_acc == 5
