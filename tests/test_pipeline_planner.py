"""The Pipeline API's planner: the DAG each stage plans to (vertices, edges, routing,
distribution, priorities), fusion of stateless chains, and the errors raised at build time."""

from __future__ import annotations

from typing import Any

import pytest

from jetspark.core import DagValidationError, LocalEngine
from jetspark.core.pipeline import (
    ContextFactory,
    JoinClause,
    Pipeline,
    Sinks,
    SourceBuilder,
    Sources,
    TimestampedEntry,
    TimestampedItem,
    WindowDefinition,
)
from jetspark.edges.policy import RoutingPolicy
from jetspark.processors.aggregate import AggregateOperation, counting, to_list


def shape(pipeline: Pipeline) -> list[tuple[str, str, str, bool, int]]:
    """(from, to, routing, distributed, priority) of every planned edge."""
    return [
        (
            e.source_name,
            e.dest_name,
            e.routing_policy.name,
            e.is_distributed,
            e.get_priority(),
        )
        for e in pipeline.to_dag().edges()
    ]


def names(pipeline: Pipeline) -> list[str]:
    return [v.name for v in pipeline.to_dag().vertices()]


def test_a_chain_of_stateless_stages_is_fused_into_one_vertex() -> None:
    p = Pipeline.create()
    (
        p.draw_from(Sources.list("text"))
        .flat_map(str.split)
        .filter(bool)
        .map(str.lower)
        .set_name("lower")
        .drain_to(Sinks.list("out"))
    )
    assert names(p) == ["listSource(text)", "fused(flat-map, filter, lower)", "listSink(out)"]
    assert [edge[2:] for edge in shape(p)] == [("UNICAST", False, 0), ("UNICAST", False, 0)]


def test_a_stage_feeding_two_stages_ends_its_chain() -> None:
    p = Pipeline.create()
    words = p.draw_from(Sources.list("text")).flat_map(str.split)
    words.map(str.upper).drain_to(Sinks.list("upper"))
    words.map(len).drain_to(Sinks.list("lengths"))
    assert names(p) == [
        "listSource(text)",
        "flat-map",
        "map",
        "listSink(upper)",
        "map-2",
        "listSink(lengths)",
    ]


def test_grouped_aggregation_plans_two_stages() -> None:
    p = Pipeline.create()
    p.draw_from(Sources.list("words")).grouping_key(str.lower).aggregate(counting()).drain_to(
        Sinks.map("counts")
    )
    assert shape(p) == [
        ("listSource(words)", "group-and-aggregate-step1", "PARTITIONED", False, 0),
        ("group-and-aggregate-step1", "group-and-aggregate-step2", "PARTITIONED", True, 0),
        ("group-and-aggregate-step2", "mapSink(counts)", "UNICAST", False, 0),
    ]


def test_an_operation_without_combine_plans_one_distributed_stage() -> None:
    no_combine = AggregateOperation.with_create(list).and_accumulate(_append).and_finish(len)
    p = Pipeline.create()
    p.draw_from(Sources.list("words")).grouping_key(str.lower).aggregate(no_combine).drain_to(
        Sinks.map("counts")
    )
    assert shape(p)[0] == ("listSource(words)", "group-and-aggregate", "PARTITIONED", True, 0)


def test_an_ungrouped_aggregate_combines_on_one_processor() -> None:
    p = Pipeline.create()
    p.draw_from(Sources.list("words")).aggregate(counting()).drain_to(Sinks.list("n"))
    dag = p.to_dag()
    assert shape(p)[1] == ("aggregate-step1", "aggregate-step2", "ALL_TO_ONE", True, 0)
    assert dag.get_vertex("aggregate-step2").get_local_parallelism() == 1


def test_a_sliding_window_is_split_by_frame_as_a_hand_built_dag() -> None:
    """add_timestamps read by the window only: items stay plain, the window computes their
    timestamps, and the journal source emits the watermarks itself (no vertex between)."""
    p = Pipeline.create()
    (
        p.draw_from(Sources.journal("events"))
        .add_timestamps(_first, 0)
        .grouping_key(_second)
        .window(WindowDefinition.sliding(12, 4))
        .aggregate(counting())
        .drain_to(Sinks.list("windows"))
    )
    assert shape(p) == [
        ("journalSource(events)", "sliding-window-step1", "PARTITIONED", False, 0),
        ("sliding-window-step1", "sliding-window-step2", "PARTITIONED", True, 0),
        ("sliding-window-step2", "listSink(windows)", "UNICAST", False, 0),
    ]


