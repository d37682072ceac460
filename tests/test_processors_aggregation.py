"""Batch aggregation processors: one-stage vs two-stage, keyed and not, snapshots and rescaling."""

from __future__ import annotations

from collections import Counter

import pytest
from test_processors_helpers import any_order, output_of, verify

from jetspark.processors import (
    accumulate_by_key_p,
    accumulate_p,
    aggregate_by_key_p,
    aggregate_p,
    combine_by_key_p,
    combine_p,
    entry_key,
    whole_item,
)
from jetspark.processors.aggregate import AggregateOperation, counting, summing, to_list

WORDS = ["the", "cat", "and", "the", "dog", "and", "the", "bird"]
COUNTS = sorted(Counter(WORDS).items())


def test_aggregate_p_emits_one_result_and_one_for_empty_input():
    verify(aggregate_p(summing())).input([1, 2, 3]).expect_output([6])
    verify(aggregate_p(counting())).input([]).expect_output([0])


def test_aggregate_p_with_none_result_emits_nothing():
    op = AggregateOperation.with_create(int).and_accumulate(max).and_finish(lambda acc: None)
    verify(aggregate_p(op)).input([1]).expect_output([])


def test_two_stage_accumulate_p_then_combine_p_equals_aggregate_p():
    items = [3, 1, 4, 1, 5, 9, 2, 6]
    partials = output_of(accumulate_p(summing()), items[:3]) + output_of(
        accumulate_p(summing()), items[3:]
    )
    assert partials == [8, 23]
    verify(combine_p(summing())).input(partials).expect_output([31])
    verify(aggregate_p(summing())).input(items).expect_output([31])


def test_aggregate_p_accumulates_per_inbound_ordinal():
    op = (
        AggregateOperation.with_create(lambda: (0, 0))
        .and_accumulate([lambda a, x: (a[0] + x, a[1]), lambda a, x: (a[0], a[1] + x)])
        .and_combine(lambda a, b: (a[0] + b[0], a[1] + b[1]))
        .and_export_finish(lambda a: a)
    )
    verify(aggregate_p(op)).inputs([[1, 2], [10, 20, 30]]).expect_output([(3, 60)])


def test_aggregate_p_rescaled_restore_combines_saved_accumulators():
    verify(aggregate_p(counting())).input(list(range(10))).restore_rescaled(
        3, 1, whole_item
    ).expect_output([10])


def test_aggregate_by_key_p_word_count():
    any_order(aggregate_by_key_p([whole_item], counting())).input(WORDS).expect_output(COUNTS)


def test_aggregate_by_key_p_map_to_output_and_none_results():
    supplier = aggregate_by_key_p(
        whole_item, counting(), lambda key, count: None if count == 1 else f"{key}={count}"
    )
    any_order(supplier).input(WORDS).expect_output(["the=3", "and=2"])


def test_aggregate_by_key_p_rescaled_restore_to_more_and_fewer_processors():
    any_order(aggregate_by_key_p(whole_item, counting())).input(WORDS).restore_rescaled(
        2, 3, whole_item
    ).restore_rescaled(3, 1, whole_item).expect_output(COUNTS)


def test_keyed_aggregation_with_a_key_function_per_ordinal():
    # ordinal 0: (name, amount) pairs; ordinal 1: plain names that count as 100
    op = (
        AggregateOperation.with_create(int)
        .and_accumulate([lambda a, pair: a + pair[1], lambda a, name: a + 100])
        .and_combine(lambda a, b: a + b)
        .and_finish(lambda a: a)
    )
    supplier = aggregate_by_key_p([entry_key, whole_item], op)
    any_order(supplier).inputs([[("x", 1), ("y", 2), ("x", 3)], ["y"]]).expect_output(
        [("x", 4), ("y", 102)]
    )


def test_mismatched_per_ordinal_function_counts_are_rejected():
    op = AggregateOperation.with_create(int).and_accumulate([max, max]).and_finish(int)
    with pytest.raises(ValueError, match="one per inbound ordinal"):
        aggregate_by_key_p([whole_item, whole_item, whole_item], op)


def test_two_stage_by_key_equals_single_stage():
    first, second = WORDS[:4], WORDS[4:]
    partial = output_of(accumulate_by_key_p([whole_item], counting()), first) + output_of(
        accumulate_by_key_p([whole_item], counting()), second
    )
    assert ("the", 2) in partial and ("the", 1) in partial
    any_order(combine_by_key_p(counting())).input(partial).expect_output(COUNTS)
    any_order(combine_by_key_p(counting())).input(partial).restore_rescaled(
        2, 3, entry_key
    ).expect_output(COUNTS)


def test_accumulate_by_key_p_emits_accumulators_not_finished_results():
    op = (
        AggregateOperation.with_create(list)
        .and_accumulate(lambda a, x: [*a, x])
        .and_combine(lambda a, b: a + b)
        .and_finish(len)
    )
    any_order(accumulate_by_key_p(lambda w: w[0], op)).input(["ab", "ac", "b"]).expect_output(
        [("a", ["ab", "ac"]), ("b", ["b"])]
    )
    any_order(combine_by_key_p(op, lambda k, n: f"{k}:{n}")).input(
        [("a", ["ab"]), ("a", ["ac"]), ("b", ["b"])]
    ).expect_output(["a:2", "b:1"])


def test_keyed_state_with_mutable_accumulators_survives_snapshots():
    any_order(aggregate_by_key_p(len, to_list())).input(WORDS).expect_output(
        [(3, ["the", "cat", "and", "the", "dog", "and", "the"]), (4, ["bird"])]
    )
