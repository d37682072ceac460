"""Port of Jet 0.7 `com.hazelcast.jet.core.AppendableTraverserTest`."""

from __future__ import annotations

from jetspark.core.traversers import AppendableTraverser, traverse_items


def test_smoke_test() -> None:
    """`AppendableTraverserTest.smokeTest`."""
    t = AppendableTraverser()
    assert t.is_empty()
    t.append("1")
    assert not t.is_empty()
    assert t.next() == "1"
    assert t.is_empty()
    assert t.next() is None
    t.append("2")
    t.append("3")
    assert t.next() == "2"
    assert t.next() == "3"
    assert t.next() is None


def test_flat_mapper_usage() -> None:
    """`AppendableTraverserTest.test_flatMapperUsage`: one instance returned again and again
    from a flat_map function."""
    t = AppendableTraverser()

    def fill(item: int) -> AppendableTraverser:
        assert t.is_empty()
        return t.append(item).append(item + 1)

    tt = traverse_items(10, 20).flat_map(fill)
    assert [tt.next() for _ in range(5)] == [10, 11, 20, 21, None]