def test_stages_after_add_timestamps_get_events_stamped_and_watermarked_in_one_vertex() -> None:
    p = Pipeline.create()
    (
        p.draw_from(Sources.list("events"))
        .add_timestamps(_first, 0)
        .map(_second)
        .filter(bool)
        .window(WindowDefinition.tumbling(10))
        .aggregate(counting())
        .drain_to(Sinks.list("windows"))
    )
    assert shape(p)[:3] == [
        ("listSource(events)", "add-timestamps", "ISOLATED", False, 0),
        ("add-timestamps", "fused(map, filter)", "UNICAST", False, 0),
        ("fused(map, filter)", "tumbling-window-step1", "UNICAST", False, 0),
    ]


def test_a_timestamped_stage_read_by_a_window_and_a_sink_plans_no_stamp_and_no_unwrap() -> None:
    p = Pipeline.create()
    stamped = p.draw_from(Sources.stream_journal("events")).add_timestamps(_first, 0)
    stamped.window(WindowDefinition.tumbling(10)).aggregate(counting()).drain_to(Sinks.list("w"))
    stamped.drain_to(Sinks.list("raw"))
    assert [v.name for v in p.to_dag().vertices()] == [
        "streamJournalSource(events)",
        "tumbling-window-step1",
        "tumbling-window-step2",
        "listSink(w)",
        "listSink(raw)",
    ]


def test_timestamped_results_read_only_by_sinks_need_no_unwrapping_vertex() -> None:
    p = Pipeline.create()
    names = p.draw_from(Sources.map("names"))
    windows = (
        p.draw_from(Sources.journal("trades"))
        .add_timestamps(_first, 0)
        .grouping_key(_second)
        .window(WindowDefinition.tumbling(6))
        .aggregate(counting())
    )
    windows.hash_join(names, JoinClause.join_map_entries(_key), _pair).drain_to(
        Sinks.list("joined")
    )
    windows.grouping_key(_key).rolling_aggregate(counting()).drain_to(Sinks.list("rolling"))
    assert names_of_sinks_inputs(p) == {
        "listSink(joined)": "2-way hash-join-joiner",
        "listSink(rolling)": "rolling-aggregate",
    }


def names_of_sinks_inputs(pipeline: Pipeline) -> dict[str, str]:
    return {
        e.dest_name: e.source_name
        for e in pipeline.to_dag().edges()
        if e.dest_name.startswith("listSink")
    }


def _key(entry: Any) -> Any:
    return entry.key


def test_a_session_window_is_one_distributed_stage() -> None:
    p = Pipeline.create()
    (
        p.draw_from(Sources.journal("events"))
        .add_timestamps(_first, 0)
        .grouping_key(_second)
        .window(WindowDefinition.session(5))
        .aggregate(counting())
        .drain_to(Sinks.list("sessions"))
    )
    assert ("journalSource(events)", "session-window", "PARTITIONED", True, 0) in shape(p)


def test_a_hash_join_reads_its_tables_over_broadcast_edges_first() -> None:
    p = Pipeline.create()
    products = p.draw_from(Sources.map("products"))
    brokers = p.draw_from(Sources.map("brokers"))
    p.draw_from(Sources.list("trades")).hash_join2(
        products,
        JoinClause.join_map_entries(_first),
        brokers,
        JoinClause.join_map_entries(_second),
        _triple,
    ).drain_to(Sinks.list("joined"))
    edges = shape(p)
    assert ("listSource(trades)", "3-way hash-join-joiner", "UNICAST", False, 0) in edges
    assert ("mapSource(products)", "3-way hash-join-collector1", "BROADCAST", True, 0) in edges
    assert ("3-way hash-join-collector1", "3-way hash-join-joiner", "BROADCAST", False, -1) in (
        edges
    )
    assert ("3-way hash-join-collector2", "3-way hash-join-joiner", "BROADCAST", False, -1) in (
        edges
    )


