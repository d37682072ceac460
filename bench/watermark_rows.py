"""Row 13d: how much input a processor holds before its first coalesced watermark.

Every upstream processor emits items of rising event time with a watermark after every
QUEUE of them, into one processor over a distributed all-to-one edge of queue size QUEUE.
The coalesced watermark rises once every upstream's first watermark is in, so the items that
arrive before it are what window state would hold with nothing it may close yet. On LocalEngine
the upstreams' queues interleave: about upstreams x QUEUE items. A Spark reduce task reading
one upstream's map output after another would hold (M-1)/M of its input; jetspark's sorted
shuffle interleaves the upstreams by sequence, which bounds it by upstreams x QUEUE too. The
row compares the two engines' counts (a count, not a time: the machine's speed does not enter).
"""

from __future__ import annotations

from typing import Any

from bench.report import Goal, Row
from bench.timing import Samples
from jetspark.core import DAG, AbstractProcessor, LocalEngine, Watermark
from jetspark.edges import EdgeConfig, between

QUEUE = 64
PER_UPSTREAM = 50_000
_MAP = "items-before-first-watermark"


class RisingEvents(AbstractProcessor):
    """Emits (processor index, n) for n < PER_UPSTREAM, Watermark(n) after every QUEUE items."""

    def __init__(self) -> None:
        super().__init__()
        self._next = 0
        self._watermark_due = False

    def complete(self) -> bool:
        me = self.context.global_processor_index
        while self._next < PER_UPSTREAM:
            n = self._next
            if self._watermark_due:
                if not self.try_emit(Watermark(n)):
                    return False
                self._watermark_due = False
            if not self.try_emit((me, n)):
                return False
            self._next += 1
            self._watermark_due = self._next % QUEUE == 0
        return True


class ItemsBeforeWatermark(AbstractProcessor):
    """Counts the items received before the first watermark; writes (that count, all items)
    under its processor index."""

    def __init__(self) -> None:
        super().__init__()
        self._before: int | None = None
        self._items = 0

    def try_process_item(self, ordinal: int, item: Any) -> bool:
        self._items += 1
        return True

    def try_process_watermark(self, watermark: Watermark) -> bool:
        if self._before is None:
            self._before = self._items
        return True

    def complete(self) -> bool:
        index = self.context.global_processor_index
        self.context.stores.get_map(_MAP).update({index: (self._before, self._items)})
        return True


def delay_dag(upstreams: int) -> DAG:
    """`upstreams` RisingEvents processors (one per member) into one ItemsBeforeWatermark."""
    dag = DAG("watermark-delay")
    source = dag.new_vertex("rising-events", RisingEvents).local_parallelism(1)
    count = dag.new_vertex("count", ItemsBeforeWatermark).local_parallelism(1)
    edge = between(source, count).distributed().all_to_one()
    dag.edge(edge.set_config(EdgeConfig(queue_size=QUEUE)))
    assert upstreams >= 1
    return dag


def items_before_first_watermark(engine: Any) -> tuple[int, int]:
    """(items before the first coalesced watermark, all items) of one run on `engine`."""
    engine.get_map(_MAP).clear()
    engine.new_job(delay_dag(engine.members)).join()
    # one processor per member; the all-to-one edge feeds one of them (all see the watermarks)
    ((before, items),) = [counts for counts in engine.get_map(_MAP).values() if counts[1]]
    return before, items


def watermark_delay(spark: Any, rounds: int) -> list[Row]:
    """Row 13d, `rounds` times: SparkEngine on the run's context vs LocalEngine, same members."""
    members = spark.engine.members
    on_spark, local, inputs = [], [], []
    for _ in range(rounds):
        before, items = items_before_first_watermark(spark.engine)
        on_spark.append(float(before))
        inputs.append(items)
        local.append(float(items_before_first_watermark(LocalEngine(members))[0]))
    held_in_order = (members - 1) * PER_UPSTREAM
    return [
        Row.compare(
            "13d",
            f"items a processor receives before its first coalesced watermark ({members} "
            f"upstreams x {PER_UPSTREAM:,} items, a watermark every {QUEUE}, queue {QUEUE}): "
            "SparkEngine (sorted shuffle) vs LocalEngine",
            "items",
            Samples(tuple(on_spark)),
            Samples(tuple(local)),
            goal=Goal("<=", 2.0),
            note=f"reading one upstream's output after another would hold {held_in_order:,}",
            extra={"input_items": inputs, "upstream_after_upstream_items": held_in_order},
        )
    ]
