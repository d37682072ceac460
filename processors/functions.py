"""Small functions the processor factories take or give: keys, entries, per-ordinal lookups."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jetspark.core.context import Context
from jetspark.core.inbox import Inbox
from jetspark.core.state_definition import describe


def whole_item(item: Any) -> Any:
    """The item itself: the key function when the item is its own grouping key (Jet's wholeItem)."""
    return item


def entry(key: Any, value: Any) -> tuple[Any, Any]:
    """A `(key, value)` pair: the default output of keyed processors (Jet's Util.entry)."""
    return (key, value)


KeyFns = Callable[[Any], Any] | Sequence[Callable[[Any], Any]]
"""One key function for every inbound ordinal, or one per ordinal."""


class _Sentinel:
    """A unique marker that stays itself through copy, deepcopy and pickle.

    Processors hold it in fields ("no pending item"), and TestSupport deep-copies processor
    instances, so a plain `object()` marker would stop being identical to itself.
    """

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __copy__(self) -> _Sentinel:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Sentinel:
        return self

    def __reduce__(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return self._name


NOTHING = _Sentinel("NOTHING")
"""Marks "no value" where None is a legal value (an accumulator, a result)."""


def entry_key(item: Any) -> Any:
    """The key of an entry: `item[0]` of a (key, value) pair, `item.key` of a window result."""
    if type(item) is tuple:
        return item[0]
    key = getattr(item, "key", NOTHING)
    return item[0] if key is NOTHING else key


def entry_value(item: Any) -> Any:
    """The value of an entry: `item[1]` of a (key, value) pair, `item.value` of a window result."""
    if type(item) is tuple:
        return item[1]
    value = getattr(item, "value", NOTHING)
    return item[1] if value is NOTHING else value


def drain(inbox: Inbox) -> list[Any]:
    """Removes and returns every item of `inbox` (for processors that never emit in process())."""
    items: list[Any] = []
    inbox.drain_to(items)
    return items


def engine_stores(context: Context) -> Any:
    """The engine's named lists and maps (`get_list`, `get_map`), or an error naming the vertex."""
    if context.stores is None:
        raise RuntimeError(
            f"vertex '{context.vertex_name}': the engine provides no named lists or maps "
            "(context.stores is None)"
        )
    return context.stores


class PerOrdinal:
    """One function for every inbound ordinal, or a sequence with one function per ordinal.

    Calling it with an ordinal returns that ordinal's function; a single function serves all.
    """

    __slots__ = ("_fns", "_what", "per_ordinal")

    def __init__(
        self,
        fns: Callable[..., Any] | Sequence[Callable[..., Any]],
        what: str,
        *,
        per_ordinal: bool = False,
    ) -> None:
        self._what = what
        self.per_ordinal = per_ordinal
        """True when even a single function is for ordinal 0 only (Jet's `andAccumulate0`)."""
        if callable(fns):
            self._fns: tuple[Callable[..., Any], ...] = (fns,)
        elif isinstance(fns, Sequence):
            self._fns = tuple(fns)
        else:
            raise TypeError(
                f"expected a {what} (a callable) or a sequence of them, got {type(fns).__name__}"
            )
        if not self._fns:
            raise ValueError(f"at least one {what} is required")
        for fn in self._fns:
            if not callable(fn):
                raise TypeError(f"a {what} must be callable, got {type(fn).__name__}")

    def __call__(self, ordinal: int) -> Callable[..., Any]:
        """The function for inbound edge `ordinal`."""
        fns = self._fns
        if len(fns) == 1 and not self.per_ordinal:
            return fns[0]
        if 0 <= ordinal < len(fns):
            return fns[ordinal]
        raise ValueError(
            f"an item arrived on inbound ordinal {ordinal}, but only {len(fns)} {self._what}s "
            f"were given (one per ordinal 0..{len(fns) - 1})"
        )

    def __len__(self) -> int:
        return len(self._fns)

    def state_description(self) -> str:
        """Its functions by qualified name, as a snapshot records them (state_definition.py)."""
        return describe(self._fns[0] if len(self._fns) == 1 else self._fns)

    def map(self, transform: Callable[[Callable[..., Any]], Callable[..., Any]]) -> PerOrdinal:
        """The same shape with every function replaced by `transform(fn)`."""
        fns = [transform(fn) for fn in self._fns]
        return PerOrdinal(
            fns[0] if len(fns) == 1 else fns, self._what, per_ordinal=self.per_ordinal
        )

    def check_matches(self, other: PerOrdinal) -> None:
        """Raises ValueError when both give one function per ordinal but for different counts."""
        if len(self) > 1 and len(other) > 1 and len(self) != len(other):
            raise ValueError(
                f"{len(self)} {self._what}s but {len(other)} {other._what}s were given: give one "
                "per inbound ordinal for both, or a single one that serves every ordinal"
            )
