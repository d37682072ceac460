"""Snapshot entries for state that belongs to a processor rather than to a grouping key.

Keyed state is saved under the grouping key itself, so on restore each entry reaches the one
processor that owns the key's partition, whatever the new parallelism. State of a whole
processor (a global accumulator, a source's read position) is saved under a broadcast key, tagged
with the saving processor's global index and the total parallelism; every restored processor
sees every such entry and keeps the ones `ProcessorState.owns` assigns to it. A progress
marker (a watermark, the next window to emit) is saved by every processor under one broadcast
key and restored as the minimum of all (`RestoredMinimum`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jetspark.core.context import Context
from jetspark.core.snapshot_keys import BroadcastKey, broadcast_key


@dataclass(frozen=True)
class SavedState:
    """One processor's saved state: who saved it, out of how many, and the value."""

    processor_index: int
    total_parallelism: int
    value: Any


class ProcessorState:
    """Names one kind of per-processor state and maps saved entries to restoring processors."""

    __slots__ = ("key",)

    def __init__(self, name: str) -> None:
        self.key = broadcast_key(name)

    def entry(self, context: Context, value: Any) -> tuple[BroadcastKey, SavedState]:
        """The snapshot entry saving `value` as the state of the processor of `context`."""
        return self.key, SavedState(
            context.global_processor_index, context.total_parallelism, value
        )

    def saved(self, key: Any, value: Any) -> SavedState:
        """The SavedState of an entry this object made; a clear error for any other entry."""
        if key != self.key or not isinstance(value, SavedState):
            raise ValueError(f"unexpected snapshot entry {key!r}: expected {self.key!r}")
        return value

    @staticmethod
    def is_own(context: Context, saved: SavedState) -> bool:
        """True when `saved` was saved by the processor of `context` at the same parallelism."""
        return (
            saved.processor_index == context.global_processor_index
            and saved.total_parallelism == context.total_parallelism
        )

    @staticmethod
    def owns(context: Context, saved: SavedState) -> bool:
        """True when the processor of `context` takes over `saved`.

        Saved processor i goes to processor i mod the new total parallelism: with the same
        parallelism each processor gets its own state back; with fewer, some get several.
        """
        return saved.processor_index % context.total_parallelism == (context.global_processor_index)


class RestoredMinimum:
    """A value each processor saves under one broadcast key, restored as the minimum of all.

    Used for progress markers (the watermark reached, the next window to emit): every
    restored processor resumes from the least advanced saved processor, so nothing is skipped.
    Saved None values (no progress yet) are ignored.
    """

    __slots__ = ("_restored", "key")

    def __init__(self, name: str) -> None:
        self.key = broadcast_key(name)
        self._restored: list[Any] = []

    def entry(self, value: Any) -> tuple[BroadcastKey, Any]:
        """The snapshot entry saving `value`."""
        return self.key, value

    def restore(self, key: Any, value: Any) -> None:
        """Takes one restored entry; a clear error for a broadcast entry of another name."""
        if key != self.key:
            raise ValueError(f"unexpected snapshot entry {key!r}: expected {self.key!r}")
        if value is not None:
            self._restored.append(value)

    def result(self, default: Any) -> Any:
        """The minimum restored value (`default` if none), forgetting the restored values."""
        value = min(self._restored, default=default)
        self._restored = []
        return value
