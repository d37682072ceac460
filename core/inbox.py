"""The Inbox a processor takes its input from, and the deque-backed implementation."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, MutableSequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Inbox(Protocol):
    """The items of one inbound edge waiting for `Processor.process()` (manual §8.3.3)."""

    def is_empty(self) -> bool: ...
    def peek(self) -> Any: ...
    def poll(self) -> Any: ...
    def remove(self) -> Any: ...
    def drain(self, fn: Callable[[Any], Any]) -> int: ...
    def drain_to(self, target: MutableSequence[Any]) -> int: ...
    def __len__(self) -> int: ...


class ArrayDequeInbox:
    """An Inbox over a `collections.deque`; `queue` is exposed for the runtime's batch moves.

    `must_drain` is True while the runtime cannot go on before the inbox is empty (a snapshot's
    barrier came in on every input, or a micro-batch is to end): a processor that leaves items
    in its inbox for backpressure takes them then, into its state."""

    __slots__ = ("must_drain", "queue")

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self.queue: deque[Any] = deque(items)
        self.must_drain = False

    def is_empty(self) -> bool:
        """True when no item is waiting."""
        return not self.queue

    def peek(self) -> Any:
        """The head item without removing it, or None when empty."""
        return self.queue[0] if self.queue else None

    def poll(self) -> Any:
        """Removes and returns the head item, or None when empty."""
        return self.queue.popleft() if self.queue else None

    def remove(self) -> Any:
        """Removes and returns the head item; raises IndexError when empty."""
        if not self.queue:
            raise IndexError("remove() on an empty inbox: check peek() or is_empty() first")
        return self.queue.popleft()

    def drain(self, fn: Callable[[Any], Any]) -> int:
        """Passes every item to `fn`, removing each after `fn` returns; returns the count."""
        queue = self.queue
        count = 0
        while queue:
            fn(queue[0])
            queue.popleft()
            count += 1
        return count

    def drain_to(self, target: MutableSequence[Any]) -> int:
        """Moves every item to the end of `target`; returns the count."""
        count = len(self.queue)
        target.extend(self.queue)
        self.queue.clear()
        return count

    def __len__(self) -> int:
        return len(self.queue)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.queue)!r})"
