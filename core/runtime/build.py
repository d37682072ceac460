"""Building one member's part of a job from its JobPlan: processors, queues, routers, tasklets."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from jetspark.core.context import Context, ProcessorSupplierContext
from jetspark.core.errors import JobFailedError
from jetspark.core.processor import Processor
from jetspark.core.runtime.barrier import BarrierAligner
from jetspark.core.runtime.budget import BudgetedOutbox
from jetspark.core.runtime.closing import close_all
from jetspark.core.runtime.coalescer import WatermarkCoalescer
from jetspark.core.runtime.exchange import Exchange, Link
from jetspark.core.runtime.inbound import InboundStream
from jetspark.core.runtime.member import MemberRuntime
from jetspark.core.runtime.outbox import TaskletOutbox
from jetspark.core.runtime.plan import JobPlan, VertexPlan
from jetspark.core.runtime.queue import Queue
from jetspark.core.runtime.snapshot import SnapshotCoordinator
from jetspark.core.runtime.snapshot_tasklet import SnapshottingTasklet
from jetspark.core.runtime.tasklet import ProcessorTasklet, Tasklet
from jetspark.core.suppliers import ProcessorSupplier, as_processor_supplier
from jetspark.edges.routing import Channel


@dataclass
class _Wiring:
    """What the links of the built processors became: channels to write, queues to read."""

    channels: dict[tuple[int, int, int], Channel] = field(default_factory=dict)
    """(edge id, upstream, downstream) -> the channel the upstream's router writes to."""
    queues: dict[tuple[int, int], list[Queue]] = field(default_factory=dict)
    """(edge id, downstream) -> its queues, one per upstream processor, by upstream index."""


def build_member(
    plan: JobPlan,
    members: Iterable[int] = (0,),
    vertices: Iterable[str] | None = None,
    *,
    exchange: Exchange | None = None,
    cancel_event: threading.Event | None = None,
    stop_timeout: float = 5.0,
    snapshots: SnapshotCoordinator | None = None,
) -> MemberRuntime:
    """Builds the processors of `members` for the given vertices (default: all) into a runtime.

    Per member and vertex: the ProcessorSupplier from the plan's meta-supplier function, its
    `init` and `get(local parallelism)`, one Context per processor (global index = member *
    local parallelism + local index). A link between two built processors of one member is a
    Queue bounded by the edge's queue size and the plan's `queue_bytes` (as is each outbox
    bucket); any other link involving a built processor goes through `exchange` (required
    then). Processors' `init` runs when the runtime starts.
    A failing supplier raises JobFailedError; any failure closes the suppliers set up so far.
    With `snapshots` (a job with a processing guarantee) every processor gets a
    SnapshottingTasklet registered with that coordinator, restoring what it routes to it.
    """
    chosen = set(plan.vertices if vertices is None else vertices)
    unknown = chosen - set(plan.vertices)
    if unknown:
        raise ValueError(f"no such vertices in the plan: {sorted(unknown)}")
    member_list = sorted(set(members))
    if not member_list or not all(0 <= m < plan.member_count for m in member_list):
        raise ValueError(f"members must be in range({plan.member_count}), got {member_list}")
    names = [name for name in plan.vertices if name in chosen]
    suppliers: list[tuple[str, ProcessorSupplier]] = []
    processors: dict[tuple[str, int], tuple[Processor, Context]] = {}
    tasklets: list[Tasklet] = []
    try:
        for name in names:
            for member in member_list:
                _create_processors(plan, plan.vertices[name], member, suppliers, processors)
        wiring = _wire(plan, chosen, set(member_list), exchange)
        for name in names:
            vertex = plan.vertices[name]
            for member in member_list:
                for local in range(vertex.local_parallelism):
                    index = member * vertex.local_parallelism + local
                    processor, context = processors[(name, index)]
                    tasklets.append(
                        _tasklet(plan, vertex, index, processor, context, wiring, snapshots)
                    )
    except Exception as failure:
        close_all(
            [(v, None, "ProcessorSupplier.close", partial(s.close, failure)) for v, s in suppliers],
            failure,
        )
        raise
    if exchange is not None:
        tasklets.extend(exchange.tasklets())
    return MemberRuntime(
        tasklets,
        suppliers,
        edges=plan.edges,
        exchange=exchange,
        slow_callback_millis=plan.config.slow_callback_millis,
        cancel_event=cancel_event,
        stop_timeout=stop_timeout,
        snapshots=snapshots,
    )


