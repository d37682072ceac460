"""The outbox of a source processor in a micro-batch: it accepts a fixed number of items.

SparkEngine runs a job with a processing guarantee as micro-batches
(jetspark.core.spark.microbatch.batch).
The driver fixes how many items each source processor may emit in a batch, before the batch
starts, so that a Spark task retried from the same snapshot emits exactly the same items. The
cap sits in the outbox, so any replayable source honours it without knowing of micro-batches:
once the budget is spent, offers are refused as if the outbox were full; the source's
`complete()` returns False with nothing emitted, and the tasklet saves the batch's snapshot.

A source with less at hand than its budget ends its batch early, with what it had. A task
run again (after a lost executor, while other tasks have read the first run's output) must
not emit more: it gets the first run's count as an exact budget and emits exactly that many.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jetspark.core.outbox import Ordinals, OutboxImpl
from jetspark.core.runtime.outbox import TaskletOutbox
from jetspark.core.runtime.queue import DEFAULT_QUEUE_BYTES
from jetspark.core.watermark import Watermark


class BudgetedOutbox(TaskletOutbox):
    """A TaskletOutbox that accepts at most `budget` items (watermarks do not count); with
    `exact`, the batch's input ends only once all of them were emitted (a task run again)."""

    def __init__(
        self,
        capacities: Sequence[int],
        owner: str,
        budget: int,
        exact: bool = False,
        max_bytes: int = DEFAULT_QUEUE_BYTES,
    ) -> None:
        super().__init__(capacities, owner, max_bytes)
        self.granted = budget
        self.budget = budget
        """Items this outbox still accepts."""
        self.exact = exact
        offer = self.offer
        sliced = self.offer_items if len(capacities) == 1 else None
        """The one-bucket outbox takes a batch as one slice, without calling `offer`."""

        def budgeted_offer(item: Any, ordinal: Ordinals = None) -> bool:
            if type(item) is Watermark:
                return offer(item, ordinal)
            if self.budget <= 0 and not self.has_unfinished_item():
                return False
            if not offer(item, ordinal):
                return False
            self.budget -= 1
            return True

        def budgeted_offer_items(items: Sequence[Any], start: int = 0) -> int:
            if sliced is None or self.has_unfinished_item():
                return OutboxImpl.offer_items(self, items, start)  # one budgeted offer per item
            stop = start + self.budget
            end = sliced(items if stop >= len(items) else items[:stop], start)
            self.budget -= end - start
            return end

        self.offer = budgeted_offer  # type: ignore[method-assign]
        self.offer_items = budgeted_offer_items  # type: ignore[method-assign]

    @property
    def spent(self) -> int:
        """The items emitted so far."""
        return self.granted - self.budget

    @property
    def owes_items(self) -> bool:
        """True while an exact budget is not spent: the batch's input has not ended yet."""
        return self.exact and self.budget > 0
