"""Port of Jet 0.7.1 `com.hazelcast.jet.pipeline.BatchStageTest`.

Each test draws the items from a list source (Jet: the values of an IMap), applies one stage
and compares the sink's items, as a bag, with the items computed in plain Python. All run on
LocalEngine with two members; the tests taking `any_engine` run on SparkEngine too.

Not ported: `mapUsingReplicatedMap`, `mapUsingIMap`, `mapUsingIMap_keyed` (jetspark has no
ReplicatedMap or IMap; `map_using_context` covers the lookups).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from jetspark.core.errors import DagValidationError
from jetspark.core.pipeline import (
    ContextFactory,
    ItemsByTag,
    JoinClause,
    Pipeline,
    Sinks,
    Sources,
)
from jetspark.processors import map_p
from jetspark.processors.aggregate import counting
from jetspark.processors.functions import whole_item

from .support import (
    ITEM_COUNT,
    assert_same_bag,
    assert_stage_named,
    assert_stage_parallelism_set,
    execute,
    sequence,
)

pytestmark = pytest.mark.timeout(180)


def draw(engine: Any, pipeline: Pipeline, items: list[Any], name: str = "src") -> Any:
    """The batch stage of the list `name` holding `items` (Jet's `srcStage`)."""
    engine.get_list(name).extend(items)
    return pipeline.draw_from(Sources.list(name))


def test_when_empty_pipeline_to_dag_then_exception_in_iterator() -> None:
    """`BatchStageTest.when_emptyPipelineToDag_then_exceptionInIterator`."""
    with pytest.raises(DagValidationError, match="empty"):
        Pipeline.create().to_dag()


def test_when_missing_sink_then_exception_in_dag_iterator() -> None:
    """`BatchStageTest.when_missingSink_then_exceptionInDagIterator`."""
    p = Pipeline.create()
    p.draw_from(Sources.list("src"))
    with pytest.raises(DagValidationError, match="listSource"):
        p.to_dag()


def test_when_minimal_pipeline_then_valid_dag() -> None:
    """`BatchStageTest.when_minimalPipeline_then_validDag`."""
    p = Pipeline.create()
    p.draw_from(Sources.list("src")).drain_to(Sinks.list("sink"))
    assert len(p.to_dag().vertices()) == 2


def test_set_name() -> None:
    """`BatchStageTest.setName`."""
    assert_stage_named(Sources.list("src"))


def test_set_local_parallelism() -> None:
    """`BatchStageTest.setLocalParallelism`."""
    assert_stage_parallelism_set(Sources.list("src"))


def test_map(any_engine: Any) -> None:
    """`BatchStageTest.map`."""
    p = Pipeline.create()
    draw(any_engine, p, sequence(ITEM_COUNT)).map(str).drain_to(Sinks.list("sink"))
    execute(any_engine, p)
    assert_same_bag(any_engine.get_list("sink"), [str(i) for i in range(ITEM_COUNT)])


def test_filter(engine: Any) -> None:
    """`BatchStageTest.filter`."""
    p = Pipeline.create()
    draw(engine, p, sequence(ITEM_COUNT)).filter(lambda i: i % 2 == 1).drain_to(Sinks.list("sink"))
    execute(engine, p)
    assert_same_bag(engine.get_list("sink"), [i for i in range(ITEM_COUNT) if i % 2 == 1])


def test_flat_map(engine: Any) -> None:
    """`BatchStageTest.flatMap`."""
    p = Pipeline.create()
    stage = draw(engine, p, sequence(ITEM_COUNT))
    stage.flat_map(lambda i: [f"{i}A", f"{i}B"]).drain_to(Sinks.list("sink"))
    execute(engine, p)
    expected = [f"{i}{suffix}" for i in range(ITEM_COUNT) for suffix in "AB"]
    assert_same_bag(engine.get_list("sink"), expected)


def test_map_using_context(engine: Any) -> None:
    """`BatchStageTest.mapUsingContext`."""
    p = Pipeline.create()
    stage = draw(engine, p, sequence(ITEM_COUNT))
    factory = ContextFactory.with_create_fn(lambda context: "-context")
    stage.map_using_context(factory, lambda suffix, i: f"{i}{suffix}").drain_to(Sinks.list("sink"))
    execute(engine, p)
    assert_same_bag(engine.get_list("sink"), [f"{i}-context" for i in range(ITEM_COUNT)])


def test_map_using_context_keyed(any_engine: Any) -> None:
    """`BatchStageTest.mapUsingContext_keyed`."""
    p = Pipeline.create()
    keyed = draw(any_engine, p, sequence(ITEM_COUNT)).grouping_key(whole_item)
    factory = ContextFactory.with_create_fn(lambda context: "-keyed-context")
    keyed.map_using_context(factory, lambda suffix, key, i: f"{i}{suffix}").drain_to(
        Sinks.list("sink")
    )
    execute(any_engine, p)
    assert_same_bag(any_engine.get_list("sink"), [f"{i}-keyed-context" for i in range(ITEM_COUNT)])


def test_filter_using_context(engine: Any) -> None:
    """`BatchStageTest.filterUsingContext`."""
    p = Pipeline.create()
    stage = draw(engine, p, sequence(ITEM_COUNT))
    factory = ContextFactory.with_create_fn(lambda context: 1)
    stage.filter_using_context(factory, lambda ctx, i: i % 2 == ctx).drain_to(Sinks.list("sink"))
    execute(engine, p)
    assert_same_bag(engine.get_list("sink"), [i for i in range(ITEM_COUNT) if i % 2 == 1])


def test_filter_using_context_keyed(engine: Any) -> None:
    """`BatchStageTest.filterUsingContext_keyed`."""
    p = Pipeline.create()
    keyed = draw(engine, p, sequence(ITEM_COUNT)).grouping_key(whole_item)
    factory = ContextFactory.with_create_fn(lambda context: 1)
    keyed.filter_using_context(factory, lambda ctx, key, i: i % 2 == ctx).drain_to(
        Sinks.list("sink")
    )
    execute(engine, p)
    assert_same_bag(engine.get_list("sink"), [i for i in range(ITEM_COUNT) if i % 2 == 1])


def test_flat_map_using_context(engine: Any) -> None:
    """`BatchStageTest.flatMapUsingContext`."""
    p = Pipeline.create()
    stage = draw(engine, p, sequence(ITEM_COUNT))
    factory = ContextFactory.with_create_fn(lambda context: ["A", "B"])
    stage.flat_map_using_context(factory, lambda ctx, i: [f"{i}{ctx[0]}", f"{i}{ctx[1]}"]).drain_to(
        Sinks.list("sink")
    )
    execute(engine, p)
    expected = [f"{i}{suffix}" for i in range(ITEM_COUNT) for suffix in "AB"]
    assert_same_bag(engine.get_list("sink"), expected)


def test_flat_map_using_context_keyed(engine: Any) -> None:
    """`BatchStageTest.flatMapUsingContext_keyed`."""
    p = Pipeline.create()
    keyed = draw(engine, p, sequence(ITEM_COUNT)).grouping_key(whole_item)
    factory = ContextFactory.with_create_fn(lambda context: ["A", "B"])
    keyed.flat_map_using_context(
        factory, lambda ctx, key, i: [f"{i}{ctx[0]}", f"{i}{ctx[1]}"]
    ).drain_to(Sinks.list("sink"))
    execute(engine, p)
    expected = [f"{i}{suffix}" for i in range(ITEM_COUNT) for suffix in "AB"]
    assert_same_bag(engine.get_list("sink"), expected)


def test_rolling_aggregate(engine: Any) -> None:
    """`BatchStageTest.rollingAggregate`: the n-th item seen gives the count n."""
    p = Pipeline.create()
    draw(engine, p, sequence(ITEM_COUNT)).rolling_aggregate(counting()).drain_to(Sinks.list("sink"))
    execute(engine, p)
    assert_same_bag(engine.get_list("sink"), range(1, ITEM_COUNT + 1))


def test_rolling_aggregate_keyed(any_engine: Any) -> None:
    """`BatchStageTest.rollingAggregate_keyed`: each key counts its own items."""
    p = Pipeline.create()
    keyed = draw(any_engine, p, sequence(ITEM_COUNT)).grouping_key(lambda i: i % 2)
    keyed.rolling_aggregate(counting()).drain_to(Sinks.list("sink"))
    execute(any_engine, p)
    expected = [(key, n) for n in range(1, ITEM_COUNT // 2 + 1) for key in (0, 1)]
    assert_same_bag(any_engine.get_list("sink"), expected)


def test_merge(any_engine: Any) -> None:
    """`BatchStageTest.merge`."""
    p = Pipeline.create()
    input_ = sequence(ITEM_COUNT)
    stage0 = draw(any_engine, p, input_)
    stage1 = draw(any_engine, p, input_, "src1")
    stage0.merge(stage1).drain_to(Sinks.list("sink"))
    execute(any_engine, p)
    assert_same_bag(any_engine.get_list("sink"), input_ + input_)


def test_distinct(any_engine: Any) -> None:
    """`BatchStageTest.distinct`: every item twice, shuffled, comes out once."""
    input_ = [i % ITEM_COUNT for i in range(2 * ITEM_COUNT)]
    random.Random(7).shuffle(input_)
    p = Pipeline.create()
    draw(any_engine, p, input_).distinct().drain_to(Sinks.list("sink"))
    execute(any_engine, p)
    assert_same_bag(any_engine.get_list("sink"), range(ITEM_COUNT))


def test_distinct_keyed(engine: Any) -> None:
    """`BatchStageTest.distinct_keyed`: one item (either one) per key."""
    input_ = sequence(2 * ITEM_COUNT)
    random.Random(7).shuffle(input_)
    p = Pipeline.create()
    draw(engine, p, input_).grouping_key(lambda i: i // 2).distinct().drain_to(Sinks.list("sink"))
    execute(engine, p)
    output = engine.get_list("sink")
    assert_same_bag([i // 2 for i in output], range(ITEM_COUNT))
    assert set(output) <= set(input_)


def enriching(engine: Any, pipeline: Pipeline, name: str, suffix: str) -> Any:
    """A batch stage of the map `name`: `(i, f"{i}{suffix}")` for every input item."""
    engine.get_map(name).update({i: f"{i}{suffix}" for i in range(ITEM_COUNT)})
    return pipeline.draw_from(Sources.map(name))


FILTERED_OUT_ITEM = 100
"""The item the join's output function maps to None, which drops it."""


def test_hash_join_two(any_engine: Any) -> None:
    """`BatchStageTest.hashJoinTwo`."""
    p = Pipeline.create()
    stage = draw(any_engine, p, sequence(ITEM_COUNT))
    joined = stage.hash_join(
        enriching(any_engine, p, "enriching", "A"),
        JoinClause.join_map_entries(whole_item),
        lambda i, a: None if i == FILTERED_OUT_ITEM else (i, a),
    )
    joined.drain_to(Sinks.list("sink"))
    execute(any_engine, p)
    expected = [(i, f"{i}A") for i in range(ITEM_COUNT) if i != FILTERED_OUT_ITEM]
    assert_same_bag(any_engine.get_list("sink"), expected)


def test_hash_join_three(engine: Any) -> None:
    """`BatchStageTest.hashJoinThree`: `hash_join2` with two enriching stages."""
    p = Pipeline.create()
    stage = draw(engine, p, sequence(ITEM_COUNT))
    joined = stage.hash_join2(
        enriching(engine, p, "enriching1", "A"),
        JoinClause.join_map_entries(whole_item),
        enriching(engine, p, "enriching2", "B"),
        JoinClause.join_map_entries(whole_item),
        lambda i, a, b: None if i == FILTERED_OUT_ITEM else (i, a, b),
    )
    joined.drain_to(Sinks.list("sink"))
    execute(engine, p)
    expected = [(i, f"{i}A", f"{i}B") for i in range(ITEM_COUNT) if i != FILTERED_OUT_ITEM]
    assert_same_bag(engine.get_list("sink"), expected)


def test_hash_join_builder(engine: Any) -> None:
    """`BatchStageTest.hashJoinBuilder`: the matched items come under their tags."""
    p = Pipeline.create()
    stage = draw(engine, p, sequence(ITEM_COUNT))
    builder = stage.hash_join_builder()
    tag_a = builder.add(
        enriching(engine, p, "enriching1", "A"), JoinClause.join_map_entries(whole_item)
    )
    tag_b = builder.add(
        enriching(engine, p, "enriching2", "B"), JoinClause.join_map_entries(whole_item)
    )
    joined = builder.build(lambda i, by_tag: None if i == FILTERED_OUT_ITEM else (i, by_tag))
    joined.drain_to(Sinks.list("sink"))
    execute(engine, p)
    expected = [
        (i, ItemsByTag({tag_a: f"{i}A", tag_b: f"{i}B"}))
        for i in range(ITEM_COUNT)
        if i != FILTERED_OUT_ITEM
    ]
    # Jet's ItemsByTag is a value (equals and hashCode): its test counts the items in a bag.
    assert Counter(engine.get_list("sink")) == Counter(expected)


def test_peek_is_transparent(engine: Any) -> None:
    """`BatchStageTest.peekIsTransparent`."""
    p = Pipeline.create()
    draw(engine, p, sequence(50)).peek().drain_to(Sinks.list("sink"))
    execute(engine, p)
    assert_same_bag(engine.get_list("sink"), range(50))


def test_peek_with_to_string_function_is_transparent(engine: Any) -> None:
    """`BatchStageTest.peekWithToStringFunctionIsTransparent`."""
    p = Pipeline.create()
    draw(engine, p, sequence(50)).peek(str).drain_to(Sinks.list("sink"))
    execute(engine, p)
    assert_same_bag(engine.get_list("sink"), range(50))


def test_custom_transform(engine: Any) -> None:
    """`BatchStageTest.customTransform`: a Core API processor as a stage."""
    p = Pipeline.create()
    draw(engine, p, sequence(ITEM_COUNT)).custom_transform("map", map_p(str)).drain_to(
        Sinks.list("sink")
    )
    execute(engine, p)
    assert_same_bag(engine.get_list("sink"), [str(i) for i in range(ITEM_COUNT)])
