"""The processor behind a source made with the pipeline's SourceBuilder (manual §5.11.1):
a state object from `create_fn(context)`, and `fill_buffer_fn(state, buffer)` called whenever
the job wants more items."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.outbox import Outbox
from jetspark.processors.events import JetEvent
from jetspark.processors.snapshots import ProcessorState

_SOURCE_STATE = ProcessorState("built_source")


class SourceBuffer:
    """What `fill_buffer_fn(state, buffer)` fills: `add(item)` (with a timestamp on a
    timestamped stream), and `close()` to end the source (a stream source may end too, as in
    Jet 0.7: its job then completes)."""

    __slots__ = ("_items", "_timestamped", "closed")

    def __init__(self, timestamped: bool) -> None:
        self._items: list[Any] = []
        self._timestamped = timestamped
        self.closed = False

    def add(self, item: Any, timestamp: int | None = None) -> None:
        """Adds an item; a timestamped stream's source gives each item its event timestamp."""
        if item is None:
            raise ValueError("a source buffer takes no None items")
        if self._timestamped:
            if timestamp is None:
                raise TypeError("a timestamped source adds each item with its timestamp")
            self._items.append(JetEvent(timestamp, item))
        elif timestamp is not None:
            raise TypeError("only a timestamped stream source adds items with a timestamp")
        else:
            self._items.append(item)

    def close(self) -> None:
        """Ends the source: no more items will be added."""
        self.closed = True

    def take(self) -> list[Any]:
        """The items added since the last call."""
        items, self._items = self._items, []
        return items


@dataclass(frozen=True)
class SourceSpec:
    """A built source: its functions, and whether it is bounded, timestamped or distributed."""

    name: str
    create_fn: Callable[[Context], Any]
    fill_buffer_fn: Callable[[Any, SourceBuffer], None]
    destroy_fn: Callable[[Any], None] | None = None
    create_snapshot_fn: Callable[[Any], Any] | None = None
    restore_snapshot_fn: Callable[[Any, list[Any]], None] | None = None
    bounded: bool = True
    timestamped: bool = False
    distributed: bool = False


class BuiltSourceP(AbstractProcessor):
    """Calls `fill_buffer_fn` and emits what it added; completes once the buffer is closed.
    Not distributed, only the job's processor 0 reads (the others complete at once, as if they
    were not there). Non-cooperative: the functions may block.

    Snapshot: `create_snapshot_fn(state)` with the items taken but not yet emitted; restored by
    `restore_snapshot_fn(state, saved)` with every saved value this processor takes over.
    """

    def __init__(self, spec: SourceSpec) -> None:
        self._spec = spec
        self._buffer = SourceBuffer(spec.timestamped)
        self._pending: list[Any] = []
        self._position = 0
        """How many of `_pending` were emitted."""
        self._state: Any = None
        self._active = False
        self._restored: list[Any] = []

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._active = self._spec.distributed or context.global_processor_index == 0
        if self._active:
            self._state = self._spec.create_fn(context)

    def complete(self) -> bool:
        if not self._active:
            return True  # a completed input holds no watermark back downstream
        if self._position == len(self._pending):
            if self._buffer.closed:
                return True
            self._spec.fill_buffer_fn(self._state, self._buffer)
            self._pending, self._position = self._buffer.take(), 0
        pending, offer = self._pending, self.outbox.offer
        while self._position < len(pending):
            if not offer(pending[self._position]):
                return False
            self._position += 1
        return self._buffer.closed

    def save_to_snapshot(self) -> bool:
        if not self._active or self._spec.create_snapshot_fn is None:
            return True
        unemitted = self._pending[self._position :]
        saved = (self._spec.create_snapshot_fn(self._state), unemitted)
        return self.try_emit_to_snapshot(*_SOURCE_STATE.entry(self.context, saved))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        saved = _SOURCE_STATE.saved(key, value)
        if ProcessorState.owns(self.context, saved):
            self._restored.append(saved.value)

    def finish_snapshot_restore(self) -> bool:
        restore = self._spec.restore_snapshot_fn
        if self._active and self._restored:
            if restore is None:
                raise ValueError(
                    f"source '{self._spec.name}' saved snapshots but has no restore_snapshot_fn"
                )
            restore(self._state, [state for state, _ in self._restored])
            self._pending = [item for _, pending in self._restored for item in pending]
            self._position = 0
        self._restored = []
        return True

    def close(self) -> None:
        if self._active and self._spec.destroy_fn is not None:
            self._spec.destroy_fn(self._state)
        self._active = False
