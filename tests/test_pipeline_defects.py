"""The Pipeline API review's defects (issue #43), each as its reproduction: a source drawn
twice, peek's argument order, float timestamps, a method a stage kind lacks, and an endless
journal function that has nothing yet."""

from __future__ import annotations

import time
from typing import Any

import pytest

from jetspark.core import JobCancelledError, JobFailedError, LocalEngine
from jetspark.core.pipeline import Pipeline, Sinks, Sources, WindowDefinition
from jetspark.processors.aggregate import counting

PATIENCE_SECONDS = 120.0
"""How long a test waits for a stream job's items (a failure bound, not a speed claim)."""


def test_one_source_drawn_twice_gives_two_vertices_and_every_item_twice() -> None:
    engine = LocalEngine()
    engine.get_list("xs")[:] = [1, 2, 3]
    p = Pipeline.create()
    source = Sources.list("xs")
    first, second = p.draw_from(source), p.draw_from(Sources.list("xs"))
    p.drain_to(Sinks.list("out"), first, second, p.draw_from(source))
    names = [v.name for v in p.to_dag().vertices()]
    assert [n for n in names if n.startswith("listSource")] == [
        "listSource(xs)",
        "listSource(xs)-2",
        "listSource(xs)-3",
    ]
    engine.new_job(p).join(60)
    assert sorted(engine.get_list("out")) == [1, 1, 1, 2, 2, 2, 3, 3, 3]


def test_peek_takes_jets_argument_order(caplog: Any) -> None:
    engine = LocalEngine()
    engine.get_list("xs")[:] = [1, 2, 3]
    p = Pipeline.create()
    numbers = p.draw_from(Sources.list("xs"))
    numbers.peek(lambda n: n != 2, lambda n: f"odd {n}").peek(lambda n: f"any {n}").drain_to(
        Sinks.list("out")
    )
    with caplog.at_level("INFO", logger="jetspark"):
        engine.new_job(p).join(60)
    logged = sorted(r.getMessage() for r in caplog.records if "Output forwarded" in r.getMessage())
    assert logged == [
        f"Output forwarded: {text}"
        for text in sorted(["odd 1", "odd 3", "any 1", "any 2", "any 3"])
    ]


def test_peek_with_three_functions_is_refused_naming_the_forms() -> None:
    stage = Pipeline.create().draw_from(Sources.list("xs"))
    with pytest.raises(TypeError, match=r"peek\(should_log_fn, to_string_fn\)"):
        stage.peek(str, str, str)


def _float_time(item: float) -> float:
    return item


def test_float_timestamps_are_floored_to_milliseconds() -> None:
    engine = LocalEngine()
    engine.get_list("xs")[:] = [0.5, 9.99, 10.0, 25.5]
    p = Pipeline.create()
    stamped = p.draw_from(Sources.list("xs")).add_timestamps(_float_time, 100)
    stamped.window(WindowDefinition.tumbling(10)).aggregate(counting()).drain_to(
        Sinks.list("counts")
    )
    engine.new_job(p).join(60)
    assert sorted(engine.get_list("counts")) == [(10, 2), (20, 1), (30, 1)]


def test_a_timestamp_of_another_type_fails_naming_the_stage_and_the_item() -> None:
    engine = LocalEngine()
    engine.get_list("xs")[:] = ["noon"]
    p = Pipeline.create()
    stamped = p.draw_from(Sources.list("xs")).add_timestamps(_float_time, 0)
    stamped.window(WindowDefinition.tumbling(10)).aggregate(counting()).drain_to(
        Sinks.list("counts")
    )
    with pytest.raises(JobFailedError, match=r"stage 'listSource\(xs\)': timestamp_fn gave str"):
        engine.new_job(p).join(60)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda b: b.window, r"a BatchStage has no window\(\); StreamStage, StreamStageWithKey"),
        (lambda b: b.grouping_key(str).map, r"BatchStageWithKey has no map\(\).*before grouping"),
        (lambda b: b.frobnicate, r"'BatchStage' object has no attribute 'frobnicate'"),
    ],
)
def test_a_method_the_stage_kind_lacks_names_the_kinds_that_have_it(
    build: Any, message: str
) -> None:
    stage = Pipeline.create().draw_from(Sources.list("xs"))
    with pytest.raises(AttributeError, match=message):
        build(stage)


def _first_ten(offset: int) -> int | None:
    return offset if offset < 10 else None


def test_an_endless_journal_function_with_nothing_yet_leaves_the_loop_free() -> None:
    """Nothing at offset 10 and after: the source emits 0-9, then waits without spinning, so
    the job's cancel ends it (it hung in complete() before)."""
    engine = LocalEngine()
    p = Pipeline.create()
    p.draw_from(Sources.stream_journal(_first_ten)).drain_to(Sinks.list("out"))
    job = engine.new_job(p)
    deadline = time.monotonic() + PATIENCE_SECONDS
    while len(engine.get_list("out")) < 10:
        assert time.monotonic() < deadline and not job.status.is_terminal, job.status
        time.sleep(0.02)
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(PATIENCE_SECONDS)
    assert sorted(engine.get_list("out")) == list(range(10))


