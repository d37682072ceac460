"""Port of Jet 0.7 `com.hazelcast.jet.core.ProcessorsTest`, for the processors jetspark has
(`filterUsingContextP` is not in jetspark: `filterUsingContext` is not ported).

Deliberate differences: Jet's context objects are mutable `int[1]` arrays; here a one-element
list. Jet's `Util::entry` results are `(key, value)` tuples (jetspark's `entry`). The
accumulator of `aggregateToListAndString` is a list that `accumulate`/`combine` return.
"""

from __future__ import annotations

from typing import Any

from jetspark.core.test_support import TestSupport
from jetspark.core.traversers import traverse_items, traverse_iterable
from jetspark.processors import (
    ContextFactory,
    accumulate_by_key_p,
    accumulate_p,
    aggregate_by_key_p,
    aggregate_p,
    combine_by_key_p,
    combine_p,
    entry,
    filter_p,
    flat_map_p,
    flat_map_using_context_p,
    map_p,
    map_using_context_p,
    noop_p,
)
from jetspark.processors.aggregate import AggregateOperation


def aggregate_to_list_and_string() -> AggregateOperation:
    """Jet's `aggregateToListAndString`: a list accumulator, finished as its string."""
    return (
        AggregateOperation.with_create(list)
        .and_accumulate(lambda acc, item: [*acc, item])
        .and_combine(lambda acc, other: acc + other)
        .and_export_finish(str)
    )


def counter_context(expected_at_destroy: int) -> ContextFactory:
    """A `[0]` context per processor whose destroy checks its final value."""

    def destroy(context: list[int]) -> None:
        assert context[0] == expected_at_destroy

    return ContextFactory(lambda processor_context: [0], destroy)


def test_map() -> None:
    """`ProcessorsTest.map`."""
    TestSupport.verify_processor(map_p(str)).input([1]).expect_output(["1"])


def test_map_using_context() -> None:
    """`ProcessorsTest.mapUsingContext`."""

    def add(context: list[int], item: int) -> int:
        context[0] += item
        return context[0]

    TestSupport.verify_processor(
        map_using_context_p(counter_context(6), add)
    ).disable_snapshots().input([1, 2, 3]).expect_output([1, 3, 6])


def test_filtering_with_map() -> None:
    """`ProcessorsTest.filteringWithMap`."""
    TestSupport.verify_processor(map_p(lambda i: i if i > 1 else None)).input([1, 2]).expect_output(
        [2]
    )


def test_filtering_with_map_using_context() -> None:
    """`ProcessorsTest.filteringWithMapUsingContext`."""

    def keep_after_even(context: list[int], item: int) -> Any:
        try:
            return item if context[0] % 2 == 0 else None
        finally:
            context[0] = item

    TestSupport.verify_processor(
        map_using_context_p(counter_context(3), keep_after_even)
    ).disable_snapshots().input([1, 2, 3]).expect_output([1, 3])


def test_filter() -> None:
    """`ProcessorsTest.filter`."""
    TestSupport.verify_processor(filter_p(lambda o: o == 1)).input([1, 2, 1, 2]).expect_output(
        [1, 1]
    )


def test_flat_map() -> None:
    """`ProcessorsTest.flatMap`."""
    TestSupport.verify_processor(flat_map_p(lambda o: traverse_iterable([f"{o}a", f"{o}b"]))).input(
        [1]
    ).expect_output(["1a", "1b"])


def test_flat_map_using_context() -> None:
    """`ProcessorsTest.flatMapUsingContext`: one shared context, reset by destroy."""
    shared = [0]

    def reset(context: list[int]) -> None:
        context[0] = 0

    def item_and_sum(context: list[int], item: int) -> Any:
        context[0] += item
        return traverse_items(item, context[0])

    TestSupport.verify_processor(
        flat_map_using_context_p(
            ContextFactory(lambda processor_context: shared, reset), item_and_sum
        )
    ).disable_snapshots().input([1, 2, 3]).expect_output([1, 1, 2, 3, 3, 6])
    assert shared[0] == 0


def test_aggregate_by_key() -> None:
    """`ProcessorsTest.aggregateByKey`."""
    TestSupport.verify_processor(
        aggregate_by_key_p([str], aggregate_to_list_and_string(), entry)
    ).disable_snapshots().output_checker(TestSupport.SAME_ITEMS_ANY_ORDER).input(
        [1, 1, 2, 2]
    ).expect_output([("1", "[1, 1]"), ("2", "[2, 2]")])


def test_accumulate_by_key() -> None:
    """`ProcessorsTest.accumulateByKey`."""
    TestSupport.verify_processor(
        accumulate_by_key_p([str], aggregate_to_list_and_string())
    ).disable_snapshots().output_checker(TestSupport.SAME_ITEMS_ANY_ORDER).input(
        [1, 1, 2, 2]
    ).expect_output([("1", [1, 1]), ("2", [2, 2])])


def test_combine_by_key() -> None:
    """`ProcessorsTest.combineByKey`."""
    TestSupport.verify_processor(
        combine_by_key_p(aggregate_to_list_and_string(), entry)
    ).disable_snapshots().output_checker(TestSupport.SAME_ITEMS_ANY_ORDER).input(
        [("1", [1, 2]), ("1", [3, 4]), ("2", [5, 6]), ("2", [7, 8])]
    ).expect_output([("1", "[1, 2, 3, 4]"), ("2", "[5, 6, 7, 8]")])


def test_aggregate() -> None:
    """`ProcessorsTest.aggregate`."""
    TestSupport.verify_processor(
        aggregate_p(aggregate_to_list_and_string())
    ).disable_snapshots().input([1, 2]).expect_output(["[1, 2]"])


def test_accumulate() -> None:
    """`ProcessorsTest.accumulate`."""
    TestSupport.verify_processor(
        accumulate_p(aggregate_to_list_and_string())
    ).disable_snapshots().input([1, 2]).expect_output([[1, 2]])


def test_combine() -> None:
    """`ProcessorsTest.combine`."""
    TestSupport.verify_processor(
        combine_p(aggregate_to_list_and_string())
    ).disable_snapshots().input([[1], [2]]).expect_output(["[1, 2]"])


def test_noop() -> None:
    """`ProcessorsTest.noop`."""
    TestSupport.verify_processor(noop_p()).input(["a"] * 100).expect_output([])