def test_set_name_and_set_local_parallelism_reach_the_vertex() -> None:
    p = Pipeline.create()
    (
        p.draw_from(Sources.list("words"))
        .grouping_key(str.lower)
        .aggregate(counting())
        .set_name("count words")
        .set_local_parallelism(3)
        .drain_to(Sinks.map("counts"))
    )
    dag = p.to_dag()
    assert dag.get_vertex("count words-step2").get_local_parallelism() == 3


def test_explain_names_every_vertex_and_edge() -> None:
    p = Pipeline.create("words")
    p.draw_from(Sources.list("text")).map(str.upper).drain_to(Sinks.list("out"))
    assert p.explain().splitlines() == [
        "pipeline words planned to 3 vertices:",
        "  listSource(text) (local parallelism default)",
        "  map (local parallelism default)",
        "  listSink(out) (local parallelism default)",
        "edges:",
        "  listSource(text):0 -> map:0 (unicast, local)",
        "  map:0 -> listSink(out):0 (unicast, local)",
    ]


def test_a_stage_that_reaches_no_sink_is_named() -> None:
    p = Pipeline.create()
    source = p.draw_from(Sources.list("words"))
    source.map(str.upper).set_name("shout")
    source.drain_to(Sinks.list("out"))
    with pytest.raises(DagValidationError, match="'shout'"):
        p.to_dag()


def test_one_sink_object_drains_one_stage() -> None:
    p = Pipeline.create()
    sink = Sinks.list("out")
    p.draw_from(Sources.list("a")).drain_to(sink)
    with pytest.raises(DagValidationError, match="already drains stage 'listSource\\(a\\)'"):
        p.draw_from(Sources.list("b")).drain_to(sink)


def test_a_stream_cannot_aggregate_without_a_window() -> None:
    p = Pipeline.create()
    stream = p.draw_from(Sources.stream_journal("events")).set_name("ticks")
    with pytest.raises(DagValidationError, match=r"'ticks'.*needs a window"):
        stream.aggregate(counting())
    with pytest.raises(DagValidationError, match="needs a window"):
        stream.grouping_key(_first).aggregate(counting())


def test_a_window_needs_timestamps() -> None:
    p = Pipeline.create()
    stream = p.draw_from(Sources.stream_journal("events"))
    with pytest.raises(DagValidationError, match="add_timestamps"):
        stream.window(WindowDefinition.tumbling(10))


def test_a_batch_stage_has_no_window_and_a_stream_no_batch_aggregate() -> None:
    p = Pipeline.create()
    batch = p.draw_from(Sources.list("words"))
    assert not hasattr(batch, "window")
    enriching = p.draw_from(Sources.stream_journal("events"))
    with pytest.raises(DagValidationError, match="enriches from batch stages only"):
        batch.hash_join(enriching, JoinClause.on_keys(_first, _first), _pair)


def test_a_stream_has_distinct_items_per_window_only_as_in_jet() -> None:
    """A distinct over a whole stream would keep every key for ever; Jet 0.7 has none."""
    p = Pipeline.create()
    events = p.draw_from(Sources.stream_journal("events"))
    for stage in (events, events.grouping_key(_first)):
        with pytest.raises(DagValidationError, match="distinct needs a bounded"):
            stage.distinct()
    windowed = events.add_timestamps(_first, 0).window(WindowDefinition.tumbling(10))
    windowed.distinct().drain_to(Sinks.list("distinct"))


def test_window_definitions_are_checked() -> None:
    with pytest.raises(ValueError, match="multiple"):
        WindowDefinition.sliding(10, 3)
    with pytest.raises(ValueError, match="session_timeout"):
        WindowDefinition.session(0)


# ------------------------------------------------------------- results on LocalEngine(2)


@pytest.fixture
def engine() -> LocalEngine:
    return LocalEngine(members=2)


def test_word_count_in_six_lines(engine: LocalEngine) -> None:
    engine.get_list("text").extend(["foo foo bar", "foo bar foo", "baz"])
    p = Pipeline.create()
    p.draw_from(Sources.list("text")).flat_map(str.split).grouping_key(str).aggregate(
        counting()
    ).drain_to(Sinks.map("counts"))
    engine.new_job(p).join(60)
    assert engine.get_map("counts") == {"foo": 4, "bar": 2, "baz": 1}


