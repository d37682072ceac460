"""Resumable emission of a lazily built sequence, to the outbox or to the snapshot."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

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
