"""Port of Jet 0.7 `com.hazelcast.jet.TraverserTest`: the combinators of `Traverser`."""

from __future__ import annotations

from typing import Any

from jetspark.core.traverser import Traverser
from jetspark.core.traversers import empty, traverse_items


def traverser() -> Traverser:
    return traverse_items(0, 1, 2)


def check(t: Traverser, *expected: Any) -> None:
    """Jet's `check`: the items up to the first None, then only None."""
    items = []
    while (item := t.next()) is not None:
        items.append(item)
    assert items == list(expected)
    assert t.next() is None
    assert t.next() is None


def test_smoke_test_map() -> None:
    """`TraverserTest.smokeTest_map`."""
    check(traverser().map(lambda i: i), 0, 1, 2)
    check(traverser().map(lambda i: i + 1), 1, 2, 3)
    check(traverser().map(lambda i: None if i % 2 else i), 0, 2)
    check(traverser().map(lambda i: None))
    check(traverser().map(lambda i: None if i == 0 else i), 1, 2)
    check(traverser().map(lambda i: None if i != 0 else i), 0)


def test_smoke_test_filter() -> None:
    """`TraverserTest.smokeTest_filter`."""
    check(traverser().filter(lambda i: True), 0, 1, 2)
    check(traverser().filter(lambda i: False))
    check(traverser().filter(lambda i: i != 1), 0, 2)
    check(traverser().filter(lambda i: i == 1), 1)
    check(traverser().filter(lambda i: i != 0), 1, 2)
    check(traverser().filter(lambda i: i != 2), 0, 1)


def test_smoke_test_take_while() -> None:
    """`TraverserTest.smokeTest_takeWhile`."""
    check(traverser().take_while(lambda i: False))
    check(traverser().take_while(lambda i: True), 0, 1, 2)
    check(traverser().take_while(lambda i: i < 3), 0, 1, 2)
    check(traverser().take_while(lambda i: i < 2), 0, 1)
    check(traverser().take_while(lambda i: i < 1), 0)
    check(traverser().take_while(lambda i: i < 0))


def test_smoke_test_drop_while() -> None:
    """`TraverserTest.smokeTest_dropWhile`."""
    check(traverser().drop_while(lambda i: True))
    check(traverser().drop_while(lambda i: False), 0, 1, 2)
    check(traverser().drop_while(lambda i: i < 3))
    check(traverser().drop_while(lambda i: i < 2), 2)
    check(traverser().drop_while(lambda i: i < 1), 1, 2)
    check(traverser().drop_while(lambda i: i < 0), 0, 1, 2)


def test_smoke_test_append() -> None:
    """`TraverserTest.smokeTest_append`."""
    check(traverser().append(5), 0, 1, 2, 5)
    check(traverser().append(5).append(6), 0, 1, 2, 5, 6)
    check(empty().append(0), 0)


def test_smoke_test_prepend() -> None:
    """`TraverserTest.smokeTest_prepend`."""
    check(traverser().prepend(5), 5, 0, 1, 2)
    check(traverser().prepend(5).prepend(6), 6, 5, 0, 1, 2)
    check(empty().prepend(0), 0)


def test_smoke_test_flat_map() -> None:
    """`TraverserTest.smokeTest_flatMap`."""
    check(traverser().flat_map(lambda i: traverser()), 0, 1, 2, 0, 1, 2, 0, 1, 2)
    check(traverser().flat_map(lambda i: empty()))
    # 0 -> {}, 1 -> {0}, 2 -> {0, 1} ==> {0, 0, 1}
    check(traverser().flat_map(lambda i: traverser().take_while(lambda j: j < i)), 0, 0, 1)


def test_smoke_test_peek() -> None:
    """`TraverserTest.smokeTest_peek`."""
    peeked: list[int] = []
    check(traverser().peek(peeked.append), 0, 1, 2)
    assert peeked == [0, 1, 2]
    peeked.clear()
    # not peeking the appended item
    check(traverser().peek(peeked.append).append(4), 0, 1, 2, 4)
    assert peeked == [0, 1, 2]
    peeked.clear()
    # not peeking the prepended item
    check(traverser().peek(peeked.append).prepend(4), 4, 0, 1, 2)
    assert peeked == [0, 1, 2]
    peeked.clear()
    # peeking the items filtered out after peek()
    check(traverser().peek(peeked.append).filter(lambda i: i == 0), 0)
    assert peeked == [0, 1, 2]


class OnceAction:
    """Records its call; a second call fails, as Jet's `assert !actionCalled[0]` does."""

    def __init__(self) -> None:
        self.called = False

    def __call__(self) -> None:
        assert not self.called, "action already called"
        self.called = True


def test_smoke_test_on_first_null() -> None:
    """`TraverserTest.smokeTest_onFirstNull`."""
    action = OnceAction()
    t = traverser().on_first_null(action)
    for expected in (0, 1, 2):
        assert t.next() == expected
        assert not action.called
    assert t.next() is None
    assert action.called
    assert t.next() is None  # fails inside the action if it is called again


def test_when_all_filtered_out_then_on_first_null_called_immediately() -> None:
    """`TraverserTest.when_allFilteredOut_then_onFirstNullCalledImmediately`."""
    action = OnceAction()
    t = traverser().filter(lambda i: False).on_first_null(action)
    assert not action.called
    assert t.next() is None
    assert action.called


def test_when_all_filtered_out_using_map_then_on_first_null_called_immediately() -> None:
    """`TraverserTest.when_allFilteredOutUsingMap_then_onFirstNullCalledImmediately`."""
    action = OnceAction()
    t = traverser().map(lambda i: None).on_first_null(action)
    assert not action.called
    assert t.next() is None
    assert action.called