def _create_processors(
    plan: JobPlan,
    vertex: VertexPlan,
    member: int,
    suppliers: list[tuple[str, ProcessorSupplier]],
    processors: dict[tuple[str, int], tuple[Processor, Context]],
) -> None:
    """Obtains the vertex's supplier on `member`, initialises it and makes its processors."""
    config = plan.config
    lp = vertex.local_parallelism
    shared: dict[str, Any] = {
        "vertex_name": vertex.name,
        "total_parallelism": vertex.total_parallelism,
        "local_parallelism": lp,
        "member_count": plan.member_count,
        "processing_guarantee": config.processing_guarantee,
        "partition_count": config.partition_count,
        "stores": plan.stores,
        "member_index": member,
    }
    callback = "ProcessorMetaSupplier.get function"
    try:
        supplier = as_processor_supplier(vertex.supplier_of_member(member), vertex.name)
        suppliers.append((vertex.name, supplier))
        callback = "ProcessorSupplier.init"
        supplier.init(ProcessorSupplierContext(**shared))
        callback = "ProcessorSupplier.get"
        made = list(supplier.get(lp))
        if len(made) != lp or not all(isinstance(p, Processor) for p in made):
            raise TypeError(
                f"get({lp}) must return {lp} Processor instances, got "
                f"{[type(p).__name__ for p in made]}"
            )
        _refuse_shared_instances(made, processors)
    except Exception as error:
        raise JobFailedError.caused_by(error, vertex_name=vertex.name, callback=callback) from error
    for local, processor in enumerate(made):
        index = member * lp + local
        context = Context(
            **shared,
            local_processor_index=local,
            global_processor_index=index,
        )
        processors[(vertex.name, index)] = (processor, context)


def _refuse_shared_instances(
    made: Sequence[Processor], processors: dict[tuple[str, int], tuple[Processor, Context]]
) -> None:
    """TypeError when a processor instance was handed out twice: each needs its own state."""
    owners = {id(processor): f"vertex {name!r}" for (name, _), (processor, _) in processors.items()}
    for position, processor in enumerate(made):
        owner = owners.setdefault(id(processor), f"local processor #{position}")
        if owner != f"local processor #{position}":
            raise TypeError(
                f"the supplier returned the same {type(processor).__name__} instance twice (it "
                f"was already given to {owner}); every processor needs an instance of its own, "
                "so make the supplier create a new one on each call"
            )


def _wire(plan: JobPlan, chosen: set[str], members: set[int], exchange: Exchange | None) -> _Wiring:
    """Creates a queue or an exchange channel for every link that touches a built processor."""
    wiring = _Wiring()
    for edge in plan.edges:
        source_built = edge.source_name in chosen
        dest_built = edge.dest_name in chosen
        if not (source_built or dest_built):
            continue
        for downstream, upstreams in edge.senders().items():
            dest_here = dest_built and downstream // edge.downstream_parallelism in members
            queues: list[Queue] = []
            for upstream in upstreams:
                source_here = source_built and upstream // edge.upstream_parallelism in members
                if not (source_here or dest_here):
                    continue
                link = Link(edge, upstream, downstream)
                queue = Queue(edge.queue_size, plan.queue_bytes) if dest_here else None
                if queue is not None:
                    queues.append(queue)
                if (
                    source_here
                    and queue is not None
                    and link.upstream_member == link.downstream_member
                ):
                    wiring.channels[(edge.id, upstream, downstream)] = queue
                    continue
                if exchange is None:
                    raise ValueError(
                        f"{link} crosses a member or build boundary: build_member needs an exchange"
                    )
                if source_here:
                    wiring.channels[(edge.id, upstream, downstream)] = exchange.sender(link, queue)
                else:
                    assert queue is not None
                    exchange.receiver(link, queue)
            if dest_here:
                wiring.queues[(edge.id, downstream)] = queues
    return wiring


