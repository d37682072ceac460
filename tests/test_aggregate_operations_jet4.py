"""Jet 4's aggregate operations (#43): `top_n`, `bottom_n`, `sorting`, `grouping_by`,
`concatenating`, `to_collection` and `all_of_builder`. Their results are Jet's, the same however
the items are split between accumulators and combined, they survive pickle and cloudpickle, and
they run through the Pipeline API."""

from __future__ import annotations

import itertools
import operator
import pickle
from collections import Counter, deque
from functools import reduce
from typing import Any

import pytest
from pyspark import cloudpickle

from jetspark.core import LocalEngine
from jetspark.core.pipeline import (
    ItemsByTag,
    Pipeline,
    Sinks,
    Sources,
    Tag,
    TimestampedItem,
    WindowDefinition,
    all_of_builder,
)
from jetspark.processors.aggregate import (
    AggregateOperation,
    aggregate_operation2,
    bottom_n,
    concatenating,
    counting,
    grouping_by,
    max_by,
    reducing,
    sorting,
    summing,
    to_collection,
    to_set,
    top_n,
)

first = operator.itemgetter(0)
second = operator.itemgetter(1)


def run(op: AggregateOperation, items: list[Any]) -> Any:
    """Accumulates `items` into a fresh accumulator of `op`."""
    return reduce(op.accumulate_fn(), items, op.create_fn())


def combined(op: AggregateOperation, chunks: list[list[Any]]) -> Any:
    """Accumulates each chunk separately and combines the accumulators from left to right."""
    combine = op.require_combine("the test")
    return reduce(combine, [run(op, chunk) for chunk in chunks])


def all_of_count_sum_max() -> AggregateOperation:
    builder = all_of_builder()
    assert builder.add(counting()) == Tag(0)
    assert builder.add(summing()) == Tag(1)
    assert builder.add(max_by()) == Tag(2)
    return builder.build()


def tags(*values: Any) -> ItemsByTag:
    return ItemsByTag({Tag(index): value for index, value in enumerate(values)})


# (operation, items, Jet's result); items whose results do not depend on their arrival order
ORDER_FREE = {
    "top_n": (top_n(3), [5, 1, 9, 3, 9, 2], [9, 9, 5]),
    "top_n equal items": (top_n(2), [4, 7, 7, 7, 1], [7, 7]),
    "top_n of fewer than n": (top_n(5), [2, 3, 1], [3, 2, 1]),
    "top_n of nothing": (top_n(3), [], []),
    "top_n by key": (top_n(2, second), [("a", 3), ("b", 9), ("c", 5)], [("b", 9), ("c", 5)]),
    "bottom_n": (bottom_n(3), [5, 1, 9, 3, 1, 2], [1, 1, 2]),
    "bottom_n of fewer than n": (bottom_n(4), [2, 3], [2, 3]),
    "bottom_n of nothing": (bottom_n(1), [], []),
    "bottom_n by key": (bottom_n(1, len), ["ccc", "a", "bb"], ["a"]),
    "sorting": (sorting(), [3, 1, 2, 1], [1, 1, 2, 3]),
    "sorting reversed by key": (sorting(len, reverse=True), ["bb", "a", "ccc"], ["ccc", "bb", "a"]),
    "sorting nothing": (sorting(), [], []),
    "grouping_by counting": (
        grouping_by(first, counting()),
        [("a", 1), ("b", 1), ("a", 2)],
        {"a": 2, "b": 1},
    ),
    "grouping_by to_set": (grouping_by(len, to_set()), ["x", "yy", "x"], {1: {"x"}, 2: {"yy"}}),
    "grouping_by nothing": (grouping_by(first, counting()), [], {}),
    "to_collection set": (to_collection(set), [1, 2, 1], {1, 2}),
    "to_collection of nothing": (to_collection(set), [], set()),
    "concatenating equal items": (concatenating("-", "<", ">"), ["a", "", "a"], "<a-a>"),
    "concatenating nothing": (concatenating(",", "(", ")"), [], "()"),
    "all_of_builder": (all_of_count_sum_max(), [10, 11], tags(2, 21, 11)),
    "all_of_builder of nothing": (all_of_count_sum_max(), [], tags(0, 0, None)),
}

