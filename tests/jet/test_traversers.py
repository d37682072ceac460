"""Port of Jet 0.7 `com.hazelcast.jet.TraversersTest`.

Deliberate differences: Java's iterator, spliterator, enumeration, stream, iterable and array
factories are all `traverse_iterable` in Python (any iterable: an iterator, a generator, a list,
a tuple); each Jet test keeps its own port over the matching Python iterable. A None element
is skipped where Jet fails an assertion (`traverseItems(1, null)` etc.): in Python None is what
`next()` returns for "no item", and a None produced while traversing a Python iterable is data
to skip, not a bug (jetspark documents this on `traverse_iterable`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jetspark.core.traverser import Traverser
from jetspark.core.traversers import lazy, traverse_items, traverse_iterable


def validate_traversal(trav: Traverser) -> None:
    t1, t2, t3 = trav.next(), trav.next(), trav.next()
    assert (t1, t2, t3) == (1, 2, None)


def test_when_traverser_over_args_then_see_all_items() -> None:
    """`TraversersTest.when_traverserOverArgs_then_seeAllItems`."""
    validate_traversal(traverse_items(1, 2))


def test_when_traverse_iterator_then_see_all_items() -> None:
    """`TraversersTest.when_traverseIterator_then_seeAllItems`."""
    validate_traversal(traverse_iterable(iter([1, 2])))


def test_when_traverse_spliterator_then_see_all_items() -> None:
    """`TraversersTest.when_traverseSpliterator_then_seeAllItems` (a Python iterator)."""
    validate_traversal(traverse_iterable(iter((1, 2))))


def test_when_traverse_enumeration_then_see_all_items() -> None:
    """`TraversersTest.when_traverseEnumeration_then_seeAllItems` (a Python iterator)."""
    validate_traversal(traverse_iterable(iter(range(1, 3))))


def test_when_traverse_stream_then_see_all_items() -> None:
    """`TraversersTest.when_traverseStream_then_seeAllItems` (a generator)."""
    validate_traversal(traverse_iterable(i for i in (1, 2)))


def test_when_traverse_iterable_then_see_all_items() -> None:
    """`TraversersTest.when_traverseIterable_then_seeAllItems`."""
    validate_traversal(traverse_iterable([1, 2]))


def test_when_traverse_array_then_see_all_items() -> None:
    """`TraversersTest.when_traverseArray_then_seeAllItems` (a tuple)."""
    validate_traversal(traverse_iterable((1, 2)))


@pytest.mark.parametrize(
    ("jet_test", "make"),
    [
        ("when_traverserOverArgsWithNull_then_failure", lambda: traverse_items(1, None)),
        ("when_traverseIteratorWithNull_then_failure", lambda: traverse_iterable(iter([1, None]))),
        (
            "when_traverseSpliteratorWithNull_then_failure",
            lambda: traverse_iterable(iter((1, None))),
        ),
        (
            "when_traverseEnumerationWithNull_then_failure",
            lambda: traverse_iterable(iter([1, None])),
        ),
        ("when_traverseIterableWithNull_then_failure", lambda: traverse_iterable([1, None])),
        ("when_traverseArrayWithNull_then_failure", lambda: traverse_iterable((1, None))),
    ],
)
def test_when_traverse_with_null_then_skipped(jet_test: str, make) -> None:
    """`TraversersTest.when_traverse*WithNull_then_failure` (six tests): jetspark skips the None
    element where Jet fails an assertion (see the module docstring)."""
    trav = make()
    assert trav.next() == 1
    assert trav.next() is None


def test_when_traverse_iterator_ignoring_nulls_then_filtered_out() -> None:
    """`TraversersTest.when_traverseIteratorIgnoringNulls_then_filteredOut`: what every jetspark
    traversal of an iterable does."""
    trav = traverse_iterable(iter([None, 1, None, 2, None]))
    assert trav.next() == 1
    assert trav.next() == 2
    assert trav.next() is None


def test_when_traverse_stream_consumed_then_stream_closed() -> None:
    """`TraversersTest.when_traverseStreamConsumed_then_streamClosed`: a generator's cleanup
    runs once the traversal reaches its end."""
    closed = [False]

    def stream() -> Iterator[int]:
        try:
            yield 1
        finally:
            closed[0] = True

    trav = traverse_iterable(stream())
    trav.next()
    assert not closed[0]
    trav.next()
    assert closed[0]


def test_when_lazy_left_alone_then_supplier_not_called() -> None:
    """`TraversersTest.when_lazyLeftAlone_then_supplierNotCalled`."""

    def supplier() -> Traverser:
        pytest.fail("the supplier was called")

    lazy(supplier)


def test_lazy_traversal_transparent() -> None:
    """`TraversersTest.lazyTraversalTransparent`."""
    validate_traversal(lazy(lambda: traverse_iterable(i for i in (1, 2))))


def test_peek() -> None:
    """`TraversersTest.peek`."""
    peeked: list[int] = []
    t = traverse_items(1, 2, 3).peek(peeked.append)
    assert [t.next(), t.next(), t.next(), t.next()] == [1, 2, 3, None]
    assert peeked == [1, 2, 3]