def _tasklet(
    plan: JobPlan,
    vertex: VertexPlan,
    index: int,
    processor: Processor,
    context: Context,
    wiring: _Wiring,
    snapshots: SnapshotCoordinator | None,
) -> ProcessorTasklet:
    """The tasklet of one processor, with its outbox, routers, inbound streams and coalescer."""
    owner = f"vertex '{vertex.name}' processor #{index}"
    capacities = [e.queue_size for e in vertex.outbound]
    budget = _source_budget(vertex, index, snapshots)
    if budget is not None:
        outbox: TaskletOutbox = BudgetedOutbox(
            capacities, owner, *budget, max_bytes=plan.queue_bytes
        )
    else:
        outbox = TaskletOutbox(capacities, owner, plan.queue_bytes)
    routers = [
        e.router(index, [wiring.channels[(e.id, index, d)] for d in e.targets(index)])
        for e in vertex.outbound
    ]
    inbound_queues = [wiring.queues[(e.id, index)] for e in vertex.inbound]
    retain = plan.config.max_watermark_retain_millis
    queue_count = sum(map(len, inbound_queues))
    coalescer = WatermarkCoalescer(queue_count, retain)
    carried = snapshots.carried_watermarks.get((vertex.name, index)) if snapshots else None
    if carried is not None:
        coalescer.carry_on(carried)
    aligner = (
        BarrierAligner(
            queue_count,
            snapshots.exactly_once,
            _unaligned_queues(processor, vertex, inbound_queues),
        )
        if snapshots
        else None
    )
    streams = _streams(vertex, inbound_queues, coalescer, aligner)
    edge_names = [e.name for e in vertex.outbound]
    parts = (processor, context, outbox, streams, routers, coalescer, edge_names)
    if snapshots is None or aligner is None:
        return ProcessorTasklet(*parts, retain_watermarks=retain >= 0)
    tasklet = SnapshottingTasklet(
        *parts,
        coordinator=snapshots,
        aligner=aligner,
        restored=snapshots.restored(vertex.name, index),
        retain_watermarks=retain >= 0,
    )
    snapshots.register(tasklet)
    return tasklet


def _unaligned_queues(
    processor: Processor, vertex: VertexPlan, inbound_queues: list[list[Queue]]
) -> frozenset[int]:
    """The coalescer's numbers of the queues of `processor.snapshot_unaligned_ordinals()`."""
    unaligned_ordinals = getattr(processor, "snapshot_unaligned_ordinals", tuple)
    ordinals = set(unaligned_ordinals())
    unaligned: set[int] = set()
    first = 0
    for e, queues in zip(vertex.inbound, inbound_queues, strict=True):
        if e.edge.dest_ordinal in ordinals:
            unaligned.update(range(first, first + len(queues)))
        first += len(queues)
    return frozenset(unaligned)


def _source_budget(
    vertex: VertexPlan, index: int, snapshots: SnapshotCoordinator | None
) -> tuple[int, bool] | None:
    """The items a source processor may emit in this micro-batch, and whether it must emit
    exactly that many (a task run again); None: no limit."""
    if (
        snapshots is None
        or snapshots.source_item_budget is None
        or vertex.inbound
        or vertex.name in snapshots.sources_read_to_the_end
        or vertex.name in snapshots.unbudgeted_sources
    ):
        return None
    replayed = snapshots.replayed_input.get((vertex.name, index))
    return (snapshots.source_item_budget, False) if replayed is None else (replayed, True)


def _streams(
    vertex: VertexPlan,
    inbound_queues: list[list[Queue]],
    coalescer: WatermarkCoalescer,
    aligner: BarrierAligner | None,
) -> list[InboundStream]:
    """One InboundStream per inbound edge; queues numbered across edges for the coalescer."""
    streams = []
    first = 0
    for e, queues in zip(vertex.inbound, inbound_queues, strict=True):
        streams.append(
            InboundStream(
                e.edge.dest_ordinal, e.edge.get_priority(), queues, coalescer, first, aligner
            )
        )
        first += len(queues)
    return streams
