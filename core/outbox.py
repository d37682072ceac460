"""The Outbox a processor emits to: a bounded bucket per outbound ordinal, plus a snapshot one."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from itertools import islice
from typing import Any, Protocol, runtime_checkable

from jetspark.core.errors import ProcessorContractError
from jetspark.core.watermark import Watermark

Ordinals = int | Sequence[int] | None
"""Where an item goes: None for every bucket, an int for one, a sequence for several."""

_NOTHING = object()


@runtime_checkable
class Outbox(Protocol):
    """What a processor offers its output to (manual §8.3.2)."""

    def offer(self, item: Any, ordinal: Ordinals = None) -> bool: ...
    def offer_to_snapshot(self, key: Any, value: Any) -> bool: ...
    def has_unfinished_item(self) -> bool: ...
    def bucket_count(self) -> int: ...


def offer_items_of(outbox: Outbox) -> Callable[[Sequence[Any], int], int]:
    """`outbox.offer_items` (see `OutboxImpl.offer_items`); an Outbox of the user's own may
    lack it, and then OutboxImpl's, which works with any `offer`, stands in."""
    offer_items = getattr(outbox, "offer_items", None)
    return offer_items if offer_items is not None else partial(OutboxImpl.offer_items, outbox)


_NOT_PLAIN = frozenset({type(None), Watermark})
_ONLY_TUPLES = frozenset({tuple})
_ONLY_PAIRS = frozenset({2})


def is_plain_batch(items: Sequence[Any]) -> bool:
    """True when no item is None (traversers and sources skip those) or a Watermark (which must
    be offered on its own), so the whole batch may go to `offer_items`.

    A batch of strs (lines, words: the common case) is told by one `str.join`, which checks
    every item's type in C, five times faster than looking at each item's type.
    """
    if items and type(items[0]) is str:
        try:
            "".join(items)
        except TypeError:
            pass  # not all strs: look at each item
        else:
            return True
    return _NOT_PLAIN.isdisjoint(map(type, items))


