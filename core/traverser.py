"""Traverser: a pull-style sequence whose `next()` returns None when no item is available.

It is Jet's answer to cooperative emission: a processor can stop in the middle of a sequence when
the outbox is full and resume from the same traverser later (manual §8.4.3). A traverser may be
infinite and non-blocking: None means "nothing now", more items may follow later.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any


class Traverser:
    """Base class: subclasses override `next()`; the combinators build new traversers lazily."""

    __slots__ = ()

    def next(self) -> Any:
        """The next item, or None when there is none (now or ever)."""
        raise TypeError(f"{type(self).__name__} must override next()")

    def map(self, fn: Callable[[Any], Any]) -> Traverser:
        """Applies `fn` to each item; items mapped to None are skipped."""

        def next_mapped() -> Any:
            while (item := self.next()) is not None:
                mapped = fn(item)
                if mapped is not None:
                    return mapped
            return None

        return FunctionTraverser(next_mapped)

    def filter(self, predicate: Callable[[Any], bool]) -> Traverser:
        """Keeps the items for which `predicate` is true."""

        def next_kept() -> Any:
            while (item := self.next()) is not None:
                if predicate(item):
                    return item
            return None

        return FunctionTraverser(next_kept)

    def flat_map(self, fn: Callable[[Any], Traverser | Iterable[Any]]) -> Traverser:
        """Replaces each item with the items of the traverser or iterable `fn` returns."""
        current: list[Traverser] = [empty()]

        def next_flat() -> Any:
            while True:
                item = current[0].next()
                if item is not None:
                    return item
                source_item = self.next()
                if source_item is None:
                    return None
                current[0] = as_traverser(fn(source_item))

        return FunctionTraverser(next_flat)

    def append(self, item: Any) -> Traverser:
        """This traverser's items followed by `item`."""
        return _Concat(self, singleton(item))

    def prepend(self, item: Any) -> Traverser:
        """`item` followed by this traverser's items."""
        return _Concat(singleton(item), self)

    def peek(self, action: Callable[[Any], Any]) -> Traverser:
        """Calls `action` on each item as it passes."""

        def next_peeked() -> Any:
            item = self.next()
            if item is not None:
                action(item)
            return item

        return FunctionTraverser(next_peeked)

    def on_first_null(self, action: Callable[[], Any]) -> Traverser:
        """Calls `action` once, the first time this traverser returns None."""
        done = [False]

        def next_watched() -> Any:
            item = self.next()
            if item is None and not done[0]:
                done[0] = True
                action()
            return item

        return FunctionTraverser(next_watched)

    def take_while(self, predicate: Callable[[Any], bool]) -> Traverser:
        """Items while `predicate` holds; after the first failing item, always None."""
        stopped = [False]

        def next_taken() -> Any:
            if stopped[0]:
                return None
            item = self.next()
            if item is not None and not predicate(item):
                stopped[0] = True
                return None
            return item

        return FunctionTraverser(next_taken)

    def drop_while(self, predicate: Callable[[Any], bool]) -> Traverser:
        """Skips items while `predicate` holds, then passes everything."""
        dropping = [True]

        def next_after_drop() -> Any:
            item = self.next()
            while dropping[0] and item is not None:
                if not predicate(item):
                    dropping[0] = False
                    return item
                item = self.next()
            return item

        return FunctionTraverser(next_after_drop)

    def __iter__(self) -> Iterator[Any]:
        """Iterates until the first None."""
        while (item := self.next()) is not None:
            yield item


class FunctionTraverser(Traverser):
    """A traverser whose `next` is a plain zero-argument function (the fastest form)."""

    __slots__ = ("next",)
    next: Callable[[], Any]

    def __init__(self, next_fn: Callable[[], Any]) -> None:
        self.next = next_fn  # an instance attribute: one call per item, no method dispatch


class _Concat(Traverser):
    """The items of `first`, then those of `second`."""

    __slots__ = ("_parts",)

    def __init__(self, first: Traverser, second: Traverser) -> None:
        self._parts = [first, second]

    def next(self) -> Any:
        parts = self._parts
        while parts:
            item = parts[0].next()
            if item is not None:
                return item
            if len(parts) == 1:
                return None
            parts.pop(0)
        return None


def traverse_iterable(iterable: Iterable[Any]) -> Traverser:
    """Traverses a Python iterable; None elements are skipped, since None ends a traversal."""
    return FunctionTraverser(partial(next, (x for x in iterable if x is not None), None))


def empty() -> Traverser:
    """A traverser with no items."""
    return FunctionTraverser(_none)


def singleton(item: Any) -> Traverser:
    """A traverser of exactly one item (none if `item` is None)."""
    return traverse_iterable((item,))


def as_traverser(source: Traverser | Iterable[Any] | None) -> Traverser:
    """Accepts a traverser as is and wraps an iterable (None counts as empty)."""
    if isinstance(source, Traverser):
        return source
    if source is None:
        return empty()
    try:
        return traverse_iterable(source)
    except TypeError:
        raise TypeError(
            f"expected a Traverser or an iterable, got {type(source).__name__}"
        ) from None


def _none() -> None:
    return None
