"""AggregateOperation: the builder, value semantics, and every built-in operation."""

from __future__ import annotations

import math
import pickle
from functools import reduce

import pytest

from jetspark.processors.aggregate import (
    AggregateOperation,
    aggregate_operation2,
    aggregate_operation3,
    all_of,
    averaging,
    co_aggregate,
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


def run(op: AggregateOperation, items, ordinal: int = 0):
    """Accumulates `items` into a fresh accumulator of `op`."""
    return reduce(op.accumulate_fn(ordinal), items, op.create_fn())


def two_halves(op: AggregateOperation, items):
    """Accumulates two halves separately and combines them, as two-stage aggregation does."""
    half = len(items) // 2
    return op.combine_fn(run(op, items[:half]), run(op, items[half:]))


@pytest.mark.parametrize(
    ("op", "items", "expected"),
    [
        (counting(), ["a", "b", "c"], 3),
        (summing(), [1, 2, 3, 4], 10),
        (summing(len), ["ab", "cde"], 5),
        (averaging(), [1, 2, 3, 6], 3.0),
        (min_by(), [5, 3, 9, 3], 3),
        (max_by(len), ["a", "ccc", "bb", "ddd"], "ccc"),
        (to_list(), [3, 1, 2], [3, 1, 2]),
        (to_set(), [3, 1, 3], {1, 3}),
        (linear_trend(lambda p: p[0], lambda p: p[1]), [(0, 1), (1, 3), (2, 5)], 2.0),
    ],
)
def test_operation_results_single_and_combined(op, items, expected):
    assert op.finish_fn(run(op, items)) == expected
    assert op.finish_fn(two_halves(op, items)) == expected
    assert op.export_fn(run(op, items)) == expected


def test_ints_work_as_accumulators_because_functions_return_the_new_value():
    op = counting()
    acc = op.create_fn()
    acc = op.accumulate_fn()(acc, "x")
    acc = op.accumulate_fn()(acc, "y")
    assert acc == 2
    assert op.deduct_fn(op.combine_fn(acc, 5), 5) == 2


@pytest.mark.parametrize(
    ("op", "items"),
    [
        (counting(), [1, 2, 4, 7]),
        (summing(), [1, 2, 4, 7]),
        (averaging(), [1, 2, 4, 7]),
        (linear_trend(lambda p: p[0], lambda p: p[1]), [(1, 2), (2, 5), (4, 4), (7, 1)]),
    ],
)
def test_deduct_undoes_combine(op, items):
    whole, part = run(op, items), run(op, items[:2])
    rest = op.deduct_fn(whole, part)
    assert op.finish_fn(rest) == op.finish_fn(run(op, items[2:]))


def test_empty_results():
    assert math.isnan(averaging().finish_fn(averaging().create_fn()))
    assert min_by().finish_fn(min_by().create_fn()) is None
    trend = linear_trend(lambda p: p[0], lambda p: p[1])
    assert math.isnan(trend.finish_fn(run(trend, [(1, 1), (1, 2)])))


def test_min_and_max_keep_the_first_of_equal_items_and_have_no_deduct():
    assert min_by(lambda s: len(s)).finish_fn(run(min_by(len), ["ab", "cd", "e"])) == "e"
    assert max_by(len).finish_fn(run(max_by(len), ["ab", "cd", "e"])) == "ab"
    assert min_by().deduct_fn is None and to_list().deduct_fn is None


def test_export_leaves_a_mutable_accumulator_usable_finish_may_hand_it_out():
    op = to_list()
    acc = run(op, [1, 2])
    exported = op.export_fn(acc)
    exported.append(99)
    assert acc == [1, 2]
    assert op.finish_fn(acc) is acc


def test_combine_never_mutates_the_second_accumulator():
    op = to_list()
    left, right = run(op, [1]), run(op, [2])
    assert op.combine_fn(left, right) == [1, 2]
    assert right == [2]


def test_builder_with_custom_primitives_and_per_ordinal_accumulate():
    op = (
        AggregateOperation.with_create(lambda: (0, 0))
        .and_accumulate([lambda a, x: (a[0] + x, a[1]), lambda a, x: (a[0], a[1] + x)])
        .and_combine(lambda a, b: (a[0] + b[0], a[1] + b[1]))
        .and_deduct(lambda a, b: (a[0] - b[0], a[1] - b[1]))
        .and_export_finish(lambda a: a[0] - a[1])
    )
    assert op.arity == 2
    acc = run(op, [10, 5], ordinal=0)
    acc = reduce(op.accumulate_fn(1), [3], acc)
    assert op.finish_fn(acc) == 12
    with pytest.raises(ValueError, match="inbound ordinal 2"):
        op.accumulate_fn(2)


def test_builder_export_and_finish_differ_and_finish_alone_sets_both():
    op = (
        AggregateOperation.with_create(list)
        .and_accumulate(lambda a, x: [*a, x])
        .and_export(len)
        .and_finish(sum)
    )
    acc = run(op, [2, 3])
    assert (op.export_fn(acc), op.finish_fn(acc)) == (2, 5)
    only_finish = AggregateOperation.with_create(int).and_accumulate(max).and_finish(str)
    assert only_finish.export_fn(7) == "7"
    assert only_finish.combine_fn is None and only_finish.deduct_fn is None


def test_builder_errors():
    with pytest.raises(ValueError, match="and_accumulate"):
        AggregateOperation.with_create(int).and_export_finish(str)
    with pytest.raises(TypeError, match="callable"):
        AggregateOperation.with_create(int).and_accumulate(42)
    with pytest.raises(ValueError, match="combine"):
        AggregateOperation.with_create(int).and_accumulate(max).and_finish(str).require_combine(
            "this test"
        )


def test_all_of_runs_several_operations_at_once():
    op = all_of(counting(), summing(), to_list(), max_by())
    items = [4, 1, 7]
    assert op.finish_fn(run(op, items)) == (3, 12, [4, 1, 7], 7)
    assert op.finish_fn(two_halves(op, items)) == (3, 12, [4, 1, 7], 7)
    assert op.deduct_fn is None
    with_deduct = all_of(counting(), summing())
    assert with_deduct.finish_fn(
        with_deduct.deduct_fn(run(with_deduct, items), run(with_deduct, [4]))
    ) == (2, 8)


def test_all_of_with_per_ordinal_operations():
    left = (
        AggregateOperation.with_create(int)
        .and_accumulate([lambda a, x: a + x, lambda a, x: a])
        .and_finish(int)
    )
    op = all_of(left, counting())
    acc = run(op, [5, 6], ordinal=0)
    acc = reduce(op.accumulate_fn(1), [100], acc)
    assert op.finish_fn(acc) == (11, 3)
    three = AggregateOperation.with_create(int).and_accumulate([max, max, max]).and_finish(int)
    with pytest.raises(ValueError, match="one per inbound ordinal"):
        all_of(left, three)


def test_operations_pickle():
    for op in (
        counting(),
        summing(abs),
        averaging(),
        min_by(),
        to_set(),
        all_of(counting(), to_list()),
    ):
        clone = pickle.loads(pickle.dumps(op))
        assert clone.finish_fn(run(clone, [1, 2])) == op.finish_fn(run(op, [1, 2]))


def test_per_ordinal_accumulate_functions_in_jets_style():
    op = (
        AggregateOperation.with_create(lambda: (0, 0, 0))
        .and_accumulate0(lambda a, x: (a[0] + x, a[1], a[2]))
        .and_accumulate1(lambda a, x: (a[0], a[1] + x, a[2]))
        .and_accumulate2(lambda a, x: (a[0], a[1], a[2] + x))
        .and_combine(lambda a, b: tuple(x + y for x, y in zip(a, b, strict=True)))
        .and_export_finish(list)
    )
    assert op.arity == 3
    acc = reduce(op.accumulate_fn(2), [5], reduce(op.accumulate_fn(0), [1, 2], op.create_fn()))
    assert op.finish_fn(acc) == [3, 0, 5]
    only_first = AggregateOperation.with_create(int).and_accumulate0(_count).and_finish(str)
    with pytest.raises(ValueError, match="inbound ordinal 1"):
        only_first.accumulate_fn(1)
    with pytest.raises(ValueError, match="in order"):
        AggregateOperation.with_create(int).and_accumulate1(_count)


def _count(acc, item):
    return acc + 1


def test_to_map_pick_any_reducing_and_mapping():
    by_length = to_map(len, str.upper, lambda earlier, later: earlier + later)
    assert by_length.finish_fn(run(by_length, ["a", "bb", "c"])) == {1: "AC", 2: "BB"}
    with pytest.raises(ValueError, match="duplicate key 1"):
        run(to_map(len), ["a", "bb", "c"])
    assert pick_any().finish_fn(two_halves(pick_any(), [None, 4, 5, 6])) == 4
    product = reducing(1, int, lambda a, b: a * b)
    assert product.finish_fn(two_halves(product, ["2", "3", "4"])) == 24
    lengths = mapping(len, summing())
    assert lengths.finish_fn(run(lengths, ["ab", "cde"])) == 5


def test_co_aggregation_gives_one_result_per_input():
    op = aggregate_operation2(counting(), to_list())
    acc = reduce(op.accumulate_fn(0), ["a", "b"], op.create_fn())
    acc = reduce(op.accumulate_fn(1), ["x"], acc)
    assert op.finish_fn(op.combine_fn(acc, acc)) == (4, ["x", "x"])
    ratio = aggregate_operation2(counting(), counting(), lambda a, b: b / a)
    assert ratio.finish_fn(reduce(ratio.accumulate_fn(1), [1], run(ratio, [1, 2]))) == 0.5
    three = aggregate_operation3(counting(), summing(), max_by())
    acc = reduce(
        three.accumulate_fn(2), [7, 9], reduce(three.accumulate_fn(1), [2, 3], three.create_fn())
    )
    assert three.finish_fn(acc) == (0, 5, 9)
    assert co_aggregate([counting()], lambda results: results[0] * 10).finish_fn((3,)) == 30
    with pytest.raises(ValueError, match="one input each"):
        co_aggregate([op])
