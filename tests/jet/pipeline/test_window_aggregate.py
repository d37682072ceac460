"""Port of Jet 0.7.1 `com.hazelcast.jet.pipeline.WindowAggregateTest`.

Windows without a grouping key: one result per window, `TimestampedItem(window end, result)`
or what the output function makes of `(start, end, result)`. The items are their own
timestamps. On LocalEngine(2) the sources are followed for ever and closed by CLOSING_ITEMS,
as in Jet; on SparkEngine the tests taking `window_run` read bounded sources to their end.

Deliberate difference: Jet's `when_setWindowDefinition_then_windowDefinitionReturnsIt` windows
a stage without timestamps; jetspark refuses that at once, so the port adds timestamps first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jetspark.core import LocalEngine
from jetspark.core.pipeline import (
    Pipeline,
    Sinks,
    Sources,
    TimestampedItem,
    WindowDefinition,
    co_aggregate_operation_builder,
)
from jetspark.processors.aggregate import (
    aggregate_operation2,
    aggregate_operation3,
    counting,
    summing,
)
from jetspark.processors.functions import whole_item

from .support import (
    EARLY_LAG,
    EARLY_RESULTS_PERIOD,
    MAX_LAG,
    STREAM_ITEM_COUNT,
    WindowRun,
    latest_results_until,
    run_until,
    sequence,
    window_sums,
)

pytestmark = pytest.mark.timeout(180)

INPUT = sequence(STREAM_ITEM_COUNT)
WIN_SIZE = 4
FILTERED_WINDOW_START = 0
"""The output functions map the window starting here to None, which drops it."""


def timestamped(run: WindowRun, pipeline: Pipeline, name: str, items: list[int]) -> Any:
    """The source `name` of `items`, each item its own timestamp."""
    return run.source(pipeline, name, items).add_timestamps(whole_item, MAX_LAG)


def fmt(timestamp: int, value: Any) -> str:
    """Jet's `formatFn`."""
    return f"({timestamp:03d}, {value:03d})"


def tumbling_sums() -> dict[tuple[int, int], int]:
    return window_sums(INPUT, WIN_SIZE, WIN_SIZE)


def test_when_set_window_definition_then_window_definition_returns_it() -> None:
    """`WindowAggregateTest.when_setWindowDefinition_then_windowDefinitionReturnsIt`."""
    tumbling = WindowDefinition.tumbling(2)
    stage = Pipeline.create().draw_from(Sources.stream_journal("src"))
    windowed = stage.add_timestamps(whole_item, 0).window(tumbling)
    assert windowed.window_definition == tumbling


def test_distinct(window_run: WindowRun) -> None:
    """`WindowAggregateTest.distinct`: every item twice per window, each once out."""
    win_size = STREAM_ITEM_COUNT // 2
    timestamps = [i for i in INPUT for _ in range(2)]
    p = Pipeline.create()
    stream = timestamped(window_run, p, "src", timestamps).map(lambda i: i % win_size)
    stream.window(WindowDefinition.tumbling(win_size)).distinct().drain_to(Sinks.list("sink"))
    expected = {TimestampedItem(win_size + i - i % win_size, i % win_size) for i in timestamps}
    window_run.run_expecting(p, list(expected))


