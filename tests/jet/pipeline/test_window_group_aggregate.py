"""Port of Jet 0.7.1 `com.hazelcast.jet.pipeline.WindowGroupAggregateTest`.

Windows per grouping key: each input item i becomes the entries ("a", i) and ("b", i), its
timestamp i; one result per window and key, `TimestampedEntry(window end, key, result)` or what
the output function makes of `(start, end, key, result)`. On LocalEngine(2) the sources are
followed for ever and closed by CLOSING_ITEMS, as in Jet; on SparkEngine the tests taking
`window_run` read bounded sources to their end.

Jet groups after windowing (`stage.window(w).groupingKey(k)`) in most of these tests; the port
does so in `test_sliding_window[window_then_grouping_key]` and groups first
(`stage.grouping_key(k).window(w)`, the same stage in Jet) elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jetspark.core import LocalEngine
from jetspark.core.pipeline import (
    ItemsByTag,
    Pipeline,
    Sinks,
    Sources,
    TimestampedEntry,
    TimestampedItem,
    WindowDefinition,
    co_aggregate_operation_builder,
)
from jetspark.processors.aggregate import (
    aggregate_operation2,
    aggregate_operation3,
    mapping,
    summing,
    to_list,
    to_set,
)
from jetspark.processors.functions import entry_key, entry_value, whole_item

from .support import (
    EARLY_LAG,
    EARLY_RESULTS_PERIOD,
    MAX_LAG,
    STREAM_ITEM_COUNT,
    WindowRun,
    latest_results_until,
    sequence,
    window_sums,
)

pytestmark = pytest.mark.timeout(180)

INPUT = sequence(STREAM_ITEM_COUNT)
KEYS = ("a", "b")
WIN_SIZE = 4
FILTERED_WINDOW_START = 0
"""The output functions map the windows starting here to None, which drops them."""


def keyed_source(run: WindowRun, p: Pipeline, name: str, items: list[int] = INPUT) -> Any:
    """The timestamped source `name` of `items`, each as the entries ("a", i) and ("b", i)
    (Jet's `addKeys`)."""
    stamped = run.source(p, name, items).add_timestamps(whole_item, MAX_LAG)
    return stamped.flat_map(lambda i: [(key, i) for key in KEYS])


def fmt(timestamp: int, key: str, result: str) -> str:
    """Jet's `formatFn`."""
    return f"({timestamp:03d}, {key}, {result})"


def tumbling_sums() -> dict[tuple[int, int], int]:
    return window_sums(INPUT, WIN_SIZE, WIN_SIZE)


def test_window_definition() -> None:
    """`WindowGroupAggregateTest.windowDefinition`."""
    tumbling = WindowDefinition.tumbling(2)
    stage = Pipeline.create().draw_from(Sources.stream_journal("src"))
    keyed = stage.add_timestamps(whole_item, 0).grouping_key(whole_item)
    assert keyed.window(tumbling).window_definition == tumbling


def test_tumbling_window(window_run: WindowRun) -> None:
    """`WindowGroupAggregateTest.tumblingWindow`."""
    p = Pipeline.create()
    keyed = keyed_source(window_run, p, "src").grouping_key(entry_key)
    keyed.window(WindowDefinition.tumbling(WIN_SIZE)).aggregate(
        summing(entry_value), lambda start, end, key, total: fmt(end, key, str(total))
    ).drain_to(Sinks.list("sink"))
    expected = [
        fmt(end, key, str(total)) for (_, end), total in tumbling_sums().items() for key in KEYS
    ]
    window_run.run_expecting(p, expected)


ORDERS: dict[str, Callable[[Any, WindowDefinition], Any]] = {
    "grouping_key_then_window": lambda stage, w: stage.grouping_key(entry_key).window(w),
    "window_then_grouping_key": lambda stage, w: stage.window(w).grouping_key(entry_key),
}


@pytest.mark.parametrize("order", ORDERS)
def test_sliding_window(stream_run: WindowRun, order: str) -> None:
    """`WindowGroupAggregateTest.slidingWindow`: the windows overhanging the first and the
    last item too; the one starting at 0 mapped to None."""
    slide_by = 2
    p = Pipeline.create()
    windowed = ORDERS[order](
        keyed_source(stream_run, p, "src"), WindowDefinition.sliding(WIN_SIZE, slide_by)
    )
    windowed.aggregate(
        summing(entry_value),
        lambda start, end, key, total: (
            None if start == FILTERED_WINDOW_START else fmt(end, key, str(total))
        ),
    ).drain_to(Sinks.list("sink"))
    expected = [
        fmt(end, key, str(total))
        for (start, end), total in window_sums(INPUT, WIN_SIZE, slide_by).items()
        for key in KEYS
        if start != FILTERED_WINDOW_START
    ]
    stream_run.run_expecting(p, expected)


def test_sliding_window_on_every_engine(window_run: WindowRun) -> None:
    """`WindowGroupAggregateTest.slidingWindow`, on LocalEngine and Spark."""
    test_sliding_window(window_run, "grouping_key_then_window")


def test_sliding_window_two_aggregations(stream_run: WindowRun) -> None:
    """`WindowGroupAggregateTest.slidingWindow_twoAggregations`: the results of one window
    are timestamped (Jet: the window's end - 1), so a second window aggregates them."""
    p = Pipeline.create()
    stamped = stream_run.source(p, "src", [0, 1, 2]).add_timestamps(whole_item, 0)
    keyed = stamped.flat_map(lambda i: [("a", f"a{i}"), ("b", f"b{i}")]).grouping_key(entry_key)
    sliding = keyed.window(WindowDefinition.sliding(2, 1)).aggregate(
        mapping(entry_value, to_list())
    )
    lists = sliding.map(lambda result: tuple(result.value))
    lists.window(WindowDefinition.tumbling(1)).aggregate(to_set()).drain_to(Sinks.list("sink"))
    assert stream_run.run(p, 4) == [
        TimestampedItem(1, {("a0",), ("b0",)}),
        TimestampedItem(2, {("a0", "a1"), ("b0", "b1")}),
        TimestampedItem(3, {("a1", "a2"), ("b1", "b2")}),
        TimestampedItem(4, {("a2",), ("b2",)}),
    ]


def test_session_window(window_run: WindowRun) -> None:
    """`WindowGroupAggregateTest.sessionWindow`: bursts of 4 items, 3 apart, are sessions."""
    session_length, session_timeout = 4, 2
    input_ = [ts + (ts // session_length) * session_timeout for ts in INPUT]
    p = Pipeline.create()
    keyed = keyed_source(window_run, p, "src", input_).grouping_key(entry_key)
    keyed.window(WindowDefinition.session(session_timeout)).aggregate(
        summing(entry_value),
        lambda start, end, key, total: None if start == 0 else fmt(start, key, str(total)),
    ).drain_to(Sinks.list("sink"))
    expected = []
    for n in range(session_length, STREAM_ITEM_COUNT, session_length):
        burst = input_[n : n + session_length]
        expected += [fmt(burst[0], key, str(sum(burst))) for key in KEYS]
    window_run.run_expecting(p, expected)


def co_grouped(run: WindowRun, p: Pipeline, inputs: int) -> list[Any]:
    """The first keyed source windowed (tumbling), then `inputs - 1` more keyed sources."""
    stages = [keyed_source(run, p, f"src{n}").grouping_key(entry_key) for n in range(inputs)]
    stages[0] = stages[0].window(WindowDefinition.tumbling(WIN_SIZE))
    return stages


AGGREGATE2_FORMS: dict[str, Callable[[Any, Any], Any]] = {
    "with_separate_aggr_ops": lambda s0, s1: s0.aggregate2(
        summing(entry_value), s1, summing(entry_value)
    ),
    "with_aggr_op2": lambda s0, s1: s0.aggregate2(
        s1, aggregate_operation2(summing(entry_value), summing(entry_value))
    ),
}


@pytest.mark.parametrize("form", AGGREGATE2_FORMS)
def test_aggregate2(stream_run: WindowRun, form: str) -> None:
    """`WindowGroupAggregateTest.aggregate2_withSeparateAggrOps`, `aggregate2_withAggrOp2`:
    `TimestampedEntry(end, key, (sum0, sum1))`."""
    p = Pipeline.create()
    AGGREGATE2_FORMS[form](*co_grouped(stream_run, p, 2)).drain_to(Sinks.list("sink"))
    expected = [
        TimestampedEntry(end, key, (s, s))
        for (_, end), s in tumbling_sums().items()
        for key in KEYS
    ]
    stream_run.run_expecting(p, expected)


def test_aggregate2_with_separate_aggr_ops_on_every_engine(window_run: WindowRun) -> None:
    """`WindowGroupAggregateTest.aggregate2_withSeparateAggrOps`, on LocalEngine and Spark."""
    test_aggregate2(window_run, "with_separate_aggr_ops")


def unless_filtered(start: int, end: int, key: str, sums: tuple[int, ...]) -> str | None:
    return None if start == FILTERED_WINDOW_START else fmt(end, key, ",".join(map(str, sums)))


def expected_formatted(inputs: int) -> list[str]:
    """Every tumbling window and key but the filtered windows, formatted."""
    return [
        fmt(end, key, ",".join([str(s)] * inputs))
        for (start, end), s in tumbling_sums().items()
        for key in KEYS
        if start != FILTERED_WINDOW_START
    ]


AGGREGATE2_OUTPUT_FORMS: dict[str, Callable[[Any, Any], Any]] = {
    "with_separate_aggr_ops_with_output_fn": lambda s0, s1: s0.aggregate2(
        summing(entry_value),
        s1,
        summing(entry_value),
        lambda start, end, key, r0, r1: unless_filtered(start, end, key, (r0, r1)),
    ),
    "with_aggr_op2_with_output_fn": lambda s0, s1: s0.aggregate2(
        s1, aggregate_operation2(summing(entry_value), summing(entry_value)), unless_filtered
    ),
}


@pytest.mark.parametrize("form", AGGREGATE2_OUTPUT_FORMS)
def test_aggregate2_with_output_fn(stream_run: WindowRun, form: str) -> None:
    """`WindowGroupAggregateTest.aggregate2_withSeparateAggrOps_withOutputFn` (`fn(start, end,
    key, r0, r1)`), `aggregate2_withAggrOp2_withOutputFn` (`fn(start, end, key, (r0, r1))`)."""
    p = Pipeline.create()
    AGGREGATE2_OUTPUT_FORMS[form](*co_grouped(stream_run, p, 2)).drain_to(Sinks.list("sink"))
    stream_run.run_expecting(p, expected_formatted(2))


AGGREGATE3_FORMS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "with_separate_aggr_ops": lambda s0, s1, s2: s0.aggregate3(
        summing(entry_value), s1, summing(entry_value), s2, summing(entry_value)
    ),
    "with_aggr_op3": lambda s0, s1, s2: s0.aggregate3(
        s1,
        s2,
        aggregate_operation3(summing(entry_value), summing(entry_value), summing(entry_value)),
    ),
}


@pytest.mark.parametrize("form", AGGREGATE3_FORMS)
def test_aggregate3(stream_run: WindowRun, form: str) -> None:
    """`WindowGroupAggregateTest.aggregate3_withSeparateAggrOps`, `aggregate3_withAggrOp2`
    (sic: it takes an operation of three inputs)."""
    p = Pipeline.create()
    AGGREGATE3_FORMS[form](*co_grouped(stream_run, p, 3)).drain_to(Sinks.list("sink"))
    expected = [
        TimestampedEntry(end, key, (s, s, s))
        for (_, end), s in tumbling_sums().items()
        for key in KEYS
    ]
    stream_run.run_expecting(p, expected)


AGGREGATE3_OUTPUT_FORMS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "with_separate_aggr_ops_with_output_fn": lambda s0, s1, s2: s0.aggregate3(
        summing(entry_value),
        s1,
        summing(entry_value),
        s2,
        summing(entry_value),
        lambda start, end, key, r0, r1, r2: unless_filtered(start, end, key, (r0, r1, r2)),
    ),
    "with_aggr_op3_with_output_fn": lambda s0, s1, s2: s0.aggregate3(
        s1,
        s2,
        aggregate_operation3(summing(entry_value), summing(entry_value), summing(entry_value)),
        unless_filtered,
    ),
}


@pytest.mark.parametrize("form", AGGREGATE3_OUTPUT_FORMS)
def test_aggregate3_with_output_fn(stream_run: WindowRun, form: str) -> None:
    """`WindowGroupAggregateTest.aggregate3_withSeparateAggrOps_withOutputFn`,
    `aggregate3_withAggrOp2_withOutputFn` (sic)."""
    p = Pipeline.create()
    AGGREGATE3_OUTPUT_FORMS[form](*co_grouped(stream_run, p, 3)).drain_to(Sinks.list("sink"))
    stream_run.run_expecting(p, expected_formatted(3))


def format_sums(tag0: Any, tag1: Any) -> Callable[[int, int, Any, ItemsByTag], str | None]:
    """Jet's format of both inputs' sums per window (the key left out), None for the filtered
    window."""
    return lambda start, end, key, by_tag: (
        None
        if start == FILTERED_WINDOW_START
        else f"({end:03d}: {by_tag[tag0]:03d}, {by_tag[tag1]:03d})"
    )


def expected_sums_per_key() -> list[str]:
    """What `format_sums` makes of every tumbling window, once per key."""
    return [
        f"({end:03d}: {s:03d}, {s:03d})"
        for (start, end), s in tumbling_sums().items()
        for _ in KEYS
        if start != FILTERED_WINDOW_START
    ]


def test_aggregate_builder_with_separate_aggr_ops(stream_run: WindowRun) -> None:
    """`WindowGroupAggregateTest.aggregateBuilder_withSeparateAggrOps`: `fn(start, end, key,
    items_by_tag)` per window and key (Jet's format leaves the key out)."""
    p = Pipeline.create()
    stage0, stage1 = co_grouped(stream_run, p, 2)
    builder = stage0.aggregate_builder(summing(entry_value))
    tag0 = builder.tag0()
    tag1 = builder.add(stage1, summing(entry_value))
    builder.build(format_sums(tag0, tag1)).drain_to(Sinks.list("sink"))
    stream_run.run_expecting(p, expected_sums_per_key())


def test_aggregate_builder_with_complex_aggr_op(stream_run: WindowRun) -> None:
    """`WindowGroupAggregateTest.aggregateBuilder_withComplexAggrOp`: `fn(start, end, key,
    items_by_tag)` of one operation over both inputs, per window and key."""
    p = Pipeline.create()
    stage0, stage1 = co_grouped(stream_run, p, 2)
    builder = stage0.aggregate_builder()
    in_tag0, in_tag1 = builder.tag0(), builder.add(stage1)
    operations = co_aggregate_operation_builder()
    tag0 = operations.add(in_tag0, summing(entry_value))
    tag1 = operations.add(in_tag1, summing(entry_value))
    builder.build(operations.build(), format_sums(tag0, tag1)).drain_to(Sinks.list("sink"))
    stream_run.run_expecting(p, expected_sums_per_key())


def early_keyed_source(engine: Any, p: Pipeline, items: list[int] = INPUT) -> Any:
    """The journal "src" of `items` stamped with a lag that keeps every window open, each item
    as the entries ("a", i) and ("b", i), grouped by key (Jet's fixture with early results)."""
    engine.get_list("src").extend(items)
    stamped = p.draw_from(Sources.stream_journal("src")).add_timestamps(whole_item, EARLY_LAG)
    return stamped.flat_map(lambda i: [(key, i) for key in KEYS]).grouping_key(entry_key)


def early_window(definition: WindowDefinition) -> WindowDefinition:
    return definition.set_early_results_period(EARLY_RESULTS_PERIOD)


def test_tumbling_window_with_early_results() -> None:
    """`WindowGroupAggregateTest.tumblingWindow_withEarlyResults` (Jet 4): the lag keeps every
    window open, so only early results can show them; the latest result of each window and
    key is the window's sum, and every result is marked early."""
    engine = LocalEngine(members=2)
    p = Pipeline.create()
    keyed = early_keyed_source(engine, p)
    keyed.window(early_window(WindowDefinition.tumbling(WIN_SIZE))).aggregate(
        summing(entry_value)
    ).drain_to(Sinks.list("sink"))
    expected = {(end, key): total for (_, end), total in tumbling_sums().items() for key in KEYS}
    results = latest_results_until(engine, p, expected, lambda r: (r.timestamp, r.key), by_value)
    assert all(r.is_early for r in results)


def test_sliding_window_with_early_results() -> None:
    """`WindowGroupAggregateTest.slidingWindow_withEarlyResults` (Jet 4): every open sliding
    window's latest early result per key is its sum, the windows overhanging the first and
    the last item too."""
    slide_by = 2
    engine = LocalEngine(members=2)
    p = Pipeline.create()
    keyed = early_keyed_source(engine, p)
    keyed.window(early_window(WindowDefinition.sliding(WIN_SIZE, slide_by))).aggregate(
        summing(entry_value)
    ).drain_to(Sinks.list("sink"))
    sums = window_sums(INPUT, WIN_SIZE, slide_by)
    expected = {(end, key): total for (_, end), total in sums.items() for key in KEYS}
    results = latest_results_until(engine, p, expected, lambda r: (r.timestamp, r.key), by_value)
    assert all(r.is_early for r in results)


def test_session_window_with_early_results() -> None:
    """`WindowGroupAggregateTest.sessionWindow_withEarlyResults` (Jet 4): bursts of 4 items,
    3 apart; the early results of complete sessions only (Jet filters out the rest, "to get
    predictable results"), the latest per session and key its sum."""
    session_length, session_timeout = 4, 2
    input_ = [ts + (ts // session_length) * session_timeout for ts in INPUT]
    engine = LocalEngine(members=2)
    p = Pipeline.create()
    keyed = early_keyed_source(engine, p, input_)
    keyed.window(early_window(WindowDefinition.session(session_timeout))).aggregate(
        summing(entry_value),
        lambda start, end, key, total: (
            (start, key, total) if end - start == session_length + session_timeout - 1 else None
        ),
    ).drain_to(Sinks.list("sink"))
    expected = {
        (input_[n], key): sum(input_[n : n + session_length])
        for n in range(0, STREAM_ITEM_COUNT, session_length)
        for key in KEYS
    }
    latest_results_until(engine, p, expected, lambda r: (r[0], r[1]), lambda r: r[2])


def by_value(result: TimestampedEntry) -> Any:
    return result.value
