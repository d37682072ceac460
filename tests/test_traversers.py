"""Tests of Traverser and its factories (manual §8.4.3): None ends (or pauses) a traversal."""

from __future__ import annotations

from collections import deque

import pytest

from jetspark.core import Traverser
from jetspark.core.traversers import (
    AppendableTraverser,
    ResettableSingletonTraverser,
    as_traverser,
    empty,
    lazy,
    singleton,
    traverse_items,
    traverse_iterable,
)


def drain(traverser: Traverser) -> list:
    """Every item until the first None, then checks that None keeps coming."""
    items = []
    while (item := traverser.next()) is not None:
        items.append(item)
    assert traverser.next() is None
    return items


class QueueTraverser(Traverser):
    """A non-blocking source: None while its queue is empty, items again once refilled."""

    def __init__(self, *items) -> None:
        self.queue = deque(items)

    def next(self):
        return self.queue.popleft() if self.queue else None


def test_next_returns_none_at_the_end_and_keeps_doing_so():
    traverser = traverse_items(1)
    assert [traverser.next() for _ in range(4)] == [1, None, None, None]


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda t: t.map(lambda x: x * 10), [10, 20, 30, 40]),
        (lambda t: t.map(lambda x: x * 10 if x % 2 else None), [10, 30]),
        (lambda t: t.filter(lambda x: x % 2 == 0), [2, 4]),
        (lambda t: t.filter(lambda x: x > 9), []),
        (lambda t: t.flat_map(lambda x: traverse_items(x, -x)), [1, -1, 2, -2, 3, -3, 4, -4]),
        (lambda t: t.flat_map(lambda x: [x] * (x - 1)), [2, 3, 3, 4, 4, 4]),
        (lambda t: t.flat_map(lambda x: None if x == 2 else (x,)), [1, 3, 4]),
        (lambda t: t.flat_map(lambda x: empty()), []),
        (lambda t: t.append(5), [1, 2, 3, 4, 5]),
        (lambda t: t.prepend(0), [0, 1, 2, 3, 4]),
        (lambda t: t.append(5).prepend(0).append(6), [0, 1, 2, 3, 4, 5, 6]),
        (lambda t: t.take_while(lambda x: x < 3), [1, 2]),
        (lambda t: t.take_while(lambda x: x > 9), []),
        (lambda t: t.drop_while(lambda x: x < 3), [3, 4]),
        (lambda t: t.drop_while(lambda x: x > 9), [1, 2, 3, 4]),
        (lambda t: t.filter(lambda x: x > 1).map(str).append("end"), ["2", "3", "4", "end"]),
    ],
    ids=[
        "map",
        "map skips None",
        "filter",
        "filter all out",
        "flat_map traversers",
        "flat_map lists",
        "flat_map None and tuples",
        "flat_map empty",
        "append",
        "prepend",
        "append prepend append",
        "take_while",
        "take_while none",
        "drop_while",
        "drop_while none",
        "chain",
    ],
)
def test_combinators(build, expected):
    assert drain(build(traverse_items(1, 2, 3, 4))) == expected


def test_take_while_stops_for_good_after_the_first_failing_item():
    source = QueueTraverser(1, 5, 2)
    taken = source.take_while(lambda x: x < 3)
    assert drain(taken) == [1]
    source.queue.extend([1, 2])
    assert taken.next() is None


def test_drop_while_passes_everything_after_the_first_kept_item():
    assert drain(traverse_items(1, 5, 2, 7).drop_while(lambda x: x < 3)) == [5, 2, 7]


def test_peek_sees_each_item_as_it_passes():
    seen = []
    peeked = traverse_items(1, 2).peek(seen.append)
    assert peeked.next() == 1
    assert seen == [1]
    assert drain(peeked) == [2]
    assert seen == [1, 2]


def test_on_first_null_runs_once_at_the_end():
    calls = []
    traverser = traverse_items("a", "b").on_first_null(lambda: calls.append("done"))
    assert [traverser.next(), traverser.next()] == ["a", "b"]
    assert calls == []
    assert [traverser.next(), traverser.next(), traverser.next()] == [None, None, None]
    assert calls == ["done"]


def test_combinators_resume_on_a_non_blocking_source():
    source = QueueTraverser(1)
    mapped = source.map(lambda x: x * 2).filter(lambda x: x > 0)
    assert drain(mapped) == [2]
    source.queue.extend([3, 4])  # more items arrive after a None
    assert drain(mapped) == [6, 8]


def test_iteration_stops_at_the_first_none():
    assert list(traverse_items(1, 2, 3)) == [1, 2, 3]
    assert [x for x in traverse_items("a")] == ["a"]


def test_traverse_iterable_skips_none_elements():
    assert drain(traverse_iterable([None, 1, None, 2, None])) == [1, 2]


def test_traverse_iterable_is_lazy_over_the_iterable():
    pulled = []

    def numbers():
        for i in range(3):
            pulled.append(i)
            yield i

    traverser = traverse_iterable(numbers())
    assert pulled == []
    assert traverser.next() == 0
    assert pulled == [0]


def test_traverse_items_skips_none():
    assert drain(traverse_items(None, "a", None, "b")) == ["a", "b"]
    assert drain(traverse_items()) == []


def test_empty():
    assert drain(empty()) == []


@pytest.mark.parametrize(("item", "expected"), [(5, [5]), ((1, 2), [(1, 2)]), (None, [])])
def test_singleton(item, expected):
    assert drain(singleton(item)) == expected


@pytest.mark.parametrize("returns", [lambda: traverse_items(1, 2), lambda: [1, 2]])
def test_lazy_calls_its_supplier_on_the_first_next_only(returns):
    calls = []

    def supplier():
        calls.append(1)
        return returns()

    traverser = lazy(supplier)
    assert calls == []
    assert traverser.next() == 1
    assert drain(traverser) == [2]
    assert calls == [1]


def test_resettable_singleton_traverser():
    traverser = ResettableSingletonTraverser()
    assert traverser.next() is None
    traverser.accept("a")
    assert [traverser.next(), traverser.next()] == ["a", None]
    traverser.accept("b")
    with pytest.raises(ValueError, match="'b' was not consumed"):
        traverser.accept("c")  # Jet's contract: an unread item is never dropped
    assert drain(traverser) == ["b"]


def test_appendable_traverser_is_a_fifo_whose_append_returns_itself():
    traverser = AppendableTraverser()
    assert traverser.is_empty()
    assert traverser.append(1) is traverser
    assert traverser.append(2).append(3) is traverser
    assert not traverser.is_empty()
    assert traverser.next() == 1
    traverser.append(4)
    assert drain(traverser) == [2, 3, 4]
    assert traverser.is_empty()


def test_appendable_traverser_refuses_none():
    traverser = AppendableTraverser()
    with pytest.raises(ValueError, match="cannot hold None"):
        traverser.append(None)
    assert traverser.is_empty()


def test_as_traverser_takes_traversers_and_iterables():
    traverser = traverse_items(1)
    assert as_traverser(traverser) is traverser
    assert drain(as_traverser([1, None, 2])) == [1, 2]
    assert drain(as_traverser({"k": 1})) == ["k"]
    assert drain(as_traverser(None)) == []


@pytest.mark.parametrize("source", [5, 1.5, object()], ids=["int", "float", "object"])
def test_as_traverser_refuses_non_iterables(source):
    with pytest.raises(TypeError, match=f"a Traverser or an iterable, got {type(source).__name__}"):
        as_traverser(source)


def test_a_traverser_must_override_next():
    with pytest.raises(TypeError, match="must override next"):
        Traverser().next()
