"""The item budget of micro-batches: how many items a source processor emits per batch, sized so
that a batch whose sources are behind takes about BUSY_FRACTION of the snapshot interval.

A batch costs a fixed part (a Spark job, task start, restore) and a part per item. From the last
two batches that spent their budget (of different budgets) the runner's `ItemBudget` estimates
both, a straight line through them; from one batch, the fixed part is taken as nothing. The next
budget fills the interval's busy share beyond the fixed part, and is never below what makes the
part per item as long as the fixed part (shrinking further would lower throughput, not the
batch's duration), nor below MIN_ITEM_BUDGET; it at most quadruples from one batch to the next.
So a slow sink (ms an item) brings the budget down to the few items that fit the interval, and
a fast job's budget grows to what its interval holds.

The first batch knows nothing of the job's costs: it starts small (INITIAL_ITEM_BUDGET), so a
job whose items are slow commits within about an interval rather than after a large first batch
(20,000 items of 2 ms each were 40 s), and its duration, which includes the job's start (Python
workers, a restore), is not taken as the cost of its items: the budget just grows from it.
"""

from __future__ import annotations

INITIAL_ITEM_BUDGET = 256
"""Items per source processor in a job's first batch; later batches adapt it."""
MIN_ITEM_BUDGET = 1
"""The fewest items per source processor a batch is given."""
BUSY_FRACTION = 0.8
"""The share of a snapshot interval a batch whose sources are behind is sized to take."""
MAX_GROWTH = 4.0
"""The most the budget grows from one batch to the next."""


class ItemBudget:
    """The budget of the next batch (`items`), adapted after each batch by `adapt`."""

    def __init__(self, fixed: int | None = None) -> None:
        """`fixed`: a budget that never changes (SparkEngine(batch_items=...)), else adapted
        from INITIAL_ITEM_BUDGET."""
        self.items = fixed or INITIAL_ITEM_BUDGET
        self._fixed = fixed is not None
        self._spent: list[tuple[int, float]] = []
        """(budget, seconds) of the last batches that spent their budget, newest last."""
        self._started = False
        """Whether a batch that spent its budget was taken in (the first one only grows it)."""

    def adapt(self, budget: int, seconds: float, behind: bool, interval: float) -> None:
        """Takes in a batch that had `budget` items per source and took `seconds`, whose
        sources were `behind` (spent their budget), for a snapshot interval of `interval` s."""
        if self._fixed or not behind or seconds <= 0:
            return
        if not self._started:  # the job's start is in its duration: no cost of its items
            self._started = True
            self.items = int(self.items * MAX_GROWTH)
            return
        self._spent = [point for point in self._spent if point[0] != budget][-1:]
        self._spent.append((budget, seconds))
        fixed_cost, per_item = self._line()
        room = max(BUSY_FRACTION * interval - fixed_cost, fixed_cost)
        wanted = int(room / per_item) if per_item > 0 else int(self.items * MAX_GROWTH)
        self.items = max(MIN_ITEM_BUDGET, min(wanted, int(self.items * MAX_GROWTH)))

    def _line(self) -> tuple[float, float]:
        """(fixed seconds of a batch, seconds per item), from the batches that spent budgets."""
        (budget, seconds) = self._spent[-1]
        if len(self._spent) == 2:
            (other_budget, other_seconds) = self._spent[0]
            per_item = (seconds - other_seconds) / (budget - other_budget)
            fixed_cost = seconds - per_item * budget
            if per_item > 0 and fixed_cost >= 0:
                return fixed_cost, per_item
        return 0.0, seconds / budget