def test_an_empty_ungrouped_aggregate_emits_nothing_as_in_jet(engine: LocalEngine) -> None:
    p = Pipeline.create()
    p.draw_from(Sources.list("none")).aggregate(counting()).drain_to(Sinks.list("n"))
    source = p.draw_from(Sources.list("text"))
    engine.get_list("text").extend(["a", "b"])
    source.aggregate(counting()).drain_to(Sinks.list("two"))
    engine.new_job(p).join(60)
    assert engine.get_list("n") == []
    assert engine.get_list("two") == [2]


def test_windows_give_timestamped_entries_and_items(engine: LocalEngine) -> None:
    events = [(t, f"k{t % 2}") for t in range(20)]
    engine.get_list("events").extend(events)
    p = Pipeline.create()
    stamped = p.draw_from(Sources.journal("events")).add_timestamps(_first, 0)
    tumbling = WindowDefinition.tumbling(10)
    stamped.grouping_key(_second).window(tumbling).aggregate(counting()).drain_to(
        Sinks.list("grouped")
    )
    stamped.window(tumbling).aggregate(to_list()).drain_to(Sinks.list("ungrouped"))
    engine.new_job(p).join(60)
    assert sorted(engine.get_list("grouped")) == [
        TimestampedEntry(10, "k0", 5),
        TimestampedEntry(10, "k1", 5),
        TimestampedEntry(20, "k0", 5),
        TimestampedEntry(20, "k1", 5),
    ]
    ungrouped = sorted(engine.get_list("ungrouped"))
    assert [(w.timestamp, sorted(w.item)) for w in ungrouped] == [
        (10, events[:10]),
        (20, events[10:]),
    ]
    assert all(isinstance(w, TimestampedItem) for w in ungrouped)


def test_stages_after_add_timestamps_keep_the_event_time(engine: LocalEngine) -> None:
    engine.get_list("lines").extend([(0, "a b"), (5, "b c"), (12, "c")])
    p = Pipeline.create()
    (
        p.draw_from(Sources.journal("lines"))
        .add_timestamps(_first, 0)
        .flat_map(lambda line: line[1].split())
        .grouping_key(str)
        .window(WindowDefinition.tumbling(10))
        .aggregate(counting())
        .drain_to(Sinks.list("words"))
    )
    engine.new_job(p).join(60)
    assert sorted(engine.get_list("words")) == [
        TimestampedEntry(10, "a", 1),
        TimestampedEntry(10, "b", 2),
        TimestampedEntry(10, "c", 1),
        TimestampedEntry(20, "c", 1),
    ]


def test_rolling_aggregate_and_distinct(engine: LocalEngine) -> None:
    engine.get_list("trades").extend([("a", 3), ("b", 1), ("a", 5), ("a", 4), ("b", 1)])
    p = Pipeline.create()
    trades = p.draw_from(Sources.list("trades")).set_local_parallelism(1)
    trades.grouping_key(_first).rolling_aggregate(to_list()).drain_to(Sinks.list("rolling"))
    trades.distinct().drain_to(Sinks.list("distinct"))
    trades.grouping_key(_first).distinct().drain_to(Sinks.list("first"))
    engine.new_job(p).join(60)
    rolling = engine.get_list("rolling")
    assert sorted(rolling, key=lambda e: (e[0], len(e[1]))) == [
        ("a", [("a", 3)]),
        ("a", [("a", 3), ("a", 5)]),
        ("a", [("a", 3), ("a", 5), ("a", 4)]),
        ("b", [("b", 1)]),
        ("b", [("b", 1), ("b", 1)]),
    ]
    assert sorted(engine.get_list("distinct")) == [("a", 3), ("a", 4), ("a", 5), ("b", 1)]
    assert sorted(engine.get_list("first")) == [("a", 3), ("b", 1)]


