"""Which of the driver's named lists and maps a Spark job ships into its tasks.

Only what the job's sources read: a source vertex (one without inbound edges) declares the
stores it reads as `store_reads`, a collection of `("list", name)` / `("map", name)` pairs, on
its meta-supplier, its supplier or its processor factory (the library's sources do; `()` means
none). A job whose sources all declare ships exactly those stores, so the outputs of earlier
jobs (a sink's map, say) stay on the driver. If any source declares nothing (a processor of
the user's own), the job ships every non-empty store, as it cannot know what that source reads.
Processors of other vertices are expected to write stores (sinks), not read them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from typing import Any

from py4j.protocol import Py4JError
from pyspark.core.broadcast import Broadcast

from jetspark.core.dag import DAG, Vertex
from jetspark.core.stores import Stores

StoreName = tuple[str, str]
"""("list", name) or ("map", name)."""


def declared_store_reads(vertex: Vertex) -> Collection[StoreName] | None:
    """The stores `vertex` declares it reads, or None when it declares nothing."""
    meta = vertex.meta_supplier
    supplier = getattr(meta, "supplier", None)
    for holder in (meta, supplier, getattr(supplier, "processor_fn", None)):
        reads = getattr(holder, "store_reads", None)
        if reads is not None:
            return reads
    return None


def stores_read_by(dag: DAG) -> set[StoreName] | None:
    """The stores the sources of `dag` read; None when some source does not say."""
    names: set[StoreName] = set()
    for vertex in dag.vertices():
        if dag.inbound_edges(vertex.name):
            continue
        reads = declared_store_reads(vertex)
        if reads is None:
            return None
        names.update(reads)
    return names


def shipped_contents(dag: DAG, stores: Stores) -> dict[str, dict[str, Any]]:
    """The part of the driver's `stores` that the tasks of a job running `dag` receive."""
    return stores.contents(stores_read_by(dag))


def free(shipped: Broadcast, *, wait: bool) -> None:
    """Frees `shipped`, the stores a job shipped, on the driver and every executor once the job
    (or a micro-batch of it) ended; a stopped context has freed it already. `wait` for the
    executors unless the job failed (an executor it lost could hold the wait up to Spark's RPC
    timeout), so that no removal is still in flight when the context stops right after, which
    Spark reports as an error ("Still have 1 requests outstanding")."""
    with contextlib.suppress(Py4JError):
        shipped.destroy(blocking=wait)
