"""Port of Jet 0.7 `com.hazelcast.jet.core.RoutingPolicyTest`: unicast, broadcast, partitioned
and isolated edges on a one-member LocalEngine, each producer processor emitting its own list
and each consumer processor keeping what it received.

Deliberate difference: Jet's consumer supplier keeps its processors in a static field; here the
supplier registers them in `RECEIVED`, a dict the test reads after the job (LocalEngine runs in
this process). The printing of Jet's `when_unicast` is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from jetspark.core import DAG, AbstractProcessor, LocalEngine, ProcessorSupplier
from jetspark.core.traversers import traverse_iterable
from jetspark.edges import between
from jetspark.processors import whole_item

pytestmark = pytest.mark.timeout(120)

NUMBERS_LOW = list(range(4096))
NUMBERS_HIGH = list(range(4096, 8192))


class ListSource(AbstractProcessor):
    """Emits one list (Jet's `ListSource`)."""

    def __init__(self, items: list[int]) -> None:
        self._items = traverse_iterable(items)

    def complete(self) -> bool:
        return self.emit_from_traverser(self._items)


class ListProducerSup(ProcessorSupplier):
    """One ListSource per list: the vertex's local parallelism must be the list count."""

    def __init__(self, *lists: list[int]) -> None:
        self._lists = lists

    def get(self, count: int) -> Sequence[ListSource]:
        assert count == len(self._lists), "the list count must equal the local parallelism"
        return [ListSource(items) for items in self._lists]


class ListSink(AbstractProcessor):
    """Keeps every item it receives."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def try_process_item(self, ordinal: int, item: Any) -> bool:
        self.items.append(item)
        return True


RECEIVED: dict[str, list[ListSink]] = {}


class ListConsumerSup(ProcessorSupplier):
    """Makes the ListSinks and registers them under `name`."""

    def __init__(self, name: str) -> None:
        self._name = name

    def get(self, count: int) -> Sequence[ListSink]:
        sinks = [ListSink() for _ in range(count)]
        RECEIVED[self._name] = sinks
        return sinks


def run(edge_setup: Any, consumers: int, *lists: list[int], name: str) -> list[list[Any]]:
    dag = DAG()
    producer = dag.new_vertex("producer", ListProducerSup(*lists), len(lists))
    consumer = dag.new_vertex("consumer", ListConsumerSup(name), consumers)
    dag.edge(edge_setup(between(producer, consumer)))
    LocalEngine().new_job(dag).join(timeout=60)
    return [sink.items for sink in RECEIVED.pop(name)]


def test_when_unicast() -> None:
    """`RoutingPolicyTest.when_unicast`."""
    received = run(lambda e: e, 2, NUMBERS_LOW, NUMBERS_HIGH, name="unicast")
    combined = received[0] + received[1]
    assert len(combined) == len(NUMBERS_LOW) + len(NUMBERS_HIGH)
    assert set(combined) == set(NUMBERS_LOW + NUMBERS_HIGH)


def test_when_broadcast() -> None:
    """`RoutingPolicyTest.when_broadcast`."""
    received = run(lambda e: e.broadcast(), 4, NUMBERS_LOW, NUMBERS_HIGH, name="broadcast")
    for items in received:
        assert set(items) == set(NUMBERS_LOW + NUMBERS_HIGH)


def test_when_partitioned() -> None:
    """`RoutingPolicyTest.when_partitioned`."""
    received = run(
        lambda e: e.partitioned(whole_item),
        2,
        NUMBERS_LOW,
        NUMBERS_LOW,
        NUMBERS_HIGH,
        NUMBERS_HIGH,
        name="partitioned",
    )
    assert set(received[0]).isdisjoint(received[1]), "sets were not disjoint"


def test_when_isolated_downstream_equals_upstream() -> None:
    """`RoutingPolicyTest.when_isolated_downstreamEqualsUpstream`."""
    received = run(lambda e: e.isolated(), 2, NUMBERS_LOW, NUMBERS_HIGH, name="isolated-2")
    assert received[0] == NUMBERS_LOW
    assert received[1] == NUMBERS_HIGH


def test_when_isolated_downstream_greater_than_upstream() -> None:
    """`RoutingPolicyTest.when_isolated_downstreamGreaterThanUpstream`."""
    received = run(lambda e: e.isolated(), 4, NUMBERS_LOW, NUMBERS_HIGH, name="isolated-4")
    assert set(received[0] + received[2]) == set(NUMBERS_LOW)
    assert set(received[1] + received[3]) == set(NUMBERS_HIGH)