def test_co_grouping_with_aggregate2_and_the_builder(engine: LocalEngine) -> None:
    engine.get_list("visits").extend([1, 1, 2])
    engine.get_list("carts").extend([1, 2, 2, 3])
    p = Pipeline.create()
    visits = p.draw_from(Sources.list("visits")).grouping_key(int)
    carts = p.draw_from(Sources.list("carts")).grouping_key(int)
    visits.aggregate2(counting(), carts, counting()).drain_to(Sinks.map("pairs"))
    builder = visits.aggregate_builder(counting())
    tag0, tag1 = builder.tag0(), builder.add(carts, to_list())
    builder.build(lambda key, ibt: (key, ibt.get(tag0), len(ibt.get(tag1)))).drain_to(
        Sinks.list("built")
    )
    engine.new_job(p).join(60)
    assert engine.get_map("pairs") == {1: (2, 1), 2: (1, 2), 3: (0, 1)}
    assert sorted(engine.get_list("built")) == [(1, 2, 1), (2, 1, 2), (3, 0, 1)]


def test_hash_join_builder_and_context_lookups(engine: LocalEngine) -> None:
    engine.get_map("products").update({1: "apple", 2: "pear"})
    engine.get_list("trades").extend([(1, 10), (2, 5), (3, 7)])
    p = Pipeline.create()
    products = p.draw_from(Sources.map("products"))
    trades = p.draw_from(Sources.list("trades"))
    builder = trades.hash_join_builder()
    tag = builder.add(products, JoinClause.join_map_entries(_first))
    builder.build(lambda t, ibt: (t[1], ibt.get(tag))).drain_to(Sinks.list("joined"))
    prices = ContextFactory.with_create_fn(lambda context: {1: 0.5, 2: 2.0})
    trades.map_using_context(prices, lambda ctx, t: (t[0], ctx.get(t[0]))).drain_to(
        Sinks.list("priced")
    )
    trades.grouping_key(_first).filter_using_context(
        prices, lambda ctx, key, t: key in ctx
    ).drain_to(Sinks.list("known"))
    engine.new_job(p).join(60)
    assert sorted(engine.get_list("joined"), key=str) == [(10, "apple"), (5, "pear"), (7, None)]
    assert sorted(engine.get_list("priced")) == [(1, 0.5), (2, 2.0), (3, None)]
    assert sorted(engine.get_list("known")) == [(1, 10), (2, 5)]


def test_a_built_batch_source_and_sink(engine: LocalEngine) -> None:
    received: list[Any] = []
    source = (
        SourceBuilder.batch("countdown", lambda context: [3]).fill_buffer_fn(_count_down).build()
    )
    sink = Sinks.builder(lambda context: received).on_receive_fn(list.append).build()
    p = Pipeline.create()
    p.draw_from(source).map(lambda n: n * 10).drain_to(sink)
    engine.new_job(p).join(60)
    assert sorted(received) == [0, 10, 20, 30]


def _count_down(state: list[int], buffer: Any) -> None:
    if state[0] < 0:
        buffer.close()
        return
    buffer.add(state[0])
    state[0] -= 1


def _append(acc: list[Any], item: Any) -> list[Any]:
    acc.append(item)
    return acc


def _first(item: Any) -> Any:
    return item[0]


def _second(item: Any) -> Any:
    return item[1]


def _pair(a: Any, b: Any) -> tuple[Any, Any]:
    return (a, b)


def _triple(a: Any, b: Any, c: Any) -> tuple[Any, Any, Any]:
    return (a, b, c)


def test_routing_names_are_the_edge_policies() -> None:
    assert {p.name for p in RoutingPolicy} >= {"UNICAST", "PARTITIONED", "BROADCAST"}


def test_a_built_stream_source_may_end_its_stream_as_in_jet(engine: LocalEngine) -> None:
    source = (
        SourceBuilder.timestamped_stream("ticks", lambda context: [0])
        .fill_buffer_fn(_count_up_timestamped)
        .build()
    )
    p = Pipeline.create()
    p.draw_from(source).window(WindowDefinition.tumbling(2)).aggregate(counting()).drain_to(
        Sinks.list("windows")
    )
    engine.new_job(p).join(60)  # completes: the source closed its buffer
    assert sorted(engine.get_list("windows")) == [TimestampedItem(2, 2), TimestampedItem(4, 2)]


def _count_up_timestamped(state: list[int], buffer: Any) -> None:
    if state[0] == 4:
        buffer.close()
        return
    buffer.add(f"tick {state[0]}", state[0])
    state[0] += 1


