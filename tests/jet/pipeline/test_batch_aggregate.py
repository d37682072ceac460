"""Port of Jet 0.7.1 `com.hazelcast.jet.pipeline.BatchAggregateTest`.

Aggregation of a whole batch (one result) and grouped by key (one `(key, result)` per key),
over one, two or three inputs, with separate operations per input or one operation of several
inputs, with and without an output function. The inputs are lists (Jet: IMap values). All run
on LocalEngine with two members; the tests taking `any_engine` run on SparkEngine too.

`aggregate_builder()` without an operation (Jet's `AggregateBuilder1`) is ported from
`groupAggregateBuilder_withComplexAggrOp_withOutputFn` and from the example in
`BatchStage.aggregateBuilder()`'s documentation.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from jetspark.core.pipeline import (
    ItemsByTag,
    Pipeline,
    Sinks,
    Sources,
    co_aggregate_operation_builder,
)
from jetspark.processors.aggregate import (
    AggregateOperation,
    aggregate_operation2,
    aggregate_operation3,
    counting,
    summing,
    to_list,
    to_set,
)

from .support import ITEM_COUNT, assert_same_bag, execute, sequence

pytestmark = pytest.mark.timeout(180)

INPUT = sequence(ITEM_COUNT)
A = 37
"""The factor Jet's output functions mix the key and the results with."""


def draw(engine: Any, pipeline: Pipeline, name: str, map_fn: Callable[[int], Any] | None = None):
    """The batch stage of the list `name` holding INPUT, mapped by `map_fn` if given."""
    engine.get_list(name).extend(INPUT)
    stage = pipeline.draw_from(Sources.list(name))
    return stage if map_fn is None else stage.map(map_fn)


def single_result(engine: Any, pipeline: Pipeline) -> Any:
    """Runs the pipeline and returns the one item its sink received."""
    execute(engine, pipeline)
    output = engine.get_list("sink")
    assert len(output) == 1, output
    return output[0]


def suffixed(suffix: str) -> Callable[[int], str]:
    """`i -> f"{i}{suffix}"`, Jet's `mapFn`."""
    return lambda i: f"{i}{suffix}"


def test_aggregate(any_engine: Any) -> None:
    """`BatchAggregateTest.aggregate`."""
    p = Pipeline.create()
    draw(any_engine, p, "src").aggregate(to_set()).drain_to(Sinks.list("sink"))
    assert single_result(any_engine, p) == set(INPUT)


AGGREGATE2_FORMS = {
    "with_separate_aggr_ops": lambda s0, s1: s0.aggregate2(to_list(), s1, to_list()),
    "with_aggr_op2": lambda s0, s1: s0.aggregate2(s1, aggregate_operation2(to_list(), to_list())),
}


@pytest.mark.parametrize("form", AGGREGATE2_FORMS)
def test_aggregate2(engine: Any, form: str) -> None:
    """`BatchAggregateTest.aggregate2_withSeparateAggrOps`, `aggregate2_withAggrOp2`: one
    `(list0, list1)` result."""
    p = Pipeline.create()
    stage1 = draw(engine, p, "src1", suffixed("-x"))
    AGGREGATE2_FORMS[form](draw(engine, p, "src"), stage1).drain_to(Sinks.list("sink"))
    list0, list1 = single_result(engine, p)
    assert_same_bag(list0, INPUT)
    assert_same_bag(list1, map(suffixed("-x"), INPUT))


def test_aggregate2_with_aggr_op2_on_spark(any_engine: Any) -> None:
    """`BatchAggregateTest.aggregate2_withAggrOp2`, on every engine."""
    test_aggregate2(any_engine, "with_aggr_op2")


def total_size(*results: list[Any]) -> int:
    return sum(len(result) for result in results)


AGGREGATE2_OUTPUT_FORMS = {
    "with_separate_aggr_ops_with_output_fn": lambda s0, s1: s0.aggregate2(
        to_list(), s1, to_list(), total_size
    ),
    "with_aggr_op2_with_finish_fn": lambda s0, s1: s0.aggregate2(
        s1, aggregate_operation2(to_list(), to_list(), total_size)
    ),
}


