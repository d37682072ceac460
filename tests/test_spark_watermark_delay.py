"""How much input a Spark task buffers before its first coalesced watermark (issue 17 item 12).

A reduce task's input is sorted on (rank, sequence, edge, upstream), so the upstream
processors' records interleave: the coalesced watermark can rise as soon as every upstream
delivered its first watermark, whatever order Spark fetched the map outputs in. The bound:
before the first watermark, a processor receives at most one record per upstream, ahead of
that upstream's first watermark — at most `upstreams x queue_size` items — where reading one
upstream's output after the other would hold back (M-1)/M of all the input.
"""

from __future__ import annotations

from typing import Any

import pytest
from runtime_processors import ScriptSource

from jetspark.core import DAG, AbstractProcessor, Watermark
from jetspark.edges import EdgeConfig, between

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

QUEUE = 64
PER_UPSTREAM = 5_000


class ItemsBeforeWatermark(AbstractProcessor):
    """Counts the items it receives before its first watermark; saves the count at the end."""

    def __init__(self) -> None:
        super().__init__()
        self.before: int | None = None
        self.items = 0

    def try_process_item(self, ordinal: int, item: Any) -> bool:
        self.items += 1
        return True

    def try_process_watermark(self, watermark: Watermark) -> bool:
        if self.before is None:
            self.before = self.items
        return True

    def complete(self) -> bool:
        self.context.stores.get_map("before").update(
            {self.context.global_processor_index: (self.before, self.items)}
        )
        return True


def script(upstream: int) -> list[Any]:
    """Items of rising event time, a watermark after every QUEUE of them."""
    out: list[Any] = []
    for n in range(PER_UPSTREAM):
        out.append((upstream, n))
        if n % QUEUE == QUEUE - 1:
            out.append(Watermark(n))
    return out


def test_a_reduce_task_buffers_one_record_per_upstream_before_its_first_watermark(
    spark_engine: Any,
) -> None:
    upstreams = spark_engine.members
    dag = DAG()
    source = dag.new_vertex(
        "source", lambda: ScriptSource({i: script(i) for i in range(upstreams)})
    ).local_parallelism(1)
    count = dag.new_vertex("count", ItemsBeforeWatermark).local_parallelism(1)
    dag.edge(
        between(source, count).distributed().all_to_one().set_config(EdgeConfig(queue_size=QUEUE))
    )
    spark_engine.get_map("before").clear()
    spark_engine.new_job(dag).join(120)
    ((before, items),) = [v for v in spark_engine.get_map("before").values() if v[1]]
    assert items == upstreams * PER_UPSTREAM
    assert before <= upstreams * QUEUE  # read one upstream after the other: >= PER_UPSTREAM