def test_a_sliding_window_refuses_an_operation_without_combine_naming_the_stage() -> None:
    no_combine = AggregateOperation.with_create(list).and_accumulate(_append).and_finish(len)
    p = Pipeline.create()
    stamped = p.draw_from(Sources.journal("events")).add_timestamps(_first, 0).set_name("ticks")
    with pytest.raises(DagValidationError, match="'ticks': a sliding-window combines"):
        stamped.window(WindowDefinition.sliding(4, 2)).aggregate(no_combine)
    with pytest.raises(DagValidationError, match="session-window"):
        stamped.grouping_key(_second).window(WindowDefinition.session(3)).aggregate(no_combine)
    stamped.window(WindowDefinition.tumbling(4)).aggregate(no_combine).drain_to(Sinks.list("ok"))


def test_pipeline_drain_to_merges_stages_and_peek_filters_what_it_logs(
    engine: LocalEngine, caplog: Any
) -> None:
    engine.get_list("a").extend([1, 2])
    engine.get_list("b").extend([3])
    p = Pipeline.create()
    a = p.draw_from(Sources.list("a")).peek(lambda n: n > 1, lambda n: f"n={n}").set_name("a+")
    p.drain_to(Sinks.list("both"), a, p.draw_from(Sources.list("b")))
    with caplog.at_level("INFO", logger="jetspark"):
        engine.new_job(p).join(60)
    assert sorted(engine.get_list("both")) == [1, 2, 3]
    assert [r.getMessage() for r in caplog.records if "Output forwarded" in r.getMessage()] == [
        "Output forwarded: n=2"
    ]
    assert p.to_dot().startswith("digraph")


def test_a_keyed_custom_transform_gets_its_input_partitioned_by_the_key() -> None:
    from jetspark.processors import noop_p

    p = Pipeline.create()
    keyed = p.draw_from(Sources.list("words")).grouping_key(str.lower)
    keyed.custom_transform("mine", noop_p()).drain_to(Sinks.list("out"))
    assert shape(p)[0] == ("listSource(words)", "mine", "PARTITIONED", True, 0)


def _processor_type(vertex: Any) -> type:
    """The class of the processors a vertex's supplier makes on member 0."""
    from jetspark.core.suppliers import as_meta_supplier, as_processor_supplier

    per_member = as_meta_supplier(vertex.supplier, vertex.name).get([0])(0)
    return type(as_processor_supplier(per_member, vertex.name).get(1)[0])


def _plan(dag: Any) -> list[tuple[type, type, str, bool, int, Any]]:
    """Every edge as (source processor, destination processor, routing, distributed, priority,
    partitioner): what decides the cost of running a DAG, whatever its vertices are called."""
    return [
        (
            _processor_type(dag.get_vertex(e.source_name)),
            _processor_type(dag.get_vertex(e.dest_name)),
            e.routing_policy.name,
            e.is_distributed,
            e.get_priority(),
            e.partitioner,
        )
        for e in dag.edges()
    ]


def test_the_word_count_pipeline_plans_the_hand_built_dag_edge_for_edge(tmp_path: Any) -> None:
    """Benchmark row 18a's claim: the pipeline runs the very DAG of examples/wordcount.py (the
    same processors, routing, distribution, priorities and partitioners), so the two cost alike."""
    import importlib.util
    from pathlib import Path

    from jetspark.processors import read_files_p
    from jetspark.processors.functions import whole_item

    path = Path(__file__).parent.parent / "examples" / "wordcount.py"
    spec = importlib.util.spec_from_file_location("example_wordcount_planned", path)
    assert spec is not None and spec.loader is not None
    wordcount = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wordcount)

    p = Pipeline.create("word-count")
    (
        p.draw_from(Sources.files(str(tmp_path), shared_file_system=True))
        .flat_map(wordcount.words)
        .grouping_key(whole_item)
        .aggregate(counting())
        .drain_to(Sinks.map("counts"))
    )
    by_hand = wordcount.build_dag(source=read_files_p(str(tmp_path), shared_file_system=True))
    assert _plan(p.to_dag()) == _plan(by_hand)
