"""Port of Jet 0.7.1 `com.hazelcast.jet.pipeline.StreamStageTest`.

The stream is a journal over an engine list (Jet: an IMap's event journal), filled before the
job starts; the job runs until the sink list holds the expected number of items, then it is
cancelled and the items are compared, as a bag, with the items computed in plain Python. All
run on LocalEngine with two members.

Deliberate differences: Jet's `addTimestamps()` without arguments has no jetspark counterpart;
the port gives `add_timestamps(lambda i: i, MAX_LAG)`, the items being their own timestamps.
Not ported: `mapUsingReplicatedMap`, `mapUsingIMap`, `mapUsingIMap_keyed` (no ReplicatedMap or
IMap in jetspark).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import pytest

from jetspark.core.pipeline import (
    ContextFactory,
    ItemsByTag,
    JoinClause,
    Pipeline,
    Sinks,
    Sources,
    TimestampedItem,
    WindowDefinition,
)
from jetspark.processors import map_p
from jetspark.processors.aggregate import AggregateOperation, counting
from jetspark.processors.functions import whole_item

from .support import (
    CLOSING_ITEMS,
    MAX_LAG,
    STREAM_ITEM_COUNT,
    assert_same_bag,
    assert_stage_named,
    assert_stage_parallelism_set,
    run_until,
)

pytestmark = pytest.mark.timeout(180)

INPUT = list(range(STREAM_ITEM_COUNT))


def draw(engine: Any, pipeline: Pipeline, items: list[Any], name: str = "src") -> Any:
    """The stream stage of a journal over the list `name`, which holds `items`."""
    engine.get_list(name).extend(items)
    return pipeline.draw_from(Sources.stream_journal(name))


def run_expecting(engine: Any, pipeline: Pipeline, expected: list[Any]) -> None:
    """Runs the stream job until the sink holds as many items as `expected`, then compares."""
    assert_same_bag(run_until(engine, pipeline, "sink", len(expected)), expected)


def test_set_name() -> None:
    """`StreamStageTest.setName`."""
    assert_stage_named(Sources.stream_journal("src"))


def test_set_local_parallelism() -> None:
    """`StreamStageTest.setLocalParallelism`."""
    assert_stage_parallelism_set(Sources.stream_journal("src"))


def test_map(engine: Any) -> None:
    """`StreamStageTest.map`."""
    p = Pipeline.create()
    draw(engine, p, INPUT).map(lambda i: f"{i}-x").drain_to(Sinks.list("sink"))
    run_expecting(engine, p, [f"{i}-x" for i in INPUT])


def test_filter(engine: Any) -> None:
    """`StreamStageTest.filter`."""
    p = Pipeline.create()
    draw(engine, p, INPUT).filter(lambda i: i % 2 == 1).drain_to(Sinks.list("sink"))
    run_expecting(engine, p, [i for i in INPUT if i % 2 == 1])


def test_flat_map(engine: Any) -> None:
    """`StreamStageTest.flatMap`."""
    p = Pipeline.create()
    draw(engine, p, INPUT).flat_map(lambda i: [f"{i}A", f"{i}B"]).drain_to(Sinks.list("sink"))
    run_expecting(engine, p, [f"{i}{suffix}" for i in INPUT for suffix in "AB"])


def timestamped(engine: Any, pipeline: Pipeline) -> Any:
    """The input stream with the items as their timestamps."""
    return draw(engine, pipeline, INPUT).add_timestamps(whole_item, MAX_LAG)


def test_map_using_context(engine: Any) -> None:
    """`StreamStageTest.mapUsingContext`: on a timestamped stream."""
    p = Pipeline.create()
    factory = ContextFactory.with_create_fn(lambda context: "-context")
    timestamped(engine, p).map_using_context(factory, lambda suffix, i: f"{i}{suffix}").drain_to(
        Sinks.list("sink")
    )
    run_expecting(engine, p, [f"{i}-context" for i in INPUT])


def test_map_using_context_keyed(engine: Any) -> None:
    """`StreamStageTest.mapUsingContext_keyed`."""
    p = Pipeline.create()
    factory = ContextFactory.with_create_fn(lambda context: "-keyed-context")
    keyed = timestamped(engine, p).grouping_key(whole_item)
    keyed.map_using_context(factory, lambda suffix, key, i: f"{i}{suffix}").drain_to(
        Sinks.list("sink")
    )
    run_expecting(engine, p, [f"{i}-keyed-context" for i in INPUT])


def test_filter_using_context(engine: Any) -> None:
    """`StreamStageTest.filterUsingContext`."""
    p = Pipeline.create()
    factory = ContextFactory.with_create_fn(lambda context: 1)
    timestamped(engine, p).filter_using_context(factory, lambda ctx, i: i % 2 == ctx).drain_to(
        Sinks.list("sink")
    )
    run_expecting(engine, p, [i for i in INPUT if i % 2 == 1])


def test_filter_using_context_keyed(engine: Any) -> None:
    """`StreamStageTest.filterUsingContext_keyed`."""
    p = Pipeline.create()
    factory = ContextFactory.with_create_fn(lambda context: 1)
    keyed = timestamped(engine, p).grouping_key(whole_item)
    keyed.filter_using_context(factory, lambda ctx, key, i: i % 2 == ctx).drain_to(
        Sinks.list("sink")
    )
    run_expecting(engine, p, [i for i in INPUT if i % 2 == 1])


def two_items(i: int) -> list[str]:
    """Jet's `flatMapFn`: `i` -> "iA", "iB"."""
    return [f"{i}A", f"{i}B"]