@pytest.mark.parametrize("form", AGGREGATE2_OUTPUT_FORMS)
def test_aggregate2_with_output_fn(engine: Any, form: str) -> None:
    """`BatchAggregateTest.aggregate2_withSeparateAggrOps_withOutputFn`,
    `aggregate2_withAggrOp2_with_finishFn`."""
    p = Pipeline.create()
    stage0, stage1 = draw(engine, p, "src"), draw(engine, p, "src1")
    AGGREGATE2_OUTPUT_FORMS[form](stage0, stage1).drain_to(Sinks.list("sink"))
    assert single_result(engine, p) == 2 * ITEM_COUNT


AGGREGATE3_FORMS = {
    "with_separate_aggr_ops": lambda s0, s1, s2: s0.aggregate3(
        to_list(), s1, to_list(), s2, to_list()
    ),
    "with_aggr_op3": lambda s0, s1, s2: s0.aggregate3(
        s1, s2, aggregate_operation3(to_list(), to_list(), to_list())
    ),
}


@pytest.mark.parametrize("form", AGGREGATE3_FORMS)
def test_aggregate3(engine: Any, form: str) -> None:
    """`BatchAggregateTest.aggregate3_withSeparateAggrOps`, `aggregate3_withAggrOp3`."""
    p = Pipeline.create()
    stage1 = draw(engine, p, "src1", suffixed("-a"))
    stage2 = draw(engine, p, "src2", suffixed("-b"))
    AGGREGATE3_FORMS[form](draw(engine, p, "src"), stage1, stage2).drain_to(Sinks.list("sink"))
    list0, list1, list2 = single_result(engine, p)
    assert_same_bag(list0, INPUT)
    assert_same_bag(list1, map(suffixed("-a"), INPUT))
    assert_same_bag(list2, map(suffixed("-b"), INPUT))


AGGREGATE3_OUTPUT_FORMS = {
    "with_separate_aggr_ops_with_output_fn": lambda s0, s1, s2: s0.aggregate3(
        to_list(), s1, to_list(), s2, to_list(), total_size
    ),
    "with_aggr_op3_with_finish_fn": lambda s0, s1, s2: s0.aggregate3(
        s1, s2, aggregate_operation3(to_list(), to_list(), to_list(), total_size)
    ),
}


@pytest.mark.parametrize("form", AGGREGATE3_OUTPUT_FORMS)
def test_aggregate3_with_output_fn(engine: Any, form: str) -> None:
    """`BatchAggregateTest.aggregate3_withSeparateAggrOps_withOutputFn`,
    `aggregate3_withAggrOp3_with_finishFn`."""
    p = Pipeline.create()
    stages = draw(engine, p, "src"), draw(engine, p, "src1"), draw(engine, p, "src2")
    AGGREGATE3_OUTPUT_FORMS[form](*stages).drain_to(Sinks.list("sink"))
    assert single_result(engine, p) == 3 * ITEM_COUNT


def test_aggregate_builder_with_separate_aggr_ops(any_engine: Any) -> None:
    """`BatchAggregateTest.aggregateBuilder_withSeparateAggrOps`: the results by tag."""
    p = Pipeline.create()
    builder = draw(any_engine, p, "src").aggregate_builder(to_list())
    tag0 = builder.tag0()
    tag1 = builder.add(draw(any_engine, p, "src1", suffixed("-a")), to_list())
    tag2 = builder.add(draw(any_engine, p, "src2", suffixed("-b")), to_list())
    builder.build().drain_to(Sinks.list("sink"))
    by_tag = single_result(any_engine, p)
    assert isinstance(by_tag, ItemsByTag)
    assert_same_bag(by_tag.get(tag0), INPUT)
    assert_same_bag(by_tag.get(tag1), map(suffixed("-a"), INPUT))
    assert_same_bag(by_tag.get(tag2), map(suffixed("-b"), INPUT))