# Jet's results where the arrival order matters: the items are split in order and combined
# from left to right, as a two-stage aggregation of an ordered input would
IN_ORDER = {
    # AggregateOperationsTest: concatenating (the last three: empty items add no delimiter)
    "concatenating": (concatenating(), ["A", "B"], "AB"),
    "concatenating delimiter": (concatenating(","), ["A", "B"], "A,B"),
    "concatenating prefix suffix": (concatenating(",", "(", ")"), ["A", "B"], "(A,B)"),
    "concatenating empty second": (concatenating(",", "(", ")"), ["A", ""], "(A)"),
    "concatenating empty first": (concatenating(",", "(", ")"), ["", "B"], "(B)"),
    "concatenating empty both": (concatenating(",", "(", ")"), ["", ""], "()"),
    "concatenating empty middle": (concatenating(", "), ["x", "", "", "y", "z"], "x, y, z"),
    # AggregateOperationsTest: groupingBy
    "grouping_by different keys": (
        grouping_by(first),
        [("a", 1), ("b", 1)],
        {"a": [("a", 1)], "b": [("b", 1)]},
    ),
    "grouping_by same key": (grouping_by(first), [("a", 1), ("a", 1)], {"a": [("a", 1)] * 2}),
    # on equal keys the item seen first is kept, and listed first
    "top_n ties": (top_n(2, len), ["bb", "aa", "c", "dd"], ["bb", "aa"]),
    "top_n ties listed in arrival order": (
        top_n(3, len),
        ["a", "bb", "cc", "d"],
        ["bb", "cc", "a"],
    ),
    "bottom_n ties": (bottom_n(2, len), ["bb", "a", "c", "d"], ["a", "c"]),
    "sorting is stable": (sorting(len), ["bb", "a", "cc", "b"], ["a", "b", "bb", "cc"]),
    "to_collection list": (to_collection(list), [3, 1, 3], [3, 1, 3]),
    "to_collection deque": (to_collection(deque), [3, 1], deque([3, 1])),
}

CASES = {**ORDER_FREE, **IN_ORDER}


@pytest.mark.parametrize(("op", "items", "expected"), CASES.values(), ids=CASES.keys())
def test_one_accumulator_and_two_halves_give_jets_result(op, items, expected):
    assert op.finish_fn(run(op, items)) == expected
    assert op.export_fn(run(op, items)) == expected
    for cut in range(len(items) + 1):
        assert op.finish_fn(combined(op, [items[:cut], items[cut:]])) == expected


@pytest.mark.parametrize(("op", "items", "expected"), CASES.values(), ids=CASES.keys())
def test_combining_three_parts_in_order_is_associative(op, items, expected):
    """(a + b) + c and a + (b + c), as combining windows' frames and members' results do."""
    combine = op.combine_fn
    for cut1, cut2 in itertools.combinations(range(len(items) + 1), 2):
        a, b, c = items[:cut1], items[cut1:cut2], items[cut2:]
        left_first = combine(combine(run(op, a), run(op, b)), run(op, c))
        right_first = combine(run(op, a), combine(run(op, b), run(op, c)))
        assert op.finish_fn(left_first) == op.finish_fn(right_first) == expected


@pytest.mark.parametrize(("op", "items", "expected"), ORDER_FREE.values(), ids=ORDER_FREE.keys())
def test_any_split_and_any_combining_order_give_the_same_result(op, items, expected):
    for cut1, cut2 in itertools.combinations(range(len(items) + 1), 2):
        chunks = [items[:cut1], items[cut1:cut2], items[cut2:]]
        for order in itertools.permutations(chunks):
            assert op.finish_fn(combined(op, list(order))) == expected
    for order in itertools.permutations(items):
        assert op.finish_fn(run(op, list(order))) == expected


NONEMPTY = {name: case for name, case in CASES.items() if case[1]}


@pytest.mark.parametrize(("op", "items", "expected"), NONEMPTY.values(), ids=NONEMPTY.keys())
def test_export_leaves_the_accumulator_usable_and_combine_leaves_other_alone(op, items, expected):
    acc = run(op, items[:-1])
    op.export_fn(acc)
    assert op.finish_fn(op.accumulate_fn()(acc, items[-1])) == expected
    other = run(op, items[1:])
    before = op.export_fn(other)
    acc = op.combine_fn(run(op, items[:1]), other)
    reduce(op.accumulate_fn(), items, acc)
    assert op.export_fn(other) == before


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
@pytest.mark.parametrize(("op", "items", "expected"), CASES.values(), ids=CASES.keys())
def test_operations_and_accumulators_survive_pickling(dumps, op, items, expected):
    """An operation is shipped to the workers, an accumulator saved to a snapshot."""
    shipped = pickle.loads(dumps(op))
    half = len(items) // 2
    acc = pickle.loads(dumps(run(shipped, items[:half])))
    acc = reduce(shipped.accumulate_fn(), items[half:], acc)
    assert shipped.finish_fn(acc) == expected


def test_cloudpickle_takes_lambdas_as_key_functions():
    op = pickle.loads(cloudpickle.dumps(top_n(2, lambda word: word.count("a"))))
    assert op.finish_fn(run(op, ["b", "aa", "a", "aaa"])) == ["aaa", "aa"]


