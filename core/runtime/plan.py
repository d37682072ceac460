"""The job-wide facts of an execution plan, computed once per job (on Spark: on the driver).

`plan_job` resolves every vertex's local parallelism, calls each meta-supplier's `init` and `get`
once, and fixes what routing needs job-wide: partition tables and the all-to-one targets. The
result is plain data (picklable with cloudpickle), from which `build_member` builds any member.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from jetspark.core.config import JobConfig
from jetspark.core.context import ProcessorMetaSupplierContext
from jetspark.core.dag import DAG, Vertex
from jetspark.core.edge_routing import EdgeRouting, routing_into
from jetspark.core.errors import DagValidationError, JobFailedError
from jetspark.core.runtime.closing import CloseStep, close_all
from jetspark.core.runtime.queue import DEFAULT_QUEUE_BYTES
from jetspark.core.state_definition import StateDefinition, definitions_of
from jetspark.edges.edge import Edge
from jetspark.edges.policy import RoutingPolicy
from jetspark.edges.routing import Channel, Router, make_router, partition_table, target_processors
from jetspark.partitioning import checked_partitioner

_log = logging.getLogger("jetspark")


@dataclass(frozen=True)
class EdgePlan:
    """An edge with the job-wide facts its routing needs; `id` is its index in `dag.edges()`."""

    id: int
    edge: Edge
    upstream_parallelism: int
    """Local parallelism of the source vertex."""
    downstream_parallelism: int
    """Local parallelism of the destination vertex."""
    member_count: int
    partition_count: int
    partition_table: tuple[int, ...] = ()
    """Partitioned and all-to-one edges: partition -> position among an upstream's targets."""
    all_to_one_partition: int | None = None
    """All-to-one edges: the partition chosen once per job; its processor gets every item."""

    @property
    def name(self) -> str:
        """`source:ordinal -> dest:ordinal`, as errors and metrics name the edge."""
        e = self.edge
        return f"{e.source_name}:{e.source_ordinal} -> {e.dest_name}:{e.dest_ordinal}"

    @property
    def source_name(self) -> str:
        """The source vertex."""
        return self.edge.source_name

    @property
    def dest_name(self) -> str:
        """The destination vertex."""
        assert self.edge.dest_name is not None
        return self.edge.dest_name

    @property
    def queue_size(self) -> int:
        """The capacity of each queue of the edge (and of the upstream's outbox bucket)."""
        return self.edge.config.queue_size

    def targets(self, upstream: int) -> list[int]:
        """Global indexes of the downstream processors that processor `upstream` feeds."""
        e = self.edge
        return target_processors(
            e.routing_policy,
            e.is_distributed,
            upstream,
            self.upstream_parallelism,
            self.downstream_parallelism,
            self.member_count,
        )

    def senders(self) -> dict[int, list[int]]:
        """Downstream global index -> the upstream global indexes feeding it, ascending."""
        feeders: dict[int, list[int]] = {
            d: [] for d in range(self.member_count * self.downstream_parallelism)
        }
        for upstream in range(self.member_count * self.upstream_parallelism):
            for downstream in self.targets(upstream):
                feeders[downstream].append(upstream)
        return feeders

    def router(self, upstream: int, channels: Sequence[Channel]) -> Router:
        """The router of processor `upstream`, over channels aligned with `targets(upstream)`."""
        e = self.edge
        return make_router(
            e.routing_policy,
            e.is_distributed,
            channels,
            upstream,
            key_fn=e.key_fn,
            partitioner=None if e.partitioner is None else checked_partitioner(e.partitioner),
            partition_count=self.partition_count,
            table=self.partition_table,
            all_to_one_partition=self.all_to_one_partition,
        )


@dataclass(frozen=True)
class VertexPlan:
    """A vertex with its resolved parallelism, its edges and its meta-supplier's member function."""

    vertex: Vertex
    local_parallelism: int
    member_count: int
    inbound: tuple[EdgePlan, ...]
    """By inbound ordinal."""
    outbound: tuple[EdgePlan, ...]
    """By outbound ordinal."""
    supplier_of_member: Callable[[int], Any]
    """What the meta-supplier's `get` returned: member index -> that member's ProcessorSupplier."""

    @property
    def name(self) -> str:
        """The vertex name."""
        return self.vertex.name

    @property
    def total_parallelism(self) -> int:
        """Processors of the vertex on all members."""
        return self.local_parallelism * self.member_count


@dataclass
class JobPlan:
    """Everything job-wide: the vertices in topological order, the edges, the settings."""

    config: JobConfig
    member_count: int
    vertices: dict[str, VertexPlan]
    edges: tuple[EdgePlan, ...]
    stores: Any = None
    """Named lists and maps handed to every context."""
    queue_bytes: int = DEFAULT_QUEUE_BYTES
    """The estimated bytes each queue between two processors of a member (and each outbox
    bucket) holds at most, besides the edge's queue size in items."""
    _closed: bool = field(default=False, init=False, repr=False, compare=False)

    def routing(self) -> dict[str, tuple[EdgeRouting, ...]]:
        """How the edges route into each vertex, as a snapshot of the job records it."""
        return routing_into(plan.edge for plan in self.edges)

    def state_definitions(self) -> dict[str, StateDefinition]:
        """The known state definition of each vertex, as a snapshot of the job records it."""
        return definitions_of(plan.vertex for plan in self.vertices.values())

    def close(self, error: BaseException | None) -> None:
        """Calls every meta-supplier's `close(error)` once; see `close_all` for failures."""
        if self._closed:
            return
        self._closed = True
        close_all(_meta_close_steps([p.vertex for p in self.vertices.values()], error), error)

    def close_after(self, error: BaseException | None) -> BaseException | None:
        """Closes the plan after a run that ended with `error` (None: success); returns the
        run's error, or the closing's own failure when the run had none."""
        try:
            self.close(error)
        except BaseException as failure:
            return error or failure
        return error