def test_aggregate_builder_with_separate_aggr_ops_with_output_fn(engine: Any) -> None:
    """`BatchAggregateTest.aggregateBuilder_withSeparateAggrOps_withOutputFn`."""
    p = Pipeline.create()
    builder = draw(engine, p, "src").aggregate_builder(counting())
    tag0 = builder.tag0()
    tag1 = builder.add(draw(engine, p, "src1"), counting())
    tag2 = builder.add(draw(engine, p, "src2"), counting())
    builder.build(lambda by_tag: by_tag[tag0] + by_tag[tag1] + by_tag[tag2]).drain_to(
        Sinks.list("sink")
    )
    assert single_result(engine, p) == 3 * ITEM_COUNT


def key_fn(i: int) -> int:
    """Jet's `keyFn` of the co-grouping tests."""
    return i // 5


def sums_by_key(items: list[int]) -> dict[int, int]:
    """The plain-Python result of `grouping_key(key_fn).aggregate(summing())`."""
    sums: dict[int, int] = defaultdict(int)
    for i in items:
        sums[key_fn(i)] += i
    return sums


def test_group_aggregate(any_engine: Any) -> None:
    """`BatchAggregateTest.groupAggregate`."""
    p = Pipeline.create()
    draw(any_engine, p, "src").grouping_key(lambda i: i % 5).aggregate(summing()).drain_to(
        Sinks.list("sink")
    )
    execute(any_engine, p)
    expected = {k: sum(i for i in INPUT if i % 5 == k) for k in range(5)}
    assert_same_bag(any_engine.get_list("sink"), expected.items())


def test_group_aggregate_with_output_fn(engine: Any) -> None:
    """`BatchAggregateTest.groupAggregate_withOutputFn`."""
    p = Pipeline.create()
    keyed = draw(engine, p, "src").grouping_key(lambda i: i % 5)
    keyed.aggregate(summing(), lambda key, total: (key, 3 * total)).drain_to(Sinks.list("sink"))
    execute(engine, p)
    expected = {k: 3 * sum(i for i in INPUT if i % 5 == k) for k in range(5)}
    assert_same_bag(engine.get_list("sink"), expected.items())


def co_grouped(engine: Any, pipeline: Pipeline, inputs: int) -> list[Any]:
    """Stage i of `inputs` stages, grouped by `key_fn`, holds INPUT times 10**i (Jet's
    `mapFn1`, `mapFn2`)."""
    stages = [draw(engine, pipeline, "src")]
    stages += [draw(engine, pipeline, f"src{n}", times(10**n)) for n in range(1, inputs)]
    return [stage.grouping_key(key_fn) for stage in stages]


def times(factor: int) -> Callable[[int], int]:
    return lambda i: factor * i


def expected_sums(inputs: int) -> dict[int, tuple[int, ...]]:
    """Key -> the sums of each input's items of that key, 0 where an input has none."""
    per_input = [sums_by_key([10**n * i for i in INPUT]) for n in range(inputs)]
    keys = set().union(*per_input)
    return {key: tuple(sums.get(key, 0) for sums in per_input) for key in keys}


GROUP_AGGREGATE2_FORMS = {
    "with_separate_aggr_ops": lambda s0, s1: s0.aggregate2(summing(), s1, summing()),
    "with_aggr_op2": lambda s0, s1: s0.aggregate2(s1, aggregate_operation2(summing(), summing())),
}


@pytest.mark.parametrize("form", GROUP_AGGREGATE2_FORMS)
def test_group_aggregate2(engine: Any, form: str) -> None:
    """`BatchAggregateTest.groupAggregate2_withSeparateAggrOps`,
    `groupAggregate2_withAggrOp2`: `(key, (sum0, sum1))` per key of either input."""
    p = Pipeline.create()
    GROUP_AGGREGATE2_FORMS[form](*co_grouped(engine, p, 2)).drain_to(Sinks.list("sink"))
    execute(engine, p)
    assert_same_bag(engine.get_list("sink"), expected_sums(2).items())


def mix2(key: int, sum0: int, sum1: int) -> int:
    """Jet's `outputFn` of two inputs: every argument shows in the result."""
    return sum1 + A * (sum0 + A * key)