def test_the_ranked_results_are_lists_sorted_as_jet_sorts_them():
    items = [8, 3, 6, 1, 9, 4]
    assert op_result(top_n(4), items) == sorted(items, reverse=True)[:4]
    assert op_result(bottom_n(4), items) == sorted(items)[:4]
    assert op_result(top_n(6), items) == op_result(sorting(reverse=True), items)
    assert op_result(bottom_n(6), items) == op_result(sorting(), items)


def op_result(op: AggregateOperation, items: list[Any]) -> Any:
    return op.finish_fn(run(op, items))


def test_only_grouping_by_and_the_all_of_builder_can_deduct_as_their_parts_allow():
    for op in (top_n(1), bottom_n(1), sorting(), concatenating(), to_collection(set)):
        assert op.deduct_fn is None
        assert op.combine_fn is not None
    assert grouping_by(first).deduct_fn is None  # to_list() cannot deduct
    builder = all_of_builder()
    builder.add(counting())
    builder.add(top_n(2))
    assert builder.build().deduct_fn is None
    no_combine = AggregateOperation.with_create(int).and_accumulate(operator.add).and_finish(int)
    builder.add(no_combine)
    assert builder.build().combine_fn is None


def test_grouping_by_deducts_per_key_and_drops_keys_with_nothing_left():
    op = grouping_by(first, summing(second))
    window = combined(op, [[("a", 1), ("b", 2)], [("a", 10), ("c", 5)]])
    earliest = run(op, [("a", 1), ("b", 2)])
    assert op.finish_fn(op.deduct_fn(window, earliest)) == {"a": 10, "c": 5}
    # a sum of 0 is not "no items": the key stays while items of it remain
    zero = combined(op, [[("a", 0)], [("a", 0)]])
    assert op.finish_fn(op.deduct_fn(zero, run(op, [("a", 0)]))) == {"a": 0}


def test_all_of_builder_deducts_and_finishes_with_its_function():
    builder = all_of_builder()
    count, total = builder.add(counting()), builder.add(summing())
    op = builder.build(lambda ibt: (ibt[count], ibt.get(total)))
    acc = combined(op, [[1, 2], [3]])
    assert op.finish_fn(acc) == op.export_fn(acc) == (3, 6)
    assert op.finish_fn(op.deduct_fn(acc, run(op, [3]))) == (2, 3)


def test_to_collection_exports_a_new_collection_and_finishes_with_its_own():
    op = to_collection(list)
    acc = run(op, [1, 2])
    exported = op.export_fn(acc)
    assert exported == [1, 2]
    assert exported is not acc
    assert op.finish_fn(acc) is acc


def test_sorting_by_items_that_compare_only_by_their_key():
    op = sorting(first)
    assert op_result(op, [(2, {}), (1, {}), (2, set())]) == [(1, {}), (2, {}), (2, set())]
    assert op_result(top_n(1, first), [(1, {}), (1, set())]) == [(1, {})]


def test_wrong_arguments_are_refused():
    for n in (0, -1, True, 1.0):
        with pytest.raises(ValueError, match="n must be an int >= 1"):
            top_n(n)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        bottom_n(0)
    with pytest.raises(TypeError, match="delimiter must be a str"):
        concatenating(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes str items, got int"):
        run(concatenating(), ["a", 1])
    with pytest.raises(TypeError, match="creates a collection"):
        to_collection([])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="grouping_by\\(\\) takes an AggregateOperation of one"):
        grouping_by(first, aggregate_operation2(counting(), counting()))
    builder = all_of_builder()
    with pytest.raises(ValueError, match="add\\(\\) at least one"):
        builder.build()
    with pytest.raises(TypeError, match="takes an AggregateOperation"):
        builder.add(counting)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="of one input"):
        builder.add(aggregate_operation2(counting(), counting()))


# ------------------------------------------------------------- the Pipeline API, LocalEngine(2)


@pytest.fixture
def engine() -> LocalEngine:
    """Two members: the items are accumulated on both and the accumulators combined."""
    return LocalEngine(members=2)


WORDS = ["pear", "fig", "apple", "kiwi", "plum", "date", "lime", "banana", "cherry", "grape"]


def draw_words(engine: LocalEngine, p: Pipeline) -> Any:
    engine.get_list("words").extend(WORDS)
    return p.draw_from(Sources.list("words"))


