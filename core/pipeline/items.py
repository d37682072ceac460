"""The item types a pipeline emits or passes between its stages (Jet's `TimestampedEntry`,
`TimestampedItem`, `ItemsByTag`, `Tag`), and the event wrapper of timestamped streams."""

from __future__ import annotations

from typing import Any, NamedTuple

from jetspark.processors.events import JetEvent

__all__ = [
    "EarlyTimestampedEntry",
    "EarlyTimestampedItem",
    "ItemsByTag",
    "JetEvent",
    "Tag",
    "TimestampedEntry",
    "TimestampedItem",
]


class TimestampedEntry(NamedTuple):
    """A grouped window's result: `timestamp` is the window's end, `key` the grouping key;
    `is_early` for a partial result of a window still open (early results)."""

    timestamp: int
    key: Any
    value: Any

    @property
    def is_early(self) -> bool:
        return False

    def as_early(self) -> TimestampedEntry:
        """The same result, marked early."""
        return EarlyTimestampedEntry(*self)


class EarlyTimestampedEntry(TimestampedEntry):
    """An early (partial) grouped window result; equal to a final one of the same fields."""

    __slots__ = ()

    @property
    def is_early(self) -> bool:
        return True


class TimestampedItem(NamedTuple):
    """An ungrouped window's result: `timestamp` is the window's end; `is_early` for a partial
    result of a window still open (early results)."""

    timestamp: int
    item: Any

    @property
    def is_early(self) -> bool:
        return False

    def as_early(self) -> TimestampedItem:
        """The same result, marked early."""
        return EarlyTimestampedItem(*self)


class EarlyTimestampedItem(TimestampedItem):
    """An early (partial) ungrouped window result; equal to a final one of the same fields."""

    __slots__ = ()

    @property
    def is_early(self) -> bool:
        return True


class Tag:
    """Names one input of a builder (`hash_join_builder`, `aggregate_builder`); its results are
    found in an `ItemsByTag` under it. Tags compare by their index."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tag) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("Tag", self.index))

    def __repr__(self) -> str:
        return f"Tag({self.index})"


class ItemsByTag:
    """What a builder's output function receives: one value per tag (None where there is none)."""

    __slots__ = ("_values",)

    def __init__(self, values: dict[Tag, Any] | None = None) -> None:
        self._values: dict[Tag, Any] = dict(values or {})

    def get(self, tag: Tag) -> Any:
        """The value under `tag`, or None."""
        return self._values.get(tag)

    def __getitem__(self, tag: Tag) -> Any:
        return self._values.get(tag)

    def put(self, tag: Tag, value: Any) -> None:
        """Sets the value under `tag`."""
        self._values[tag] = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ItemsByTag) and other._values == self._values

    def __hash__(self) -> int:
        """A value's hash, as Jet's ItemsByTag has (its values must be hashable for it)."""
        return hash(tuple(sorted((tag.index, value) for tag, value in self._values.items())))

    def __repr__(self) -> str:
        inner = ", ".join(f"{tag!r}: {value!r}" for tag, value in self._values.items())
        return f"ItemsByTag({{{inner}}})"

    def __reduce__(self) -> tuple[Any, ...]:
        return ItemsByTag, (self._values,)


def items_by_tag(results: tuple[Any, ...]) -> ItemsByTag:
    """The results of a co-aggregation, input i's under `Tag(i)`."""
    return ItemsByTag({Tag(index): result for index, result in enumerate(results)})
