"""Resumable emission of a lazily built sequence, to the outbox or to the snapshot, and the
batch offer of a list of items."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.traverser import Traverser, traverse_iterable


class ResumableEmission:
    """Emits the items of a sequence built on the first call, resuming after a full outbox.

    `emit_fn` is a processor's `emit_from_traverser` or `emit_from_traverser_to_snapshot`.
    `emit(build)` calls `build()` only when no emission is in progress, and returns True once
    every item went out; the sequence may be a generator that updates state as it advances.
    """

    __slots__ = ("_emit_fn", "_traverser")

    def __init__(self, emit_fn: Callable[[Traverser], bool]) -> None:
        self._emit_fn = emit_fn
        self._traverser: Traverser | None = None

    def emit(self, build: Callable[[], Iterable[Any]]) -> bool:
        """Emits what `build()` returns (None items are skipped); False: call again later."""
        if self._traverser is None:
            self._traverser = traverse_iterable(build())
        if not self._emit_fn(self._traverser):
            return False
        self._traverser = None
        return True

    @property
    def in_progress(self) -> bool:
        """True while a sequence is partly emitted."""
        return self._traverser is not None


def offer_batch(
    processor: AbstractProcessor,
    offer_items: Callable[[Sequence[Any], int], int],
    items: Sequence[Any],
    start: int,
    plain: bool,
) -> int:
    """Offers `items[start:]` to the processor's outbox; returns the index of the first item not
    accepted (`len(items)` when all were). A `plain` batch (`is_plain_batch`) goes to
    `offer_items` at once; otherwise one item at a time, None skipped, a Watermark on its own."""
    if plain:
        return offer_items(items, start)
    end = start
    while end < len(items) and (items[end] is None or processor.try_emit(items[end])):
        end += 1
    return end
