"""Row 21a: an asynchronous service call against a blocking one (issue #43, Jet 4's services).

A service of `LATENCY_SECONDS` per call, on LocalEngine(1) (one processor per vertex): list
"in" -> the lookup vertex -> list "out", items/s over `items` items.

- jetspark: `map_using_service_async_p`, the call a coroutine (`asyncio.sleep`) on the
  vertex's event loop, `IN_FLIGHT` calls in flight, results in input order (the default);
- baseline: `map_using_service_p` with the blocking call (`time.sleep`), the factory
  `to_non_cooperative()` as a blocking service should be.

Both outputs are checked first: every item's result once, in input order.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.report import Goal, Row
from bench.timing import alternate
from jetspark.core import DAG, LocalEngine
from jetspark.core.suppliers import ProcessorMetaSupplier
from jetspark.edges import between
from jetspark.processors import (
    ServiceFactories,
    map_using_service_async_p,
    map_using_service_p,
    read_list_p,
    write_list_p,
)

LATENCY_SECONDS = 0.005
"""How long the service takes to answer a call."""
IN_FLIGHT = 16
"""`max_concurrent_ops` of the asynchronous side."""
SERVICE = ServiceFactories.shared_service(lambda context: "service")


async def lookup_async(service: str, item: int) -> int:
    """The asynchronous call: answers after `LATENCY_SECONDS` without blocking its loop."""
    await asyncio.sleep(LATENCY_SECONDS)
    return 2 * item


def lookup_blocking(service: str, item: int) -> int:
    """The blocking call: answers after `LATENCY_SECONDS`, its thread waiting."""
    time.sleep(LATENCY_SECONDS)
    return 2 * item


def run_lookups(lookup: ProcessorMetaSupplier, items: int) -> list[Any]:
    """list "in" (0, 1, ...) -> `lookup` -> list "out" on LocalEngine(1); the output."""
    local = LocalEngine()
    local.get_list("in").extend(range(items))
    dag = DAG("bench service lookups")
    source = dag.new_vertex("source", read_list_p("in"))
    vertex = dag.new_vertex("lookup", lookup)
    sink = dag.new_vertex("sink", write_list_p("out"))
    dag.edge(between(source, vertex)).edge(between(vertex, sink))
    local.new_job(dag).join()
    return list(local.get_list("out"))


def service(items: int, rounds: int) -> list[Row]:
    """Row 21a (module docstring), `rounds` alternating rounds."""
    times, outputs = alternate(
        {
            "async": lambda: run_lookups(
                map_using_service_async_p(SERVICE, lookup_async, max_concurrent_ops=IN_FLIGHT),
                items,
            ),
            "blocking": lambda: run_lookups(
                map_using_service_p(SERVICE.to_non_cooperative(), lookup_blocking), items
            ),
        },
        rounds,
    )
    expected = [2 * item for item in range(items)]
    for name, output in outputs.items():
        if output != expected:
            raise AssertionError(f"the {name} lookups' output is not every result once, in order")
    rates = {name: samples.map(lambda s: items / s) for name, samples in times.items()}
    title = (
        f"service of {LATENCY_SECONDS * 1000:g} ms latency, {items:,} items, LocalEngine(1): "
        f"`map_using_service_async_p` ({IN_FLIGHT} in flight, in order) vs `map_using_service_p` "
        "(blocking, non-cooperative)"
    )
    return [
        Row.compare(
            "21a", title, "items/s", rates["async"], rates["blocking"], goal=Goal(">=", 10.0)
        )
    ]
