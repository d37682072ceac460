"""The outbox the runtime hands a processor: a fast `offer` and watermarks kept apart from items."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jetspark.core.errors import ProcessorContractError
from jetspark.core.outbox import _NOTHING, Ordinals, OutboxImpl
from jetspark.core.runtime.coalescer import NO_WATERMARK
from jetspark.core.runtime.queue import DEFAULT_QUEUE_BYTES
from jetspark.core.runtime.sizes import updated_estimate
from jetspark.core.watermark import IDLE_MESSAGE, Watermark

if TYPE_CHECKING:
    from collections.abc import Callable

    from jetspark.edges.routing import Router

_IDLE_TIMESTAMP = IDLE_MESSAGE.timestamp

FIRST_SAMPLE = 16
"""Items a bucket takes after it was drained before it samples one; each later sample point
is four times the bucket's length at the sample before (three samples fill a bucket of 1,024
small items)."""


class TaskletOutbox(OutboxImpl):
    """An OutboxImpl whose buckets are lists and whose watermarks wait as marks beside them.

    A watermark offered to ordinal `o` becomes a mark `[position, watermark]` in `marks[o]`:
    it follows the items before `position` and precedes the rest, so `drain_to` moves chunks of
    items without testing each one. Watermarks must strictly increase per ordinal (IDLE_MESSAGE
    aside); a processor breaking that gets a ProcessorContractError naming it (`owner`).

    A bucket holds at most its edge's queue size of items and, like the queues downstream
    (queue.py), about `max_bytes`: `caps[o]` items at the estimated bytes per item, at least
    one (an empty bucket takes any item). The estimate costs nothing per item: a bucket samples
    one item (sizes.py) when it refuses one, when a drain leaves items in it (the queues
    downstream are full), and as it fills, at sample points (`capacities[o]`, the offers' limit:
    FIRST_SAMPLE items after a drain, then each time its length quadrupled): an offer finding a
    bucket at its limit has it sample the item, then take or refuse it. So items that
    turn large within one call are seen after FIRST_SAMPLE of them, or three times as many as
    the bucket held at its last sample. Until its first sample a bucket takes one item.
    `room()` promises what the caps leave, and `offer_items` takes that whole.
    """

    def __init__(
        self, capacities: Sequence[int], owner: str, max_bytes: int = DEFAULT_QUEUE_BYTES
    ) -> None:
        super().__init__(capacities)
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        self.owner = owner
        self.buckets: list[list[Any]] = [[] for _ in capacities]  # type: ignore[assignment]
        self.marks: list[list[list[Any]]] = [[] for _ in capacities]
        """Per ordinal: `[position in bucket, watermark]` pairs, in order."""
        self.emitted_count = [0] * len(capacities)
        """Per ordinal: items and watermarks handed to the router so far."""
        self.routing_ordinal = 0
        """The ordinal being drained, so a routing error can name its edge."""
        self.queue_sizes = list(capacities)
        """Per ordinal: the items, and the watermarks, a bucket holds at most."""
        self.max_bytes = max_bytes
        self.item_bytes = [0] * len(capacities)
        """Per ordinal: the estimated bytes per item (0 before the first sample)."""
        self.caps = [1] * len(capacities)
        """Per ordinal: the items a bucket holds at most at its estimate."""
        self.capacities = [1] * len(capacities)
        self._last_watermark: list[float] = [NO_WATERMARK] * len(capacities)
        self._set_single_limit: Callable[[int], None] | None = None
        if len(capacities) == 1:
            self._single_bucket_paths()

    def offer(self, item: Any, ordinal: Ordinals = None) -> bool:
        """Adds `item` to the bucket(s); False when a bucket is full (offer it again later).
        A bucket at its limit samples `item` (see the class)."""
        if type(item) is Watermark:
            return self._offer_watermark(item, ordinal)
        return OutboxImpl.offer(self, item, ordinal) or self._offer_sampled(item, ordinal)

    def offer_items(self, items: Sequence[Any], start: int = 0) -> int:
        """`OutboxImpl.offer_items`, the items `room()` promises going into each bucket as one
        slice, the rest one by one."""
        stop = min(len(items), start + self.room())
        if stop > start:
            chunk = items[start:stop]
            for ordinal, bucket in enumerate(self.buckets):
                bucket.extend(chunk)
                if len(bucket) >= self.capacities[ordinal]:
                    self._sample(ordinal, chunk[-1])
        return OutboxImpl.offer_items(self, items, stop)

    def room(self) -> int:
        """How many more items every bucket accepts now, as far as its cap goes (what it
        estimates `max_bytes` allows); 0 while a refused item is owed."""
        if self._unfinished is not _NOTHING:
            return 0
        return max(0, min(cap - len(b) for cap, b in zip(self.caps, self.buckets, strict=True)))

    def is_full(self, ordinal: int) -> bool:
        """True when the bucket of `ordinal` holds as many items as its cap."""
        return len(self.buckets[ordinal]) >= self.caps[ordinal]

    def _offer_sampled(self, item: Any, ordinal: Ordinals) -> bool:
        """After `item` was refused: samples it for each bucket that refused it, and offers it
        again when that moved one of their limits past their length."""
        again = False
        for o in self._unfinished_ordinals:
            if o not in self._accepted:
                self._sample(o, item)
                again = again or len(self.buckets[o]) < self.capacities[o]
        return again and OutboxImpl.offer(self, item, ordinal)

    def _sample(self, ordinal: int, item: Any) -> None:
        """Updates the bucket's bytes per item with `item`, then its cap and its next sample
        point."""
        estimate = updated_estimate(self.item_bytes[ordinal], item)
        self.item_bytes[ordinal] = estimate
        cap = min(self.queue_sizes[ordinal], max(1, self.max_bytes // estimate))
        self.caps[ordinal] = cap
        length = len(self.buckets[ordinal])
        self._set_limit(ordinal, min(cap, length + max(3 * length, FIRST_SAMPLE)))

    def _set_limit(self, ordinal: int, limit: int) -> None:
        self.capacities[ordinal] = limit
        if self._set_single_limit is not None:
            self._set_single_limit(limit)

    def _after_drain(self, ordinal: int) -> None:
        """Samples the newest item a drain left in the bucket; a bucket drained empty samples
        again FIRST_SAMPLE items into its next fill."""
        bucket = self.buckets[ordinal]
        if bucket:
            self._sample(ordinal, bucket[-1])
        elif self.capacities[ordinal] > FIRST_SAMPLE:
            self._set_limit(ordinal, min(self.caps[ordinal], FIRST_SAMPLE))

    def _single_bucket_paths(self) -> None:
        """Installs the one-bucket `offer`, `offer_items` and `room`: closures, so the hot path
        reads one attribute, not five; they share the bucket's limit, which `_set_limit`
        rebinds."""
        bucket = self.buckets[0]
        caps = self.caps
        limit = self.capacities[0]

        def offer(item: Any, ordinal: Ordinals = None) -> bool:
            if ordinal is None and type(item) is not Watermark and self._unfinished is _NOTHING:
                if len(bucket) < limit:
                    bucket.append(item)
                    return True
                if len(bucket) < caps[0]:  # a sample point
                    self._sample(0, item)
                    if len(bucket) < limit:
                        bucket.append(item)
                        return True
            return TaskletOutbox.offer(self, item, ordinal)

        def offer_items(items: Sequence[Any], start: int = 0) -> int:
            """The items that fit go in as slices, so a batch costs a list copy, not a call per
            item (unless a refused offer is pending); one sample per sample point passed."""
            if self._unfinished is not _NOTHING:
                return OutboxImpl.offer_items(self, items, start)
            end = start
            while end < len(items) and len(bucket) < caps[0]:
                stop = end + caps[0] - len(bucket)
                chunk = items[end:stop] if end or stop < len(items) else items
                bucket.extend(chunk)
                end += len(chunk)
                if len(bucket) < limit:
                    break
                self._sample(0, chunk[-1])
            return end

        def room() -> int:
            return 0 if self._unfinished is not _NOTHING else max(0, caps[0] - len(bucket))

        def set_limit(value: int) -> None:
            nonlocal limit
            limit = value

        self.offer = offer  # type: ignore[method-assign]
        self.offer_items = offer_items  # type: ignore[method-assign]
        self.room = room  # type: ignore[method-assign]
        self._set_single_limit = set_limit

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
            if len(marks) >= self.queue_sizes[o]:
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
        processor's next offers are refused once its bucket fills up (and the bucket samples
        its newest item then, see the class).
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
                    self._after_drain(ordinal)
                continue
            self.routing_ordinal = ordinal
            moved += self._drain_marked(bucket, marks, routers[ordinal], ordinal)
            self._after_drain(ordinal)
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
