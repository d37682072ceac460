"""The outbox the runtime hands a processor: a fast `offer` and watermarks kept apart from items."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from jetspark.core.errors import ProcessorContractError
from jetspark.core.outbox import _NOTHING, Ordinals, OutboxImpl
from jetspark.core.runtime.coalescer import NO_WATERMARK
from jetspark.core.watermark import IDLE_MESSAGE, Watermark

if TYPE_CHECKING:
    from jetspark.edges.routing import Router

_IDLE_TIMESTAMP = IDLE_MESSAGE.timestamp


class TaskletOutbox(OutboxImpl):
    """An OutboxImpl whose buckets are lists and whose watermarks wait as marks beside them.

    A watermark offered to ordinal `o` becomes a mark `[position, watermark]` in `marks[o]`:
    it follows the items before `position` and precedes the rest, so `drain_to` moves chunks of
    items without testing each one. Watermarks must strictly increase per ordinal (IDLE_MESSAGE
    aside); a processor breaking that gets a ProcessorContractError naming it (`owner`).
    """

    def __init__(self, capacities: Sequence[int], owner: str) -> None:
        super().__init__(capacities)
        self.owner = owner
        self.buckets: list[list[Any]] = [[] for _ in capacities]  # type: ignore[assignment]
        self.marks: list[list[list[Any]]] = [[] for _ in capacities]
        """Per ordinal: `[position in bucket, watermark]` pairs, in order."""
        self.emitted_count = [0] * len(capacities)
        """Per ordinal: items and watermarks handed to the router so far."""
        self.routing_ordinal = 0
        """The ordinal being drained, so a routing error can name its edge."""
        self._last_watermark: list[float] = [NO_WATERMARK] * len(capacities)
        if len(capacities) == 1:
            self.offer = self._single_bucket_offer()  # type: ignore[method-assign]
            self.offer_items = self._single_bucket_offer_items()  # type: ignore[method-assign]

    def offer(self, item: Any, ordinal: Ordinals = None) -> bool:
        """Adds `item` to the bucket(s); False when a bucket is full (offer it again later)."""
        if type(item) is Watermark:
            return self._offer_watermark(item, ordinal)
        return OutboxImpl.offer(self, item, ordinal)

    def _single_bucket_offer(self) -> Callable[..., bool]:
        """The one-bucket `offer`: a closure, so the hot path reads one attribute, not five."""
        bucket = self.buckets[0]
        capacity = self.capacities[0]

        def offer(item: Any, ordinal: Ordinals = None) -> bool:
            if (
                ordinal is None
                and len(bucket) < capacity
                and type(item) is not Watermark
                and self._unfinished is _NOTHING
            ):
                bucket.append(item)
                return True
            return TaskletOutbox.offer(self, item, ordinal)

        return offer

    def _single_bucket_offer_items(self) -> Callable[..., int]:
        """The one-bucket `offer_items`: the items that fit go in as one slice, so a batch costs
        a list copy, not a call per item (unless a refused offer is pending)."""
        bucket = self.buckets[0]
        capacity = self.capacities[0]

        def offer_items(items: Sequence[Any], start: int = 0) -> int:
            if self._unfinished is not _NOTHING:
                return OutboxImpl.offer_items(self, items, start)
            stop = start + capacity - len(bucket)
            chunk = items[start:stop] if start or stop < len(items) else items
            bucket.extend(chunk)
            return start + len(chunk)

        return offer_items

    def _offer_watermark(self, watermark: Watermark, ordinal: Ordinals) -> bool:
        if self._unfinished is not _NOTHING:
            self._check_same_offer(watermark, ordinal)
        ordinals = self.ordinals_of(ordinal)
        timestamp = watermark.timestamp
        idle = timestamp == _IDLE_TIMESTAMP
        accepted = self._accepted
        refused = False
        for o in ordinals:
            if o in accepted:
                continue
            if not idle and timestamp <= self._last_watermark[o]:
                raise ProcessorContractError(
                    f"{self.owner} emitted watermark {timestamp} to ordinal {o} after watermark "
                    f"{self._last_watermark[o]}: the watermarks a processor emits must strictly "
                    "increase (only one processor in a pipeline should emit them)"
                )
            marks = self.marks[o]
            if len(marks) >= self.capacities[o]:
                refused = True
                continue
            marks.append([len(self.buckets[o]), watermark])
            accepted.add(o)
            if not idle:
                self._last_watermark[o] = timestamp
        if refused:
            self._unfinished = watermark
            self._unfinished_ordinals = ordinals
            return False
        accepted.clear()
        self._unfinished = _NOTHING
        return True

    def is_empty(self) -> bool:
        """True when no item or watermark waits in any bucket."""
        return not any(self.buckets) and not any(self.marks)

    def is_backed_up(self) -> bool:
        """True when every ordinal holds items or watermarks its router refused the last time
        the outbox was drained (each has a full queue downstream): whatever the processor
        emitted now would wait behind them, so it reaches no downstream processor sooner."""
        return bool(self.buckets) and all(
            bucket or marks for bucket, marks in zip(self.buckets, self.marks, strict=True)
        )

    def drain_to(self, routers: Sequence[Router]) -> int:
        """Hands bucket contents to the routers, in order; returns the items and marks moved.

        Stops at what a router refuses (a full queue): that stays for the next call, so the
        processor's next offers are refused once its bucket fills up.
        """
        moved = 0
        marks_by_ordinal = self.marks
        for ordinal, bucket in enumerate(self.buckets):
            marks = marks_by_ordinal[ordinal]
            if not marks:
                if bucket:
                    self.routing_ordinal = ordinal
                    count = routers[ordinal].route(bucket, len(bucket))
                    if count:
                        del bucket[:count]
                        moved += count
                        self.emitted_count[ordinal] += count
                continue
            self.routing_ordinal = ordinal
            moved += self._drain_marked(bucket, marks, routers[ordinal], ordinal)
        return moved

    def _drain_marked(
        self, bucket: list[Any], marks: list[list[Any]], router: Router, o: int
    ) -> int:
        """Drains a bucket that holds marks: items up to each mark, then the mark's watermark."""
        moved = 0
        while True:
            end = marks[0][0] if marks else len(bucket)
            if end:
                count = router.route(bucket, end)
                if count:
                    del bucket[:count]
                    for mark in marks:
                        mark[0] -= count
                    moved += count
                if count < end:
                    break
            if not marks or not router.push_control(marks[0][1]):
                break
            del marks[0]
            moved += 1
        self.emitted_count[o] += moved
        return moved
