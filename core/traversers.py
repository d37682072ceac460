"""Factories of traversers (Jet's `Traversers`), and the two mutable traversers processors reuse."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from jetspark.core.traverser import (
    FunctionTraverser,
    Traverser,
    as_traverser,
    empty,
    singleton,
    traverse_iterable,
)

__all__ = [
    "AppendableTraverser",
    "ResettableSingletonTraverser",
    "as_traverser",
    "empty",
    "lazy",
    "singleton",
    "traverse_items",
    "traverse_iterable",
]


def traverse_items(*items: Any) -> Traverser:
    """Traverses the given items, skipping None ones."""
    return traverse_iterable(items)


def lazy(supplier: Callable[[], Traverser | Iterable[Any]]) -> Traverser:
    """Calls `supplier` on the first `next()` and traverses what it returns."""
    target: list[Traverser | None] = [None]

    def next_lazily() -> Any:
        traverser = target[0]
        if traverser is None:
            traverser = target[0] = as_traverser(supplier())
        return traverser.next()

    return FunctionTraverser(next_lazily)


class ResettableSingletonTraverser(Traverser):
    """Holds at most one item: `accept(item)` sets it, `next()` returns it once."""

    __slots__ = ("_item",)

    def __init__(self) -> None:
        self._item: Any = None

    def accept(self, item: Any) -> None:
        """Sets the item the next `next()` returns; ValueError if the last one was not taken."""
        if self._item is not None:
            raise ValueError(
                f"ResettableSingletonTraverser.accept({item!r}): the item {self._item!r} was not "
                "consumed yet (call next() first)"
            )
        self._item = item

    def next(self) -> Any:
        item, self._item = self._item, None
        return item


class AppendableTraverser(Traverser):
    """A FIFO of items: `append()` adds (and returns self), `next()` takes the oldest."""

    __slots__ = ("_queue",)

    def __init__(self) -> None:
        self._queue: deque[Any] = deque()

    def append(self, item: Any) -> AppendableTraverser:
        """Adds `item` to the end; None is refused since it would end the traversal."""
        if item is None:
            raise ValueError("AppendableTraverser cannot hold None: None means 'no item'")
        self._queue.append(item)
        return self

    def is_empty(self) -> bool:
        """True when `next()` would return None."""
        return not self._queue

    def next(self) -> Any:
        return self._queue.popleft() if self._queue else None
