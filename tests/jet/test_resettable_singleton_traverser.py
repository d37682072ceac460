"""Port of Jet 0.7 `com.hazelcast.jet.core.ResettableSingletonTraverserTest`.

Deliberate difference: Jet fails a Java `assert` when `accept()` is called while the item is
not consumed; jetspark raises ValueError (Python has no assertions switched on by `-ea`).
"""

from __future__ import annotations

import pytest

from jetspark.core.traversers import ResettableSingletonTraverser


def test_when_accept_not_called_then_next_returns_null() -> None:
    """`ResettableSingletonTraverserTest.when_acceptNotCalled_thenNextReturnsNull`."""
    assert ResettableSingletonTraverser().next() is None


def test_when_accept_item_then_next_returns_it() -> None:
    """`ResettableSingletonTraverserTest.when_acceptItem_thenNextReturnsIt`."""
    trav = ResettableSingletonTraverser()
    trav.accept(1)
    assert trav.next() == 1


def test_when_item_consumed_then_next_returns_null() -> None:
    """`ResettableSingletonTraverserTest.when_itemConsumed_thenNextReturnsNull`."""
    trav = ResettableSingletonTraverser()
    trav.accept(1)
    trav.next()
    assert trav.next() is None


def test_when_item_not_consumed_then_accept_fails() -> None:
    """`ResettableSingletonTraverserTest.when_itemNotConsumed_thenAcceptFails`."""
    trav = ResettableSingletonTraverser()
    trav.accept(1)
    with pytest.raises(ValueError, match="not consumed"):
        trav.accept(2)
