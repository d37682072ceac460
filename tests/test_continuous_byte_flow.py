"""On local[2], items of about 1 MB on a distributed edge: the sending member stops at the link's
byte window and the receiver at its queue's bytes, not at two and one queue sizes of items, and
the output is exact (core/spark/continuous/flow.py with the default settings: a 4 MB window, a
2 MB queue).

The downstream processor takes nothing until the source is held back; how far the source got is
an upper bound whatever the machine's speed (the source releases the sink once it got nowhere
for a while, or once it ran past the bound, as it did when windows counted items).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from jetspark.core import DAG, AbstractProcessor, ExecutionMode, JobConfig, ProcessingGuarantee
from jetspark.edges import EdgeConfig, between, from_
from jetspark.processors import write_list_p

pytestmark = pytest.mark.spark

QUEUE = 16
ITEMS = 40
ITEM_BYTES = (1 << 20) - 1024
"""Just under 1 MB encoded: four fit the default 4 MB window, two the 2 MB queue."""
STALLED_CALLS = 200
"""Calls in a row in which the source could emit nothing: it is held back."""
BOUND = QUEUE + 4 + 2 + 2
"""Items out of the source's hands while the sink takes nothing: its outbox (a queue size of
entries), the link's window (4), the receive queue (2) and the sink's inbox (what the queue
held, 2). Counting items, the window alone held two queue sizes (32). The source emits one item
a call, so the link's first frame is measured before a second item goes."""


def _release_file(directory: str) -> str:
    return os.path.join(directory, "released")


class MegabyteSource(AbstractProcessor):
    """Processor 0 emits ITEMS items of ITEM_BYTES, one a call; it releases the sink once it is
    held back or ran past BOUND, and emits last, on ordinal 1, how many it had emitted by then."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory
        self.next = 0
        self.stalled = 0
        self.lead: int | None = None

    def complete(self) -> bool:
        if self.context.global_processor_index != 0:
            return True
        if self.next < ITEMS:
            if self.lead is None and (self.stalled >= STALLED_CALLS or self.next > BOUND):
                self.lead = self.next
                open(_release_file(self.directory), "w").close()
            if self.try_emit(bytes([self.next]) * ITEM_BYTES, 0):
                self.stalled = 0
                self.next += 1
            else:
                self.stalled += 1
            return False
        return self.try_emit(self.lead, 1)


class HeldSink(AbstractProcessor):
    """Takes nothing until the source released it, then emits what each item holds."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory
        self.released = False

    def try_process0(self, item: Any) -> bool:
        if not self.released:
            self.released = os.path.exists(_release_file(self.directory))
            if not self.released:
                return False
        return self.try_emit((item[0], len(item), item.count(item[:1]) == len(item)))


class FixedPartition:
    """Every key is its own partition: key 1 is owned by member 1 of two."""

    def partition(self, key: object, partition_count: int) -> int:
        assert isinstance(key, int)
        return key


def _to_member_1(item: Any) -> int:
    return 1


@pytest.fixture
def engine(spark_engine: Any) -> Any:
    from jetspark.core.spark import SparkEngine

    return SparkEngine(spark_engine.context, members=2)


def test_megabyte_items_fill_a_link_by_bytes_and_arrive_exactly(engine: Any, tmp_path: Any) -> None:
    directory = str(tmp_path)
    dag = DAG("megabytes")
    source = dag.new_vertex("source", lambda: MegabyteSource(directory), local_parallelism=1)
    held = dag.new_vertex("held", lambda: HeldSink(directory), local_parallelism=1)
    out = dag.new_vertex("out", write_list_p("megabytes-out"), local_parallelism=1)
    lead = dag.new_vertex("lead", write_list_p("megabytes-lead"), local_parallelism=1)
    to_member_1 = between(source, held).distributed().partitioned(_to_member_1, FixedPartition())
    dag.edge(to_member_1.set_config(EdgeConfig(queue_size=QUEUE)))
    dag.edge(between(held, out))
    dag.edge(from_(source, 1).to(lead))
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.NONE, execution_mode=ExecutionMode.CONTINUOUS
    )
    job = engine.new_job(dag, config)
    job.join(240)
    assert sorted(engine.get_list("megabytes-out")) == [(i, ITEM_BYTES, True) for i in range(ITEMS)]
    (lead_seen,) = engine.get_list("megabytes-lead")
    assert lead_seen <= BOUND, f"the source had {lead_seen} items of 1 MB out while none was taken"
