"""Job metrics (manual §8.9.2): counters per processor and per edge, readable during a run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jetspark.core.runtime.plan import EdgePlan
from jetspark.core.runtime.tasklet import ProcessorTasklet


@dataclass
class ProcessorMetrics:
    """One processor's counters; ordinal-keyed dicts cover its inbound or outbound edges."""

    vertex: str
    member: int
    global_index: int
    received_count: dict[int, int] = field(default_factory=dict)
    """Per inbound ordinal: items handed to `process()` (watermarks and the like excluded)."""
    received_batches: dict[int, int] = field(default_factory=dict)
    """Per inbound ordinal: inbox fills; received_count / received_batches is the batch size."""
    emitted_count: dict[int, int] = field(default_factory=dict)
    """Per outbound ordinal: items and watermarks sent downstream."""
    last_received_wm: int | None = None
    """The last coalesced watermark handed to `try_process_watermark`."""
    queues_size: int = 0
    """Entries waiting in the processor's input queues; near capacity means it is a bottleneck."""
    queues_capacity: int = 0
    """The total capacity of its input queues."""


@dataclass
class EdgeMetrics:
    """One edge's counters, summed over the processors this runtime holds."""

    edge_id: int
    name: str
    emitted_count: int = 0
    """Items and watermarks the upstream processors sent into the edge."""
    received_count: int = 0
    """Items the downstream processors received from it."""
    received_batches: int = 0
    queues_size: int = 0
    queues_capacity: int = 0
    distributed_items: int = 0
    """Items and control entries that crossed members."""
    distributed_bytes: int = 0
    """Serialized bytes of the items that crossed members."""


@dataclass(frozen=True)
class SnapshotReport:
    """One committed snapshot of a job, as the job's metrics and live view report it."""

    snapshot_id: int
    committed_at: float
    """Wall-clock time of the commit (time.time())."""
    duration_seconds: float
    """From the snapshot's start (its request) to its commit."""
    bytes: int
    """Serialized bytes of all the processors' state."""
    vertex_bytes: Mapping[str, int] = field(default_factory=dict)
    """Vertex name -> the serialized bytes of its processors' state."""


RECENT_SNAPSHOTS = 100
"""How many SnapshotReports a job's metrics keep (the newest)."""
RECENT_BATCHES = 100
"""How many micro-batch reports a job's metrics keep (the newest)."""


@dataclass
class JobMetrics:
    """A snapshot of a job's metrics: plain data, safe to keep after the job ended."""

    processors: list[ProcessorMetrics] = field(default_factory=list)
    edges: list[EdgeMetrics] = field(default_factory=list)
    batches: list[Any] = field(default_factory=list)
    """SparkEngine micro-batch jobs: a `BatchReport` per recent micro-batch (at most
    RECENT_BATCHES, the newest), oldest first."""
    batch_count: int = 0
    """SparkEngine micro-batch jobs: how many micro-batches committed in all."""
    snapshots: list[SnapshotReport] = field(default_factory=list)
    """The newest committed snapshots (at most RECENT_SNAPSHOTS), oldest first."""
    snapshot_count: int = 0
    """How many snapshots the job committed in all (`snapshots` keeps the newest)."""
    restarts: int = 0
    """How many times the job restarted from a snapshot by itself after a failure."""
    rescales: int = 0
    """How many of those restarts ran on fewer members than before, the cluster having
    no task slot left for every member (SparkEngine continuous jobs)."""
    execution_mode: str = ""
    """How the job runs: "local", "stages", "micro_batch" or "continuous"."""
    staged_bytes: int = 0
    """SparkEngine continuous jobs with a guarantee: the sink writes (encoded bytes) the driver
    holds until the snapshot they belong to commits."""
    staged_bytes_peak: int = 0
    """The most `staged_bytes` has been in this job (`spark.jetspark.staged.maxSize` bounds it)."""

    def of_vertex(self, vertex: str) -> list[ProcessorMetrics]:
        """The processors of `vertex`, by global index."""
        return sorted(
            (p for p in self.processors if p.vertex == vertex), key=lambda p: p.global_index
        )

    def edge(self, source: str, dest: str) -> EdgeMetrics:
        """The (first) edge from vertex `source` to vertex `dest`."""
        prefix, middle = f"{source}:", f" -> {dest}:"
        for e in self.edges:
            if e.name.startswith(prefix) and middle in e.name:
                return e
        raise KeyError(f"no edge from '{source}' to '{dest}' in these metrics")


def collect_metrics(
    tasklets: Sequence[ProcessorTasklet],
    edges: Sequence[EdgePlan],
    traffic: Mapping[int, tuple[int, int]],
) -> JobMetrics:
    """Reads the live counters of the tasklets (from any thread) into a JobMetrics."""
    processors = [_processor_metrics(t) for t in tasklets]
    by_vertex: dict[str, list[ProcessorMetrics]] = {}
    for p in processors:
        by_vertex.setdefault(p.vertex, []).append(p)
    queues: dict[tuple[str, int], list[int]] = {}
    for t in tasklets:
        for stream in t.streams:
            sizes = queues.setdefault((t.vertex_name, stream.ordinal), [0, 0])
            sizes[0] += stream.queued()
            sizes[1] += stream.capacity()
    result = JobMetrics(processors)
    for e in edges:
        source = by_vertex.get(e.source_name, [])
        dest = by_vertex.get(e.dest_name, [])
        out_ordinal, in_ordinal = e.edge.source_ordinal, e.edge.dest_ordinal
        items, size = traffic.get(e.id, (0, 0))
        queued, capacity = queues.get((e.dest_name, in_ordinal), (0, 0))
        result.edges.append(
            EdgeMetrics(
                e.id,
                e.name,
                emitted_count=sum(p.emitted_count[out_ordinal] for p in source),
                received_count=sum(p.received_count[in_ordinal] for p in dest),
                received_batches=sum(p.received_batches[in_ordinal] for p in dest),
                queues_size=queued,
                queues_capacity=capacity,
                distributed_items=items,
                distributed_bytes=size,
            )
        )
    return result


def _processor_metrics(tasklet: ProcessorTasklet) -> ProcessorMetrics:
    context = tasklet.context
    streams = tasklet.streams
    return ProcessorMetrics(
        vertex=tasklet.vertex_name,
        member=context.member_index,
        global_index=tasklet.index,
        received_count={s.ordinal: s.received_count for s in streams},
        received_batches={s.ordinal: s.received_batches for s in streams},
        emitted_count=dict(enumerate(tasklet.outbox.emitted_count)),
        last_received_wm=tasklet.last_received_wm,
        queues_size=sum(s.queued() for s in streams),
        queues_capacity=sum(s.capacity() for s in streams),
    )
