"""Outbox misuse met by a user (issue 17, item 1): re-offering a refused item to other ordinals,
offering to an ordinal that does not exist. On both engines, the job fails naming the processor;
the contract-keeping variant delivers every item exactly once."""

from __future__ import annotations

import re
import sys
from collections import Counter
from typing import Any

import pytest
from runtime_processors import ListSink, ship_to_executors

from jetspark.core import (
    DAG,
    Context,
    JobFailedError,
    LocalEngine,
    Outbox,
    OutboxImpl,
    Processor,
    ProcessorContractError,
)
from jetspark.edges import between, from_

pytestmark = pytest.mark.timeout(60)

ITEMS = 20_000


class Reoffering(Processor):
    """Emits range(ITEMS) to both edges; after a refusal re-offers the item to `retry_ordinals`."""

    def __init__(self, retry_ordinals: Any) -> None:
        self.retry_ordinals = retry_ordinals

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox
        self.next = 0
        self.refused = False

    def complete(self) -> bool:
        while self.next < ITEMS:
            ordinals = self.retry_ordinals if self.refused else None
            self.refused = not self.outbox.offer(self.next, ordinals)
            if self.refused:
                return False
            self.next += 1
        return True


class ToOrdinal(Processor):
    """Offers one item to the ordinal it was given, whether or not it exists."""

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox

    def complete(self) -> bool:
        return self.outbox.offer("x", self.ordinal)


def two_sinks_dag(retry_ordinals: Any) -> DAG:
    dag = DAG()
    source = dag.new_vertex("emitter", lambda: Reoffering(retry_ordinals), 1)
    first = dag.new_vertex("first", lambda: ListSink("first"), 1)
    second = dag.new_vertex("second", lambda: ListSink("second"), 1)
    dag.edge(between(source, first)).edge(from_(source, 1).to(second))
    return dag


def every_item_once_per_member(engine: Any) -> tuple[Counter[int], Counter[int]]:
    expected = Counter({item: engine.members for item in range(ITEMS)})
    return expected, expected


def run(engine: Any, dag: DAG) -> tuple[Counter[int], Counter[int]]:
    for name in ("first", "second"):
        engine.get_list(name).clear()
    engine.new_job(dag).join(timeout=50)
    return Counter(engine.get_list("first")), Counter(engine.get_list("second"))


def assert_fails_naming_the_emitter(engine: Any, dag: DAG, match: str) -> None:
    with pytest.raises(JobFailedError, match=match) as caught:
        engine.new_job(dag).join(timeout=50)
    assert caught.value.vertex_name == "emitter"
    assert re.match(r"vertex 'emitter', processor #[01] failed in complete", str(caught.value))


def test_re_offering_a_refused_item_to_one_ordinal_fails_naming_the_processor() -> None:
    assert_fails_naming_the_emitter(
        LocalEngine(members=2), two_sinks_dag(0), r"to ordinals \[0\] after its offer to ordinals"
    )


def test_re_offering_to_the_same_ordinals_delivers_every_item_exactly_once() -> None:
    engine = LocalEngine(members=2)
    assert run(engine, two_sinks_dag(None)) == every_item_once_per_member(engine)
    assert run(engine, two_sinks_dag([0, 1])) == every_item_once_per_member(engine)


@pytest.mark.parametrize("ordinal", [2, -1])
def test_offering_to_an_ordinal_that_does_not_exist_names_it(ordinal: int) -> None:
    dag = DAG()
    source = dag.new_vertex("emitter", lambda: ToOrdinal(ordinal), 1)
    dag.edge(between(source, dag.new_vertex("sink", lambda: ListSink("unused"), 1)))
    assert_fails_naming_the_emitter(
        LocalEngine(), dag, rf"to ordinal {ordinal}, but its outbox has ordinals 0..0"
    )


def test_the_harness_outbox_keeps_the_same_contract() -> None:
    outbox = OutboxImpl([1, 1])
    outbox.offer("a", 1)
    assert not outbox.offer("b")  # ordinal 0 takes it, ordinal 1 is full
    with pytest.raises(ProcessorContractError, match=r"ordinals \[0\] after .* ordinals \[0, 1\]"):
        outbox.offer("b", 0)
    outbox.buckets[1].clear()
    assert outbox.offer("b", [1, 0])  # the same ordinals, in any order
    assert [list(b) for b in outbox.buckets] == [["b"], ["b"]]


@pytest.mark.spark
def test_spark_re_offering_to_one_ordinal_fails_and_to_the_same_ordinals_is_exact(
    spark_engine: Any,
) -> None:
    ship_to_executors(sys.modules[__name__])
    assert_fails_naming_the_emitter(spark_engine, two_sinks_dag(0), "to ordinals")
    assert run(spark_engine, two_sinks_dag(None)) == every_item_once_per_member(spark_engine)