GROUP_AGGREGATE2_OUTPUT_FORMS = {
    "with_separate_aggr_ops_with_output_fn": lambda s0, s1: s0.aggregate2(
        summing(), s1, summing(), mix2
    ),
    "with_aggr_op2_with_output_fn": lambda s0, s1: s0.aggregate2(
        s1, aggregate_operation2(summing(), summing()), lambda key, sums: mix2(key, *sums)
    ),
}


@pytest.mark.parametrize("form", GROUP_AGGREGATE2_OUTPUT_FORMS)
def test_group_aggregate2_with_output_fn(engine: Any, form: str) -> None:
    """`BatchAggregateTest.groupAggregate2_withSeparateAggrOps_withOutputFn`,
    `groupAggregate2_withAggrOp2_withOutputFn`."""
    p = Pipeline.create()
    GROUP_AGGREGATE2_OUTPUT_FORMS[form](*co_grouped(engine, p, 2)).drain_to(Sinks.list("sink"))
    execute(engine, p)
    expected = [mix2(key, *sums) for key, sums in expected_sums(2).items()]
    assert_same_bag(engine.get_list("sink"), expected)


GROUP_AGGREGATE3_FORMS = {
    "with_separate_aggr_ops": lambda s0, s1, s2: s0.aggregate3(
        summing(), s1, summing(), s2, summing()
    ),
    "with_aggr_op3": lambda s0, s1, s2: s0.aggregate3(
        s1, s2, aggregate_operation3(summing(), summing(), summing())
    ),
}


@pytest.mark.parametrize("form", GROUP_AGGREGATE3_FORMS)
def test_group_aggregate3(engine: Any, form: str) -> None:
    """`BatchAggregateTest.groupAggregate3_withSeparateAggrOps`,
    `groupAggregate3_withAggrOp3`."""
    p = Pipeline.create()
    GROUP_AGGREGATE3_FORMS[form](*co_grouped(engine, p, 3)).drain_to(Sinks.list("sink"))
    execute(engine, p)
    assert_same_bag(engine.get_list("sink"), expected_sums(3).items())


def mix3(key: int, sum0: int, sum1: int, sum2: int) -> int:
    """Jet's `outputFn` of three inputs."""
    return sum2 + A * (sum1 + A * (sum0 + A * key))


GROUP_AGGREGATE3_OUTPUT_FORMS = {
    "with_separate_aggr_ops_with_output_fn": lambda s0, s1, s2: s0.aggregate3(
        summing(), s1, summing(), s2, summing(), mix3
    ),
    "with_aggr_op3_with_output_fn": lambda s0, s1, s2: s0.aggregate3(
        s1,
        s2,
        aggregate_operation3(summing(), summing(), summing()),
        lambda key, sums: mix3(key, *sums),
    ),
}


@pytest.mark.parametrize("form", GROUP_AGGREGATE3_OUTPUT_FORMS)
def test_group_aggregate3_with_output_fn(engine: Any, form: str) -> None:
    """`BatchAggregateTest.groupAggregate3_withSeparateAggrOps_withOutputFn`,
    `groupAggregate3_withAggrOp3_withOutputFn`."""
    p = Pipeline.create()
    GROUP_AGGREGATE3_OUTPUT_FORMS[form](*co_grouped(engine, p, 3)).drain_to(Sinks.list("sink"))
    execute(engine, p)
    expected = [mix3(key, *sums) for key, sums in expected_sums(3).items()]
    assert_same_bag(engine.get_list("sink"), expected)


def test_group_aggregate3_with_separate_aggr_ops_with_output_fn_on_spark(any_engine: Any) -> None:
    """`BatchAggregateTest.groupAggregate3_withSeparateAggrOps_withOutputFn`, on every
    engine."""
    test_group_aggregate3_with_output_fn(any_engine, "with_separate_aggr_ops_with_output_fn")


