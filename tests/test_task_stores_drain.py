"""A Spark task drains what its sinks wrote to a map (TaskStores.result_records) while a
non-cooperative sink goes on writing from its own thread: no update is lost, and draining never
fails on a map that changes under it (issue #32: `non_cooperative_p(write_map_p(...))` in a
CONTINUOUS job failed 3 runs in 5 with `dictionary changed size during iteration`).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest

from jetspark.core import DAG, ExecutionMode, JobConfig
from jetspark.core.serialization import decode_batch
from jetspark.core.spark.stages.records import MAP
from jetspark.core.spark.stages.task_stores import TaskStores
from jetspark.edges import between
from jetspark.processors import generate_p, map_p, non_cooperative_p
from jetspark.processors.sinks import WriteMapP

pytestmark = pytest.mark.usefixtures("frequent_thread_switches")
WRITES = 200_000
RACES = 5


def _drain_while_writing(write: Any) -> list[tuple[str, str, list[Any]]]:
    """Runs `write(stores)` on a thread while draining the stores; every record drained."""
    stores = TaskStores(None)
    writer = threading.Thread(target=write, args=(stores,))
    drained: list[tuple[str, str, list[Any]]] = []

    def drain() -> None:
        for _, body in stores.result_records(0, 0):
            drained.append((body[1], body[2], decode_batch(body[3])))

    writer.start()
    while writer.is_alive():
        drain()
    writer.join()
    drain()
    return drained


def test_a_map_written_while_it_is_drained_ends_with_every_last_value() -> None:
    """Keys keep coming (the map grows under the drain) and each is written twice."""

    def write(stores: TaskStores) -> None:
        out = stores.get_map("out")
        for n in range(WRITES):
            out[n // 2] = n

    for _ in range(RACES):
        applied: dict[int, int] = {}
        for kind, _, entries in _drain_while_writing(write):
            assert kind == MAP
            applied.update(entries)
        assert applied == {key: 2 * key + 1 for key in range(WRITES // 2)}


class FrequentlySwitching(WriteMapP):
    """`write_map_p("squares")` on a Python worker that switches threads every microsecond
    while the sink runs (as the fixture above does in this process)."""

    def __init__(self) -> None:
        super().__init__("squares")
        self.before = sys.getswitchinterval()

    def init(self, outbox: Any, context: Any) -> None:
        super().init(outbox, context)
        sys.setswitchinterval(1e-6)

    def close(self) -> None:
        sys.setswitchinterval(self.before)


def _square(n: int) -> tuple[int, int]:
    return (n, n * n)


def _key(entry: tuple[int, int]) -> int:
    return entry[0]


@pytest.mark.spark
@pytest.mark.parametrize("run", range(3))
def test_a_non_cooperative_map_sink_in_a_continuous_job_is_exact(
    spark_engine: Any, run: int
) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2)
    dag = DAG("non-cooperative map")
    source = dag.new_vertex("source", generate_p(50_000))
    entries = dag.new_vertex("entries", map_p(_square))
    sink = dag.new_vertex("sink", non_cooperative_p(FrequentlySwitching))
    dag.edge(between(source, entries))
    dag.edge(between(entries, sink).distributed().partitioned(_key))
    engine.new_job(dag, JobConfig(execution_mode=ExecutionMode.CONTINUOUS)).join(120)
    assert engine.get_map("squares") == {n: n * n for n in range(50_000)}