def test_a_hash_join_emits_one_item_per_duplicate_enriching_key_as_jet_4() -> None:
    from jetspark.core.pipeline import JoinClause

    engine = LocalEngine()
    engine.get_list("orders")[:] = [("o1", "apple"), ("o2", "pear"), ("o3", "kiwi")]
    engine.get_list("prices")[:] = [("apple", 1), ("apple", 2), ("pear", 3)]
    engine.get_list("stock")[:] = [("apple", "x"), ("apple", "y")]
    p = Pipeline.create()
    orders = p.draw_from(Sources.list("orders"))
    prices = p.draw_from(Sources.list("prices"))
    stock = p.draw_from(Sources.list("stock"))
    fruit = JoinClause.join_map_entries(lambda order: order[1])
    joined = orders.hash_join(prices, fruit, lambda o, price: None if price == 2 else (o[0], price))
    joined.drain_to(Sinks.list("one"))
    orders.hash_join2(prices, fruit, stock, fruit, lambda o, a, b: (o[0], a, b)).drain_to(
        Sinks.list("two")
    )
    engine.new_job(p).join(60)
    assert sorted(engine.get_list("one")) == [("o1", 1), ("o2", 3), ("o3", None)]
    assert sorted(engine.get_list("two"), key=str) == sorted(
        [
            ("o1", 1, "x"),
            ("o1", 1, "y"),
            ("o1", 2, "x"),
            ("o1", 2, "y"),
            ("o2", 3, None),
            ("o3", None, None),
        ],
        key=str,
    )


def test_drain_to_of_several_stages_plans_one_sink_vertex_with_an_edge_from_each() -> None:
    engine = LocalEngine()
    engine.get_list("a")[:] = [1, 2]
    engine.get_list("b")[:] = [3]
    engine.get_list("c")[:] = [4]
    p = Pipeline.create()
    stages = [p.draw_from(Sources.list(name)) for name in "abc"]
    p.drain_to(Sinks.list("all"), *stages)
    dag = p.to_dag()
    assert [v.name for v in dag.vertices()] == [
        "listSource(a)",
        "listSource(b)",
        "listSource(c)",
        "listSink(all)",
    ]
    assert sorted((e.source.name, e.dest_ordinal) for e in dag.edges()) == [
        ("listSource(a)", 0),
        ("listSource(b)", 1),
        ("listSource(c)", 2),
    ]
    engine.new_job(p).join(60)
    assert sorted(engine.get_list("all")) == [1, 2, 3, 4]


def test_drain_to_refuses_batch_and_stream_stages_together_naming_them() -> None:
    from jetspark.core import DagValidationError

    p = Pipeline.create()
    batch = p.draw_from(Sources.list("a"))
    stream = p.draw_from(Sources.stream_journal("b"))
    with pytest.raises(DagValidationError, match=r"batch and stream stages together.*BatchStage"):
        p.drain_to(Sinks.list("all"), batch, stream)


def test_drain_to_refuses_a_stage_of_another_pipeline() -> None:
    from jetspark.core import DagValidationError

    first, second = Pipeline.create(), Pipeline.create()
    stage = first.draw_from(Sources.list("a"))
    with pytest.raises(DagValidationError, match="belong to different pipelines"):
        second.drain_to(Sinks.list("all"), stage)


@pytest.mark.parametrize(
    ("operation", "fix"),
    [
        ("aggregate2", r"stage.grouping_key\(fn\).aggregate2\(other.grouping_key\(fn\)"),
        ("hash_join", r"pass the stage itself \(its items are matched by the JoinClause"),
        ("merge", r"pass the stage itself, without grouping_key"),
    ],
)
def test_a_keyed_stage_where_an_ungrouped_one_is_taken_is_named_with_the_fix(
    operation: str, fix: str
) -> None:
    from jetspark.core import DagValidationError
    from jetspark.core.pipeline import JoinClause
    from jetspark.processors.aggregate import aggregate_operation2

    p = Pipeline.create()
    first, keyed = p.draw_from(Sources.list("a")), p.draw_from(Sources.list("b")).grouping_key(str)
    calls = {
        "aggregate2": lambda: first.aggregate2(keyed, aggregate_operation2(counting(), counting())),
        "hash_join": lambda: first.hash_join(keyed, JoinClause.join_map_entries(str), max),
        "merge": lambda: first.merge(keyed),
    }
    with pytest.raises(DagValidationError, match=r"got stage 'listSource\(b\)' grouped by a key"):
        calls[operation]()
    with pytest.raises(DagValidationError, match=fix):
        calls[operation]()