def plan_job(
    dag: DAG,
    config: JobConfig,
    member_count: int,
    default_local_parallelism: int,
    *,
    stores: Any = None,
    seed: int | None = None,
    queue_bytes: int = DEFAULT_QUEUE_BYTES,
) -> JobPlan:
    """Validates `dag` and computes the job-wide facts of running it on `member_count` members.

    A failing meta-supplier raises JobFailedError, after the ones already initialised are
    closed. Local parallelism: the vertex's own, else its meta-supplier's preferred one, else
    `default_local_parallelism`. `seed` drives the all-to-one choices (None: random).
    `queue_bytes` bounds the queues of a member in estimated bytes (JobPlan.queue_bytes).
    """
    dag.validate()
    if member_count < 1 or default_local_parallelism < 1:
        raise ValueError(
            f"member_count ({member_count}) and default_local_parallelism "
            f"({default_local_parallelism}) must be >= 1"
        )
    if type(queue_bytes) is not int or queue_bytes < 1:
        raise ValueError(f"queue_bytes must be an int >= 1, got {queue_bytes!r}")
    vertices = dag.vertices()
    parallelism = {v.name: _local_parallelism(v, default_local_parallelism) for v in vertices}
    rng = random.Random(seed)
    edges = tuple(
        _edge_plan(i, e, parallelism, member_count, config.partition_count, rng)
        for i, e in enumerate(dag.edges())
    )
    plans: dict[str, VertexPlan] = {}
    started: list[Vertex] = []
    try:
        for v in vertices:
            started.append(v)
            plans[v.name] = _vertex_plan(
                v, parallelism[v.name], member_count, edges, config, stores
            )
    except JobFailedError as failure:
        close_all(_meta_close_steps(started, failure), failure)
        raise
    return JobPlan(config, member_count, plans, edges, stores, queue_bytes)


def _local_parallelism(vertex: Vertex, default: int) -> int:
    lp = vertex.get_local_parallelism()
    if lp == -1:
        lp = vertex.meta_supplier.preferred_local_parallelism()
    if lp == -1:
        return default
    if not isinstance(lp, int) or lp < 1:
        raise DagValidationError(
            f"vertex '{vertex.name}': its meta-supplier's preferred local parallelism must be "
            f"-1 or >= 1, got {lp!r}"
        )
    return lp


def _edge_plan(
    index: int,
    edge: Edge,
    parallelism: dict[str, int],
    member_count: int,
    partition_count: int,
    rng: random.Random,
) -> EdgePlan:
    assert edge.dest_name is not None
    downstream = parallelism[edge.dest_name]
    policy = edge.routing_policy
    table: tuple[int, ...] = ()
    chosen = None
    if policy in (RoutingPolicy.PARTITIONED, RoutingPolicy.ALL_TO_ONE):
        table = partition_table(edge.is_distributed, member_count, downstream, partition_count)
    if policy is RoutingPolicy.ALL_TO_ONE:
        chosen = rng.randrange(partition_count)
    return EdgePlan(
        index,
        edge,
        parallelism[edge.source_name],
        downstream,
        member_count,
        partition_count,
        table,
        chosen,
    )


def _vertex_plan(
    vertex: Vertex,
    local_parallelism: int,
    member_count: int,
    edges: tuple[EdgePlan, ...],
    config: JobConfig,
    stores: Any,
) -> VertexPlan:
    """Calls the meta-supplier's `init` and `get`, reporting a failure as JobFailedError."""
    meta = vertex.meta_supplier
    context = ProcessorMetaSupplierContext(
        vertex_name=vertex.name,
        total_parallelism=local_parallelism * member_count,
        local_parallelism=local_parallelism,
        member_count=member_count,
        processing_guarantee=config.processing_guarantee,
        partition_count=config.partition_count,
        stores=stores,
    )
    callback = "ProcessorMetaSupplier.init"
    try:
        meta.init(context)
        callback = "ProcessorMetaSupplier.get"
        supplier_of_member = meta.get(list(range(member_count)))
    except Exception as error:
        raise JobFailedError.caused_by(error, vertex_name=vertex.name, callback=callback) from error
    return VertexPlan(
        vertex,
        local_parallelism,
        member_count,
        tuple(
            sorted(
                (e for e in edges if e.dest_name == vertex.name),
                key=lambda e: e.edge.dest_ordinal,
            )
        ),
        tuple(
            sorted(
                (e for e in edges if e.source_name == vertex.name),
                key=lambda e: e.edge.source_ordinal,
            )
        ),
        supplier_of_member,
    )


def _meta_close_steps(vertices: Sequence[Vertex], error: BaseException | None) -> list[CloseStep]:
    return [
        (v.name, None, "ProcessorMetaSupplier.close", partial(v.meta_supplier.close, error))
        for v in vertices
    ]
