"""Port of Jet 0.7 `com.hazelcast.jet.impl.util.FlatMappingTraverserTest`: jetspark's
`Traverser.flat_map` is Jet's `FlatMappingTraverser`."""

from __future__ import annotations

from jetspark.core.traversers import empty, traverse_items, traverse_iterable


def test_smoke_test() -> None:
    """`FlatMappingTraverserTest.smokeTest`."""
    trav = traverse_items(0, 1, 2, 3).flat_map(lambda n: traverse_iterable(range(n)))
    assert [trav.next() for _ in range(8)] == [0, 0, 1, 0, 1, 2, None, None]


def test_when_flat_map_to_null_traverser_then_skip_over_to_next() -> None:
    """`FlatMappingTraverserTest.when_flatMapToNullTraverser_then_skipOverToNext`."""
    trav = traverse_items(1, 2, 3).flat_map(lambda i: empty() if i != 3 else traverse_items("a"))
    assert [trav.next(), trav.next(), trav.next()] == ["a", None, None]