def _same_item(a: Any, b: Any) -> bool:
    """Identity or equality, tolerating types whose `==` is not a plain bool (numpy arrays)."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


class OutboxImpl:
    """An Outbox whose buckets are deques of bounded capacity, drained by whoever owns it.

    A refused offer leaves the item "unfinished": the processor must offer that same item to
    the same ordinals again (Jet's contract); offering another item first, or the item to other
    ordinals, raises ProcessorContractError, because the refused item would otherwise be lost
    or duplicated. An ordinal outside `range(bucket_count())` raises ProcessorContractError too.
    """

    def __init__(self, capacities: Sequence[int], snapshot_capacity: int = 1024) -> None:
        if any(c < 1 for c in capacities) or snapshot_capacity < 1:
            raise ValueError(f"bucket capacities must be >= 1, got {list(capacities)}")
        self.capacities = list(capacities)
        self.buckets: list[deque[Any]] = [deque() for _ in capacities]
        self.snapshot_capacity = snapshot_capacity
        self.snapshot_bucket: deque[tuple[Any, Any]] = deque()
        self.owner = "processor"
        """Named in contract errors; the runtime sets it to the vertex and processor index."""
        self._all_ordinals = tuple(range(len(capacities)))
        self._unfinished: Any = _NOTHING
        self._unfinished_ordinals: tuple[int, ...] = ()
        """The ordinals the refused item was offered to: it must be offered to them again."""
        self._accepted: set[int] = set()
        self._unfinished_snapshot: Any = _NOTHING

    def offer(self, item: Any, ordinal: Ordinals = None) -> bool:
        """Adds `item` to the bucket(s); False when a bucket is full (offer it again later)."""
        if self._unfinished is not _NOTHING:
            self._check_same_offer(item, ordinal)
        if type(ordinal) is int:
            if not 0 <= ordinal < len(self.buckets):
                self._raise_bad_ordinal(ordinal)
            bucket = self.buckets[ordinal]
            if len(bucket) >= self.capacities[ordinal]:
                self._unfinished = item
                self._unfinished_ordinals = (ordinal,)
                return False
            bucket.append(item)
            self._unfinished = _NOTHING
            return True
        return self._offer_to_many(item, self.ordinals_of(ordinal))

    def ordinals_of(self, ordinal: Ordinals) -> tuple[int, ...]:
        """The ordinals an `offer(item, ordinal)` goes to; ProcessorContractError naming a
        non-existent one."""
        if ordinal is None:
            return self._all_ordinals
        ordinals = (ordinal,) if isinstance(ordinal, int) else tuple(ordinal)
        count = len(self.buckets)
        for o in ordinals:
            if type(o) is not int or not 0 <= o < count:
                self._raise_bad_ordinal(o)
        return ordinals

    def _check_same_offer(self, item: Any, ordinal: Ordinals) -> None:
        """Raises unless `item` and `ordinal` repeat the refused offer."""
        pending = self._unfinished
        if not _same_item(item, pending):
            self._raise_different_item(item, pending)
        ordinals = self.ordinals_of(ordinal)
        if set(ordinals) != set(self._unfinished_ordinals):
            raise ProcessorContractError(
                f"{self.owner} offered {item!r} to ordinals {list(ordinals)} after its offer to "
                f"ordinals {list(self._unfinished_ordinals)} was refused by a full outbox; it "
                "must offer the item to the same ordinals again, or the item is lost on some "
                "and duplicated on others"
            )

    def _raise_bad_ordinal(self, ordinal: Any) -> None:
        raise ProcessorContractError(
            f"{self.owner} offered an item to ordinal {ordinal!r}, but its outbox has ordinals "
            f"0..{len(self.buckets) - 1} (one per outbound edge)"
        )

    def _offer_to_many(self, item: Any, ordinals: tuple[int, ...]) -> bool:
        accepted = self._accepted
        refused = False
        for o in ordinals:
            if o in accepted:
                continue
            bucket = self.buckets[o]
            if len(bucket) >= self.capacities[o]:
                refused = True
            else:
                bucket.append(item)
                accepted.add(o)
        if refused:
            self._unfinished = item
            self._unfinished_ordinals = ordinals
            return False
        accepted.clear()
        self._unfinished = _NOTHING
        return True

    def offer_items(self: Outbox, items: Sequence[Any], start: int = 0) -> int:
        """Offers `items[start:]` to every ordinal, as `offer(item)` one by one would, and stops
        at the first refusal; returns the position of the first item not taken (`len(items)`
        when all were). The items must be plain items, not Watermarks (offer those with
        `offer`): the runtime's outbox takes a batch in one move, without looking at them."""
        offer = self.offer
        for position in range(start, len(items)):
            if not offer(items[position]):
                return position
        return len(items)

    def room(self) -> int:
        """How many more items every bucket accepts now: 0 while a refused item is owed."""
        if self._unfinished is not _NOTHING:
            return 0
        return min(c - len(b) for c, b in zip(self.capacities, self.buckets, strict=True))

    def offer_to_snapshot(self, key: Any, value: Any) -> bool:
        """Adds a state entry to the snapshot bucket; False when it is full."""
        entry = (key, value)
        pending = self._unfinished_snapshot
        if pending is not _NOTHING and not _same_item(entry, pending):
            self._raise_different_item(entry, pending, "snapshot ")
        if len(self.snapshot_bucket) >= self.snapshot_capacity:
            self._unfinished_snapshot = entry
            return False
        self.snapshot_bucket.append(entry)
        self._unfinished_snapshot = _NOTHING
        return True

    def offer_snapshot_entries(self, entries: Iterator[Any]) -> Any:
        """Moves entries of `entries` into the snapshot bucket while it has room, as
        `offer_to_snapshot(key, value)` one by one would; returns the next entry, not taken, for
        the caller to offer with `offer_to_snapshot` (None when `entries` ran out). The
        entries that fit go in as one slice when all are `(key, value)` tuples."""
        bucket = self.snapshot_bucket
        room = self.snapshot_capacity - len(bucket)
        if room <= 0 or self._unfinished_snapshot is not _NOTHING:
            return next(entries, None)
        chunk = list(islice(entries, room))
        if _ONLY_TUPLES.issuperset(map(type, chunk)) and _ONLY_PAIRS.issuperset(map(len, chunk)):
            bucket.extend(chunk)
        else:
            for key, value in chunk:
                self.offer_to_snapshot(key, value)
        return next(entries, None) if len(chunk) == room else None

    def has_unfinished_item(self) -> bool:
        """True when the last offer was refused and the processor still owes it."""
        return self._unfinished is not _NOTHING or self._unfinished_snapshot is not _NOTHING

    def bucket_count(self) -> int:
        """The number of outbound ordinals."""
        return len(self.buckets)

    def is_full(self, ordinal: int) -> bool:
        """True when the bucket of `ordinal` would refuse an item."""
        return len(self.buckets[ordinal]) >= self.capacities[ordinal]

    def _raise_different_item(self, item: Any, pending: Any, kind: str = "") -> None:
        raise ProcessorContractError(
            f"{self.owner} offered {kind}item {item!r} while the earlier offer of {pending!r} was "
            "refused by a full outbox; it must offer that same item again (after returning from "
            "the callback) before any other, or the refused item is lost"
        )

    def __repr__(self) -> str:
        return f"OutboxImpl(buckets={[list(b) for b in self.buckets]!r})"
