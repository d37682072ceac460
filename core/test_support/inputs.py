"""The test input: one list per inbound ordinal, mixed into the order the processor sees it."""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jetspark.core.watermark import Watermark

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60


def show(value: Any) -> str:
    """A short repr for failure messages."""
    return _repr.repr(value)


@dataclass(frozen=True, slots=True)
class InputItem:
    """One input item with its place in the mixed input (`position`) and its inbound ordinal."""

    position: int
    ordinal: int
    item: Any

    def __str__(self) -> str:
        return f"input item #{self.position} (ordinal {self.ordinal}: {show(self.item)})"


def mix_inputs(inputs: Sequence[Sequence[Any]], priorities: Sequence[int]) -> list[InputItem]:
    """Orders the items as the engine delivers them: by priority (lower first), then round-robin."""
    by_priority: dict[int, list[int]] = {}
    for ordinal, priority in enumerate(priorities):
        by_priority.setdefault(priority, []).append(ordinal)
    mixed: list[tuple[int, Any]] = []
    for priority in sorted(by_priority):
        ordinals = by_priority[priority]
        for index in range(max(len(inputs[o]) for o in ordinals)):
            mixed.extend((o, inputs[o][index]) for o in ordinals if index < len(inputs[o]))
    items = [InputItem(position, ordinal, item) for position, (ordinal, item) in enumerate(mixed)]
    _check_items(items)
    return items


def _check_items(items: Sequence[InputItem]) -> None:
    """Rejects input the engine never delivers: None, idle messages, non-increasing watermarks."""
    last: Watermark | None = None
    for entry in items:
        if entry.item is None:
            raise ValueError(f"{entry}: None cannot be an item (the inbox uses None for 'empty')")
        if not isinstance(entry.item, Watermark):
            continue
        if entry.item.is_idle_message():
            raise ValueError(
                f"{entry}: IDLE_MESSAGE is consumed by watermark coalescing and never reaches a "
                "processor; leave it out of the test input"
            )
        if last is not None and entry.item.timestamp <= last.timestamp:
            raise ValueError(
                f"{entry}: watermarks in the input must increase ({entry.item} follows {last}), "
                "as the coalesced watermarks the engine delivers do"
            )
        last = entry.item


def fill_inbox_end(items: Sequence[InputItem], start: int, inbox_size: int) -> int:
    """The end of the inbox batch from `start`: same ordinal, no watermark, at most `inbox_size`."""
    ordinal = items[start].ordinal
    end = start
    while (
        end < len(items)
        and end - start < inbox_size
        and items[end].ordinal == ordinal
        and not isinstance(items[end].item, Watermark)
    ):
        end += 1
    return end
