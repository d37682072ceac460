"""Port of Jet 0.7 `com.hazelcast.jet.impl.connector.ReadIListPTest`: `read_list_p` reads a
whole list, shorter or longer than Jet's fetch size (16,384 items).

Deliberate difference: Jet runs `ReadIListP` through TestSupport with a Jet instance behind it;
jetspark's TestSupport has no engine (and so no named lists), so the port runs the source on a
one-member LocalEngine with one processor into a list sink and compares the lists.
"""

from __future__ import annotations

import pytest

from jetspark.core import DAG, LocalEngine
from jetspark.edges import between
from jetspark.processors import read_list_p, write_list_p

pytestmark = pytest.mark.timeout(120)

FETCH_SIZE = 16_384
"""Jet's `ReadIListP.FETCH_SIZE`."""


def read_all(list_length: int) -> None:
    engine = LocalEngine()
    data = list(range(list_length))
    engine.get_list("source").extend(data)
    dag = DAG()
    source = dag.new_vertex("source", read_list_p("source"), local_parallelism=1)
    sink = dag.new_vertex("sink", write_list_p("sink"), local_parallelism=1)
    dag.edge(between(source, sink))
    engine.new_job(dag).join(timeout=60)
    assert engine.get_list("sink") == data


def test_when_size_less_than_fetch_size_then_read_all() -> None:
    """`ReadIListPTest.when_sizeLessThanFetchSize_then_readAll`."""
    read_all(FETCH_SIZE // 2)


def test_when_size_more_than_fetch_size_then_read_all() -> None:
    """`ReadIListPTest.when_sizeMoreThanFetchSize_then_readAll`."""
    read_all(FETCH_SIZE * 3 // 2)
