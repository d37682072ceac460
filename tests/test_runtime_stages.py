"""A job run the way the Spark translator will run it: the plan once, then every stage (a subset
of vertices) built per member, stepped with `run_iter()`, its cross-stage links carried as
records through a test exchange, as a shuffle would carry them."""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from runtime_processors import (
    Endless,
    FlatMap,
    ListSink,
    ListSource,
    MapSink,
    Recorder,
    ScriptSource,
    SumByKey,
)

from jetspark.core import (
    DAG,
    JobCancelledError,
    JobConfig,
    Processor,
    ProcessorSupplier,
    Stores,
    Watermark,
)
from jetspark.core.runtime import (
    DONE,
    DONE_ITEM,
    MADE_PROGRESS,
    NO_PROGRESS,
    JobPlan,
    Link,
    Queue,
    Tasklet,
    build_member,
    plan_job,
)
from jetspark.core.serialization import decode_batch, encode_batch
from jetspark.edges import between
from jetspark.partitioning import HASH_CODE

pytestmark = pytest.mark.timeout(60)

FAN_OUT = 6
"""The most channels one router here writes to (a distributed edge into 3 members x LP 2)."""

Record = tuple[int, int, int, int, int, Any]
"""(edge id, target member, target local index, upstream global index, sequence, payload)."""


class RecordSender:
    """Turns what one upstream processor sends one remote processor into records."""

    def __init__(self, exchange: RecordExchange, link: Link) -> None:
        self.exchange = exchange
        self.key = (link.edge.id, link.downstream_member, link.downstream_local, link.upstream)
        self.chunk_limit = link.edge.queue_size
        self.sequence = 0

    def room(self) -> int:
        return self.chunk_limit if len(self.exchange.out) < self.exchange.limit else 0

    def push(self, chunk: list[Any]) -> None:
        self._record(encode_batch(chunk))

    def push_control(self, entry: Any) -> None:
        self._record(None if entry is DONE_ITEM else entry)

    def _record(self, payload: Any) -> None:
        self.exchange.out.append((*self.key, self.sequence, payload))
        self.sequence += 1


class RecordReader:
    """A tasklet feeding input records into the registered queues, one record held at most."""

    name = "record-reader"
    logger = logging.getLogger("jetspark.record-reader")
    callback = "call"

    def __init__(
        self, records: Iterator[Record], queues: dict[tuple[int, int, int], Queue]
    ) -> None:
        self.records = records
        self.queues = queues
        self.held: Record | None = None

    def init(self) -> None:
        pass

    def is_cooperative(self) -> bool:
        return True

    def close(self) -> None:
        pass

    def wake_on_input(self, wakeup: object) -> None:
        pass  # its input is an iterator read on the driving thread

    def call(self) -> int:
        result = NO_PROGRESS
        while True:
            record = self.held if self.held is not None else next(self.records, None)
            if record is None:
                return DONE
            edge, _member, local, upstream, _sequence, payload = record
            queue = self.queues[(edge, local, upstream)]
            if type(payload) is bytes:
                items = decode_batch(payload)
                if queue.room() < len(items):
                    self.held = record
                    return result
                queue.push(items)
            else:
                if queue.room() < 1:
                    self.held = record
                    return result
                queue.push_control(DONE_ITEM if payload is None else payload)
            self.held = None
            result = MADE_PROGRESS


class RecordExchange:
    """The Exchange seam as the Spark translator fills it: records out, records in."""

    def __init__(self, records_in: Iterable[Record] = (), limit: int = 4) -> None:
        self.out: deque[Record] = deque()
        self.limit = limit
        self.records_in = iter(records_in)
        self.queues: dict[tuple[int, int, int], Queue] = {}

    def sender(self, link: Link, queue: Queue | None) -> RecordSender:
        assert queue is None
        return RecordSender(self, link)

    def receiver(self, link: Link, queue: Queue) -> None:
        self.queues[(link.edge.id, link.downstream_local, link.upstream)] = queue

    def tasklets(self) -> Sequence[Tasklet]:
        return [RecordReader(self.records_in, self.queues)] if self.queues else []

    def traffic(self) -> Mapping[int, tuple[int, int]]:
        return {}