def test_distinct_with_output_fn(stream_run: WindowRun) -> None:
    """`WindowAggregateTest.distinct_withOutputFn`: one item per key and window, given to the
    output function (`None` drops it)."""
    win_size = STREAM_ITEM_COUNT
    p = Pipeline.create()
    stream = timestamped(stream_run, p, "src", sequence(2 * STREAM_ITEM_COUNT))
    distinct = (
        stream.window(WindowDefinition.tumbling(win_size))
        .grouping_key(lambda i: i // 2)
        .distinct(
            lambda start, end, item: None if start == FILTERED_WINDOW_START else fmt(end, item // 2)
        )
    )
    distinct.drain_to(Sinks.list("sink"))
    expected = {
        fmt(win_size + i - i % win_size, i // 2)
        for i in range(2 * STREAM_ITEM_COUNT)
        if i - i % win_size != FILTERED_WINDOW_START
    }
    stream_run.run_expecting(p, list(expected))


def test_tumbling_window(window_run: WindowRun) -> None:
    """`WindowAggregateTest.tumblingWindow`."""
    p = Pipeline.create()
    stream = timestamped(window_run, p, "src", INPUT)
    stream.window(WindowDefinition.tumbling(WIN_SIZE)).aggregate(
        summing(), lambda start, end, total: fmt(end, total)
    ).drain_to(Sinks.list("sink"))
    expected = [fmt(end, total) for (_, end), total in tumbling_sums().items()]
    window_run.run_expecting(p, expected)


def test_sliding_window(window_run: WindowRun) -> None:
    """`WindowAggregateTest.slidingWindow`: the windows overhanging the first and the last
    item too."""
    slide_by = 2
    p = Pipeline.create()
    stream = timestamped(window_run, p, "src", INPUT)
    stream.window(WindowDefinition.sliding(WIN_SIZE, slide_by)).aggregate(
        summing(),
        lambda start, end, total: None if start == FILTERED_WINDOW_START else fmt(end, total),
    ).drain_to(Sinks.list("sink"))
    sums = window_sums(INPUT, WIN_SIZE, slide_by)
    expected = [
        fmt(end, total) for (start, end), total in sums.items() if start != FILTERED_WINDOW_START
    ]
    assert any(start < 0 for start, _ in sums)
    window_run.run_expecting(p, expected)


def test_session_window(window_run: WindowRun) -> None:
    """`WindowAggregateTest.sessionWindow`: bursts of 4 items, 3 apart, are sessions."""
    session_length, session_timeout = 4, 2
    input_ = [ts + (ts // session_length) * session_timeout for ts in INPUT]
    p = Pipeline.create()
    stream = timestamped(window_run, p, "src", input_)
    stream.window(WindowDefinition.session(session_timeout)).aggregate(
        summing(),
        lambda start, end, total: None if start == FILTERED_WINDOW_START else fmt(start, total),
    ).drain_to(Sinks.list("sink"))
    sessions: dict[int, int] = {}
    for n in range(0, STREAM_ITEM_COUNT, session_length):
        burst = input_[n : n + session_length]
        sessions[burst[0]] = sum(burst)
    expected = [fmt(start, total) for start, total in sessions.items() if start != 0]
    window_run.run_expecting(p, expected)


def early_stream(engine: LocalEngine, p: Pipeline, items: list[int] = INPUT) -> Any:
    """The journal "src" of `items` stamped with a lag that keeps every window open (Jet's
    `streamStageFromList(input, EARLY_RESULTS_PERIOD)`)."""
    engine.get_list("src").extend(items)
    return p.draw_from(Sources.stream_journal("src")).add_timestamps(whole_item, EARLY_LAG)


def early_window(definition: WindowDefinition) -> WindowDefinition:
    return definition.set_early_results_period(EARLY_RESULTS_PERIOD)


@pytest.mark.parametrize("slide_by", [WIN_SIZE, 2], ids=["tumbling", "sliding"])
def test_sliding_window_with_early_results(slide_by: int) -> None:
    """`WindowAggregateTest.tumblingWindow_withEarlyResults` and
    `slidingWindow_withEarlyResults` (Jet 4): the lag keeps every window open, so only early
    results show them; the latest result of each window is its sum, each marked early."""
    engine = LocalEngine(members=2)
    p = Pipeline.create()
    window = early_window(WindowDefinition.sliding(WIN_SIZE, slide_by))
    early_stream(engine, p).window(window).aggregate(summing()).drain_to(Sinks.list("sink"))
    expected = {end: total for (_, end), total in window_sums(INPUT, WIN_SIZE, slide_by).items()}
    results = latest_results_until(engine, p, expected, lambda r: r.timestamp, lambda r: r.item)
    assert all(r.is_early for r in results)


def test_session_window_with_early_results() -> None:
    """`WindowAggregateTest.sessionWindow_withEarlyResults` (Jet 4): bursts of 4 items, 3
    apart; the early results of complete sessions only (Jet filters out the rest), the latest
    of each session its sum."""
    session_length, session_timeout = 4, 2
    input_ = [ts + (ts // session_length) * session_timeout for ts in INPUT]
    engine = LocalEngine(members=2)
    p = Pipeline.create()
    window = early_window(WindowDefinition.session(session_timeout))
    early_stream(engine, p, input_).window(window).aggregate(
        summing(),
        lambda start, end, total: (
            (start, total) if end - start == session_length + session_timeout - 1 else None
        ),
    ).drain_to(Sinks.list("sink"))
    expected = {
        input_[n]: sum(input_[n : n + session_length])
        for n in range(0, STREAM_ITEM_COUNT, session_length)
    }
    latest_results_until(engine, p, expected, lambda r: r[0], lambda r: r[1])


@pytest.mark.parametrize(
    "window", [WindowDefinition.tumbling(10), WindowDefinition.session(10)], ids=repr
)
def test_when_win_with_early_results_then_emit_repeatedly(window: WindowDefinition) -> None:
    """`WindowAggregateTest.when_tumblingWinWithEarlyResults_then_emitRepeatedly` and
    `when_sessionWinWithEarlyResults_then_emitRepeatedly` (Jet 4): one item in a window that
    never closes is reported early again every period, each report the same."""
    engine = LocalEngine(members=2)
    p = Pipeline.create()
    stream = early_stream(engine, p, [0]).window(window.set_early_results_period(50))
    stream.aggregate(counting()).drain_to(Sinks.list("sink"))
    results = run_until(engine, p, "sink", 10)
    assert all(r == TimestampedItem(10, 1) and r.is_early for r in results)


def two_windowed(run: WindowRun, p: Pipeline) -> tuple[Any, Any]:
    """A tumbling-windowed stage of INPUT, and a second stream of INPUT to co-aggregate."""
    stage0 = timestamped(run, p, "src", INPUT).window(WindowDefinition.tumbling(WIN_SIZE))
    return stage0, timestamped(run, p, "src1", INPUT)


AGGREGATE2_FORMS: dict[str, Callable[[Any, Any], Any]] = {
    "with_separate_aggr_ops": lambda s0, s1: s0.aggregate2(summing(), s1, summing()),
    "with_aggr_op2": lambda s0, s1: s0.aggregate2(s1, aggregate_operation2(summing(), summing())),
}


@pytest.mark.parametrize("form", AGGREGATE2_FORMS)
def test_aggregate2(stream_run: WindowRun, form: str) -> None:
    """`WindowAggregateTest.aggregate2_withSeparateAggrOps`, `aggregate2_withAggrOp2`:
    `TimestampedItem(end, (sum0, sum1))` per window."""
    p = Pipeline.create()
    AGGREGATE2_FORMS[form](*two_windowed(stream_run, p)).drain_to(Sinks.list("sink"))
    expected = [TimestampedItem(end, (s, s)) for (_, end), s in tumbling_sums().items()]
    stream_run.run_expecting(p, expected)


def test_aggregate2_with_separate_aggr_ops_on_every_engine(window_run: WindowRun) -> None:
    """`WindowAggregateTest.aggregate2_withSeparateAggrOps`, on LocalEngine and Spark."""
    test_aggregate2(window_run, "with_separate_aggr_ops")


def fmt_sums(timestamp: int, sums: tuple[int, ...]) -> str:
    """Jet's `formatFn` of the co-aggregating tests."""
    return f"({timestamp:03d}: {', '.join(f'{s:03d}' for s in sums)})"


def unless_filtered(start: int, end: int, sums: tuple[int, ...]) -> str | None:
    return None if start == FILTERED_WINDOW_START else fmt_sums(end, sums)


AGGREGATE2_OUTPUT_FORMS: dict[str, Callable[[Any, Any], Any]] = {
    "with_separate_aggr_ops_with_output_fn": lambda s0, s1: s0.aggregate2(
        summing(), s1, summing(), lambda start, end, r0, r1: unless_filtered(start, end, (r0, r1))
    ),
    "with_aggr_op2_with_output_fn": lambda s0, s1: s0.aggregate2(
        s1, aggregate_operation2(summing(), summing()), unless_filtered
    ),
}


def expected_formatted(inputs: int) -> list[str]:
    """Every tumbling window but the filtered one, as `fmt_sums` formats its sums."""
    return [
        fmt_sums(end, (s,) * inputs)
        for (start, end), s in tumbling_sums().items()
        if start != FILTERED_WINDOW_START
    ]


@pytest.mark.parametrize("form", AGGREGATE2_OUTPUT_FORMS)
def test_aggregate2_with_output_fn(stream_run: WindowRun, form: str) -> None:
    """`WindowAggregateTest.aggregate2_withSeparateAggrOps_withOutputFn` (`fn(start, end, r0,
    r1)`), `aggregate2_withAggrOp2_withOutputFn` (`fn(start, end, (r0, r1))`)."""
    p = Pipeline.create()
    AGGREGATE2_OUTPUT_FORMS[form](*two_windowed(stream_run, p)).drain_to(Sinks.list("sink"))
    stream_run.run_expecting(p, expected_formatted(2))


def three_windowed(run: WindowRun, p: Pipeline) -> tuple[Any, Any, Any]:
    stage0, stage1 = two_windowed(run, p)
    return stage0, stage1, timestamped(run, p, "src2", INPUT)


AGGREGATE3_FORMS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "with_separate_aggr_ops": lambda s0, s1, s2: s0.aggregate3(
        summing(), s1, summing(), s2, summing()
    ),
    "with_aggr_op3": lambda s0, s1, s2: s0.aggregate3(
        s1, s2, aggregate_operation3(summing(), summing(), summing())
    ),
}


@pytest.mark.parametrize("form", AGGREGATE3_FORMS)
def test_aggregate3(stream_run: WindowRun, form: str) -> None:
    """`WindowAggregateTest.aggregate3_withSeparateAggrOps`, `aggregate3_withAggrOp3`."""
    p = Pipeline.create()
    AGGREGATE3_FORMS[form](*three_windowed(stream_run, p)).drain_to(Sinks.list("sink"))
    expected = [TimestampedItem(end, (s, s, s)) for (_, end), s in tumbling_sums().items()]
    stream_run.run_expecting(p, expected)


AGGREGATE3_OUTPUT_FORMS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "with_separate_aggr_ops_with_output_fn": lambda s0, s1, s2: s0.aggregate3(
        summing(),
        s1,
        summing(),
        s2,
        summing(),
        lambda start, end, r0, r1, r2: unless_filtered(start, end, (r0, r1, r2)),
    ),
    "with_aggr_op3_with_output_fn": lambda s0, s1, s2: s0.aggregate3(
        s1, s2, aggregate_operation3(summing(), summing(), summing()), unless_filtered
    ),
}


@pytest.mark.parametrize("form", AGGREGATE3_OUTPUT_FORMS)
def test_aggregate3_with_output_fn(stream_run: WindowRun, form: str) -> None:
    """`WindowAggregateTest.aggregate3_withSeparateAggrOps_withOutputFn`,
    `aggregate3_withAggrOp3_withOutputFn`."""
    p = Pipeline.create()
    AGGREGATE3_OUTPUT_FORMS[form](*three_windowed(stream_run, p)).drain_to(Sinks.list("sink"))
    stream_run.run_expecting(p, expected_formatted(3))


def test_aggregate_builder_with_separate_aggr_ops(stream_run: WindowRun) -> None:
    """`WindowAggregateTest.aggregateBuilder_withSeparateAggrOps`: `fn(start, end,
    items_by_tag)` per window."""
    p = Pipeline.create()
    stage0, stage1 = two_windowed(stream_run, p)
    builder = stage0.aggregate_builder(summing())
    tag0 = builder.tag0()
    tag1 = builder.add(stage1, summing())
    builder.build(
        lambda start, end, by_tag: unless_filtered(start, end, (by_tag[tag0], by_tag[tag1]))
    ).drain_to(Sinks.list("sink"))
    stream_run.run_expecting(p, expected_formatted(2))


def test_aggregate_builder_with_complex_aggr_op(stream_run: WindowRun) -> None:
    """`WindowAggregateTest.aggregateBuilder_withComplexAggrOp`: `aggregate_builder()` and one
    operation of both inputs from `co_aggregate_operation_builder()`."""
    p = Pipeline.create()
    stage0, stage1 = two_windowed(stream_run, p)
    builder = stage0.aggregate_builder()
    in_tag0, in_tag1 = builder.tag0(), builder.add(stage1)
    operations = co_aggregate_operation_builder()
    tag0 = operations.add(in_tag0, summing())
    tag1 = operations.add(in_tag1, summing())
    builder.build(
        operations.build(),
        lambda start, end, by_tag: unless_filtered(start, end, (by_tag[tag0], by_tag[tag1])),
    ).drain_to(Sinks.list("sink"))
    stream_run.run_expecting(p, expected_formatted(2))
