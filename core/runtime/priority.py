"""The priority trap: a vertex consumes its inbound edges by priority, so an upstream feeding
both an early and a later edge of one vertex blocks on the later edge's full queue while the
vertex still waits for the early one. Detected in the DAG's shape (a warning at submit time)
and in a running member (the job fails with the diagnosis instead of hanging)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from jetspark.core.dag import DAG
from jetspark.core.errors import JobFailedError
from jetspark.core.runtime.inbound import InboundStream
from jetspark.core.runtime.tasklet import ProcessorTasklet
from jetspark.edges.edge import Edge

if TYPE_CHECKING:
    from jetspark.core.runtime.plan import EdgePlan

STALL_SECONDS = 1.0
"""How long no processor may progress, with a prioritized edge behind a full queue, before a
member's runtime declares the priority trap."""

_ADVICE = (
    "a vertex drains its inbound edges by priority, so an upstream feeding both blocks on the "
    "later edge's full queue while the vertex waits for the earlier edge (the priority trap); "
    "give the later edge a queue that holds all its items (EdgeConfig(queue_size=...)), or do "
    "not feed both edges from one upstream"
)


def _edge_name(edge: Edge) -> str:
    return f"{edge.source_name}:{edge.source_ordinal} -> {edge.dest_name}:{edge.dest_ordinal}"


def priority_trap_warnings(dag: DAG) -> list[str]:
    """One warning per pair of inbound edges of a vertex with different priorities that come
    from one upstream vertex: the DAG shape of the trap. (A trap through a longer path, the
    upstream feeding one edge through other vertices, depends on whether those buffer all their
    input; the running member detects it.)"""
    warnings = []
    for vertex in dag.vertices():
        inbound = [e for e in dag.edges() if e.dest_name == vertex.name]
        for early in inbound:
            for later in inbound:
                if (
                    early.get_priority() < later.get_priority()
                    and early.source_name == later.source_name
                ):
                    warnings.append(
                        f"vertex '{vertex.name}': edge {_edge_name(early)} (priority "
                        f"{early.get_priority()}) and edge {_edge_name(later)} (priority "
                        f"{later.get_priority()}) are both fed by vertex '{early.source_name}'; "
                        "if it emits more items than the later edge's queues hold, the job "
                        "hangs: " + _ADVICE
                    )
    return warnings


def priority_stall(tasklets: Iterable[object], edges: Sequence[EdgePlan]) -> JobFailedError | None:
    """The error for the first processor that waits for an edge of its current priority while
    a later edge's queue is full (call it only when nothing has progressed for a while)."""
    for tasklet in tasklets:
        if not isinstance(tasklet, ProcessorTasklet):
            continue
        waiting = tasklet.priority_wait()
        if waiting is None:
            continue
        awaited, full = waiting
        vertex = tasklet.vertex_name
        return JobFailedError(
            f"vertex '{vertex}', processor #{tasklet.index}: the job is stuck: it waits for edge "
            f"{_inbound_name(edges, vertex, awaited)} (priority {awaited.priority}) while edge "
            f"{_inbound_name(edges, vertex, full)} (priority {full.priority}) has a full queue, "
            f"and no processor made progress for {STALL_SECONDS:.0f} s: " + _ADVICE,
            vertex_name=vertex,
            processor_index=tasklet.index,
            callback="waiting for a prioritized edge",
        )
    return None


def _inbound_name(edges: Sequence[EdgePlan], vertex: str, stream: InboundStream) -> str:
    for plan in edges:
        if plan.edge.dest_name == vertex and plan.edge.dest_ordinal == stream.ordinal:
            return plan.name
    return f"#{stream.ordinal}"