def test_group_aggregate_builder_with_separate_aggr_ops_with_output_fn(engine: Any) -> None:
    """`BatchAggregateTest.groupAggregateBuilder_withSeparateAggrOps_withOutputFn`."""
    p = Pipeline.create()
    stage0, stage1, stage2 = co_grouped(engine, p, 3)
    builder = stage0.aggregate_builder(summing())
    tag0 = builder.tag0()
    tag1 = builder.add(stage1, summing())
    tag2 = builder.add(stage2, summing())
    builder.build(lambda key, by_tag: mix3(key, by_tag[tag0], by_tag[tag1], by_tag[tag2])).drain_to(
        Sinks.list("sink")
    )
    execute(engine, p)
    expected = [mix3(key, *sums) for key, sums in expected_sums(3).items()]
    assert_same_bag(engine.get_list("sink"), expected)


def test_group_aggregate_builder_with_complex_aggr_op_with_output_fn(any_engine: Any) -> None:
    """`BatchAggregateTest.groupAggregateBuilder_withComplexAggrOp_withOutputFn`: one operation
    of three inputs, made by `co_aggregate_operation_builder()` from the builder's tags."""
    p = Pipeline.create()
    stage0, stage1, stage2 = co_grouped(any_engine, p, 3)
    builder = stage0.aggregate_builder()
    in_tag0, in_tag1, in_tag2 = builder.tag0(), builder.add(stage1), builder.add(stage2)
    operations = co_aggregate_operation_builder()
    tag0 = operations.add(in_tag0, summing())
    tag1 = operations.add(in_tag1, summing())
    tag2 = operations.add(in_tag2, summing())
    builder.build(
        operations.build(),
        lambda key, by_tag: mix3(key, by_tag[tag0], by_tag[tag1], by_tag[tag2]),
    ).drain_to(Sinks.list("sink"))
    execute(any_engine, p)
    expected = [mix3(key, *sums) for key, sums in expected_sums(3).items()]
    assert_same_bag(any_engine.get_list("sink"), expected)


_ADD_TO_SET = to_set().accumulate_fn()
"""`acc.add(item)`, the accumulate function the tagged operations below give every tag."""


def test_aggregate_builder_with_tagged_accumulate_fns(any_engine: Any) -> None:
    """The example of Jet's `BatchStage.aggregateBuilder()`: the distinct items of three
    stages counted by one operation with an accumulate function per tag."""
    p = Pipeline.create()
    builder = draw(any_engine, p, "src", suffixed("")).aggregate_builder()
    tag0 = builder.tag0()
    tag1 = builder.add(draw(any_engine, p, "src1", suffixed("-a")))
    tag2 = builder.add(draw(any_engine, p, "src2", suffixed("")))
    distinct_count = (
        AggregateOperation.with_create(set)
        .and_accumulate(tag2, _ADD_TO_SET)
        .and_accumulate(tag0, _ADD_TO_SET)
        .and_accumulate(tag1, _ADD_TO_SET)
        .and_combine(to_set().combine_fn)
        .and_finish(len)
    )
    builder.build(distinct_count).drain_to(Sinks.list("sink"))
    assert single_result(any_engine, p) == 2 * ITEM_COUNT


def test_aggregate_builder_without_an_operation_names_what_is_wrong(engine: Any) -> None:
    """A builder's operation must accumulate each of its inputs, its tags from 0 up."""
    p = Pipeline.create()
    builder = draw(engine, p, "src").aggregate_builder()
    tag1 = builder.add(draw(engine, p, "src1"))
    operations = co_aggregate_operation_builder()
    operations.add(tag1, counting())
    with pytest.raises(ValueError, match=r"indices are \[1\], but they must be \[0\]"):
        operations.build()
    gap = AggregateOperation.with_create(set).and_accumulate(tag1, _ADD_TO_SET)
    with pytest.raises(ValueError, match=r"given for tags \[1\], but they must be \[0\]"):
        gap.and_finish(len)
    one_of_two = AggregateOperation.with_create(set).and_accumulate0(_ADD_TO_SET).and_finish(len)
    with pytest.raises(ValueError, match="has 2 inputs, but its operation accumulates 1"):
        builder.build(one_of_two)
    with pytest.raises(ValueError, match="cannot be mixed"):
        AggregateOperation.with_create(set).and_accumulate0(_ADD_TO_SET).and_accumulate(
            tag1, _ADD_TO_SET
        ).and_finish(len)