def run_stage(plan: JobPlan, vertices: list[str], records_in: list[Record]) -> list[Record]:
    """Runs one stage on every member, each as a Spark task would; returns the records out."""
    produced: list[Record] = []
    for member in range(plan.member_count):
        mine = [r for r in records_in if r[1] == member]
        exchange = RecordExchange(mine)
        runtime = build_member(plan, [member], vertices, exchange=exchange)
        for _progress in runtime.run_iter():
            # bounded: records leave between rounds; one router may fill all its channels at once
            assert len(exchange.out) <= exchange.limit + FAN_OUT
            produced.extend(exchange.out)
            exchange.out.clear()
        produced.extend(exchange.out)
    return produced


def test_word_count_in_two_stages_with_records_between_them() -> None:
    lines = [f"to be or not to be {i % 5} that is {i % 3}" for i in range(400)]
    stores = Stores()
    stores.get_list("lines").extend(lines)
    dag = DAG()
    source = dag.new_vertex("source", lambda: ListSource("lines"))
    tokenize = dag.new_vertex("tokenize", lambda: FlatMap(str.split))
    accumulate = dag.new_vertex("accumulate", SumByKey)
    combine = dag.new_vertex("combine", lambda: SumByKey(lambda e: e[0], lambda e: e[1]))
    sink = dag.new_vertex("sink", lambda: MapSink("counts"))
    dag.edge(between(source, tokenize))
    dag.edge(between(tokenize, accumulate).partitioned(lambda w: w, HASH_CODE))
    dag.edge(between(accumulate, combine).distributed().partitioned(lambda e: e[0]))
    dag.edge(between(combine, sink))
    plan = plan_job(dag, JobConfig(), 3, 2, stores=stores)

    shuffled = run_stage(plan, ["source", "tokenize", "accumulate"], [])
    assert {r[0] for r in shuffled} == {2}  # only the distributed edge leaves the stage
    done = [r for r in shuffled if r[5] is None]
    assert len(done) == 6 * 6  # every upstream tells every downstream processor it is done
    for key in {r[:4] for r in shuffled}:  # each link's records are numbered in order
        sequence = [r[4] for r in shuffled if r[:4] == key]
        assert sequence == list(range(len(sequence)))
    assert run_stage(plan, ["combine", "sink"], shuffled) == []
    plan.close(None)
    assert stores.get_map("counts") == dict(Counter(w for line in lines for w in line.split()))


def test_watermarks_cross_stages_as_records() -> None:
    stores = Stores()
    dag = DAG()
    source = dag.new_vertex(
        "source", lambda: ScriptSource({0: ["a", Watermark(3)], 1: ["b", Watermark(5)]})
    )
    sink = dag.new_vertex("sink", Recorder)
    dag.edge(between(source, sink).distributed())
    plan = plan_job(dag, JobConfig(), 2, 1, stores=stores)
    shuffled = run_stage(plan, ["source"], [])
    assert [r[5] for r in shuffled if isinstance(r[5], Watermark)].count(Watermark(3)) == 2
    run_stage(plan, ["sink"], shuffled)
    log = stores.get_list("recorded")
    assert sorted(e[3] for e in log if e[1] == "item") == ["a", "b"]
    for index in (0, 1):  # 3 from both; then 5, once the processor that sent 3 is done
        assert [e[2] for e in log if e[0] == index and e[1] == "wm"] == [3, 5]


class ClosingSupplier(ProcessorSupplier):
    """Supplies Endless sources and records the error its close() gets."""

    def __init__(self, errors: list[BaseException | None]) -> None:
        self.errors = errors

    def get(self, count: int) -> list[Processor]:
        return [Endless() for _ in range(count)]

    def close(self, error: BaseException | None) -> None:
        self.errors.append(error)


def test_closing_the_generator_early_stops_and_closes_everything() -> None:
    errors: list[BaseException | None] = []
    dag = DAG()
    source = dag.new_vertex("source", ClosingSupplier(errors))
    sink = dag.new_vertex("sink", lambda: ListSink("out"))
    dag.edge(between(source, sink))
    stores = Stores()
    runtime = build_member(plan_job(dag, JobConfig(), 1, 1, stores=stores), [0])
    steps = runtime.run_iter()
    for _ in range(5):
        assert next(steps) is True
    steps.close()  # a killed Spark task
    assert len(errors) == 1 and isinstance(errors[0], JobCancelledError)
    assert stores.get_list("out")  # items flowed before the stop