def test_flat_map_using_context(engine: Any) -> None:
    """`StreamStageTest.flatMapUsingContext`: the context object is the function."""
    p = Pipeline.create()
    factory = ContextFactory.with_create_fn(lambda context: two_items)
    timestamped(engine, p).flat_map_using_context(factory, lambda fn, i: fn(i)).drain_to(
        Sinks.list("sink")
    )
    run_expecting(engine, p, [item for i in INPUT for item in two_items(i)])


def test_flat_map_using_context_keyed(engine: Any) -> None:
    """`StreamStageTest.flatMapUsingContext_keyed`."""
    p = Pipeline.create()
    factory = ContextFactory.with_create_fn(lambda context: two_items)
    keyed = timestamped(engine, p).grouping_key(whole_item)
    keyed.flat_map_using_context(factory, lambda fn, key, i: fn(i)).drain_to(Sinks.list("sink"))
    run_expecting(engine, p, [item for i in INPUT for item in two_items(i)])


def test_rolling_aggregate_keyed(engine: Any) -> None:
    """`StreamStageTest.rollingAggregate_keyed`."""
    p = Pipeline.create()
    keyed = draw(engine, p, INPUT).grouping_key(lambda i: i % 2)
    keyed.rolling_aggregate(counting()).drain_to(Sinks.list("sink"))
    expected = [(key, n) for n in range(1, STREAM_ITEM_COUNT // 2 + 1) for key in (0, 1)]
    run_expecting(engine, p, expected)


def test_rolling_aggregate_global(engine: Any) -> None:
    """`StreamStageTest.rollingAggregate_global`."""
    p = Pipeline.create()
    draw(engine, p, INPUT).rolling_aggregate(counting()).drain_to(Sinks.list("sink"))
    run_expecting(engine, p, list(range(1, STREAM_ITEM_COUNT + 1)))


def latest() -> AggregateOperation:
    """The last item accumulated (Jet's `MutableReference::set` operation)."""
    return (
        AggregateOperation.with_create(lambda: None)
        .and_accumulate(lambda acc, item: item)
        .and_export_finish(whole_item)
    )


def test_when_rolling_aggregate_with_timestamps_then_timestamps_propagated(engine: Any) -> None:
    """`StreamStageTest.when_rollingAggregateWithTimestamps_then_timestampsPropagated`: a
    rolling aggregate's results keep their items' timestamps, so a window after it sees
    item i in the window ending at i + 1."""
    p = Pipeline.create()
    rolling = draw(engine, p, INPUT + CLOSING_ITEMS).add_timestamps(whole_item, 100)
    rolling = rolling.rolling_aggregate(latest())
    rolling.window(WindowDefinition.tumbling(1)).aggregate(latest()).drain_to(Sinks.list("sink"))
    run_expecting(engine, p, [TimestampedItem(i + 1, i) for i in INPUT])


def test_merge(engine: Any) -> None:
    """`StreamStageTest.merge`."""
    p = Pipeline.create()
    draw(engine, p, INPUT).merge(draw(engine, p, INPUT, "src2")).drain_to(Sinks.list("sink"))
    run_expecting(engine, p, INPUT + INPUT)


def enriching(engine: Any, pipeline: Pipeline, name: str, suffix: str) -> Any:
    """A batch stage of the map `name`: `(i, f"{i}{suffix}")` for every input item."""
    engine.get_map(name).update({i: f"{i}{suffix}" for i in INPUT})
    return pipeline.draw_from(Sources.map(name))


def test_hash_join(engine: Any) -> None:
    """`StreamStageTest.hashJoin`: a stream enriched from a batch stage."""
    p = Pipeline.create()
    joined = draw(engine, p, INPUT).hash_join(
        enriching(engine, p, "enriching", "A"),
        JoinClause.join_map_entries(whole_item),
        lambda i, a: (i, a),
    )
    joined.drain_to(Sinks.list("sink"))
    run_expecting(engine, p, [(i, f"{i}A") for i in INPUT])


def test_hash_join2(engine: Any) -> None:
    """`StreamStageTest.hashJoin2`."""
    p = Pipeline.create()
    joined = draw(engine, p, INPUT).hash_join2(
        enriching(engine, p, "enriching1", "A"),
        JoinClause.join_map_entries(whole_item),
        enriching(engine, p, "enriching2", "B"),
        JoinClause.join_map_entries(whole_item),
        lambda i, a, b: (i, a, b),
    )
    joined.drain_to(Sinks.list("sink"))
    run_expecting(engine, p, [(i, f"{i}A", f"{i}B") for i in INPUT])


def test_hash_join_builder(engine: Any) -> None:
    """`StreamStageTest.hashJoinBuilder`."""
    p = Pipeline.create()
    builder = draw(engine, p, INPUT).hash_join_builder()
    tag_a = builder.add(
        enriching(engine, p, "enriching1", "A"), JoinClause.join_map_entries(whole_item)
    )
    tag_b = builder.add(
        enriching(engine, p, "enriching2", "B"), JoinClause.join_map_entries(whole_item)
    )
    builder.build(lambda i, by_tag: (i, by_tag)).drain_to(Sinks.list("sink"))
    expected = [(i, ItemsByTag({tag_a: f"{i}A", tag_b: f"{i}B"})) for i in INPUT]
    # Jet's ItemsByTag is a value (equals and hashCode): its test counts the items in a bag.
    assert Counter(run_until(engine, p, "sink", len(expected))) == Counter(expected)


def test_custom_transform(engine: Any) -> None:
    """`StreamStageTest.customTransform`."""
    p = Pipeline.create()
    draw(engine, p, INPUT).custom_transform("map", map_p(lambda i: f"{i}-x")).drain_to(
        Sinks.list("sink")
    )
    run_expecting(engine, p, [f"{i}-x" for i in INPUT])


def test_peek_when_added_timestamp_then_unwraps_jet_event(
    engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """`StreamStageTest.peek_when_addedTimestamp_then_unwrapsJetEvent`: peek logs, and the
    sink gets, the items, not the events wrapping them."""
    caplog.set_level(logging.INFO, logger="jetspark")
    p = Pipeline.create()
    timestamped(engine, p).peek(lambda i: f"peeked {i!r}").drain_to(Sinks.list("sink"))
    run_expecting(engine, p, INPUT)
    logged = [r.getMessage() for r in caplog.records if "peeked" in r.getMessage()]
    assert_same_bag(logged, [f"Output forwarded: peeked {i!r}" for i in INPUT])


def test_peek_with_to_string_function_is_transparent(engine: Any) -> None:
    """`StreamStageTest.peekWithToStringFunctionIsTransparent`."""
    p = Pipeline.create()
    draw(engine, p, INPUT).filter(lambda i: i % 2 == 1).peek(str).drain_to(Sinks.list("sink"))
    run_expecting(engine, p, [i for i in INPUT if i % 2 == 1])