def test_pipeline_top_n_and_bottom_n(engine: LocalEngine) -> None:
    p = Pipeline.create()
    words = draw_words(engine, p)
    words.map(len).aggregate(top_n(3)).drain_to(Sinks.list("longest"))
    words.grouping_key(first).aggregate(bottom_n(2)).drain_to(Sinks.list("first-by-letter"))
    engine.new_job(p).join(60)
    assert engine.get_list("longest") == [[6, 6, 5]]
    by_letter = dict(engine.get_list("first-by-letter"))
    assert by_letter == {
        initial: sorted(w for w in WORDS if w[0] == initial)[:2] for initial in "pfakdlbcg"
    }


def test_pipeline_sorting(engine: LocalEngine) -> None:
    p = Pipeline.create()
    words = draw_words(engine, p)
    words.aggregate(sorting()).drain_to(Sinks.list("sorted"))
    words.grouping_key(len).aggregate(sorting(reverse=True)).drain_to(Sinks.map("by-length"))
    engine.new_job(p).join(60)
    assert engine.get_list("sorted") == [sorted(WORDS)]
    assert engine.get_map("by-length") == {
        n: sorted((w for w in WORDS if len(w) == n), reverse=True) for n in (3, 4, 5, 6)
    }


def test_pipeline_grouping_by(engine: LocalEngine) -> None:
    p = Pipeline.create()
    words = draw_words(engine, p)
    words.aggregate(grouping_by(len, counting())).drain_to(Sinks.list("count-by-length"))
    # Jet's cascaded grouping: by initial in the stage, then by length in the operation
    words.grouping_key(first).aggregate(grouping_by(len, to_set())).drain_to(Sinks.map("cascaded"))
    engine.new_job(p).join(60)
    assert engine.get_list("count-by-length") == [dict(Counter(map(len, WORDS)))]
    assert engine.get_map("cascaded")["p"] == {4: {"pear", "plum"}}
    assert engine.get_map("cascaded")["b"] == {6: {"banana"}}


def test_pipeline_grouping_by_in_sliding_windows_deducts_the_frames_that_leave(
    engine: LocalEngine,
) -> None:
    events = [(t, "ab"[t % 3 == 0]) for t in range(12)]
    engine.get_list("events").extend(events)
    p = Pipeline.create()
    (
        p.draw_from(Sources.journal("events"))
        .add_timestamps(first, 0)
        .window(WindowDefinition.sliding(4, 2))
        .aggregate(grouping_by(second, counting()))
        .drain_to(Sinks.list("windows"))
    )
    engine.new_job(p).join(60)
    expected = [
        TimestampedItem(end, dict(Counter(k for t, k in events if end - 4 <= t < end)))
        for end in range(2, 16, 2)
    ]
    assert sorted(engine.get_list("windows")) == expected


def test_pipeline_concatenating(engine: LocalEngine) -> None:
    p = Pipeline.create()
    words = draw_words(engine, p)
    words.aggregate(concatenating(", ", "[", "]")).drain_to(Sinks.list("joined"))
    words.grouping_key(len).aggregate(concatenating("/")).drain_to(Sinks.map("by-length"))
    engine.new_job(p).join(60)
    [joined] = engine.get_list("joined")
    assert joined.startswith("[")
    assert joined.endswith("]")
    assert sorted(joined[1:-1].split(", ")) == sorted(WORDS)
    by_length = engine.get_map("by-length")
    assert sorted(by_length[3].split("/")) == ["fig"]
    assert sorted(by_length[6].split("/")) == ["banana", "cherry"]


def test_pipeline_to_collection(engine: LocalEngine) -> None:
    p = Pipeline.create()
    words = draw_words(engine, p)
    words.map(len).aggregate(to_collection(set)).drain_to(Sinks.list("lengths"))
    words.grouping_key(len).aggregate(to_collection(list)).drain_to(Sinks.map("by-length"))
    engine.new_job(p).join(60)
    assert engine.get_list("lengths") == [{3, 4, 5, 6}]
    assert sorted(engine.get_map("by-length")[5]) == ["apple", "grape"]


def test_pipeline_all_of_builder(engine: LocalEngine) -> None:
    builder = all_of_builder()
    count = builder.add(counting())
    longest = builder.add(top_n(1, len))
    letters = builder.add(reducing(0, len, operator.add, operator.sub))
    p = Pipeline.create()
    words = draw_words(engine, p)
    words.aggregate(builder.build()).drain_to(Sinks.list("stats"))
    by_initial = builder.build(lambda ibt: (ibt[count], ibt[letters]))
    words.grouping_key(first).aggregate(by_initial).drain_to(Sinks.map("by-initial"))
    engine.new_job(p).join(60)
    [stats] = engine.get_list("stats")
    assert isinstance(stats, ItemsByTag)
    assert stats[count] == len(WORDS)
    assert stats[longest] in (["banana"], ["cherry"])
    assert stats[letters] == sum(map(len, WORDS))
    assert engine.get_map("by-initial")["p"] == (2, 8)
