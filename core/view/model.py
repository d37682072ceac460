"""The JSON model of a job in the live view: figures per vertex and per edge, items/s from
successive samples, watermark lag behind the wall clock, snapshots and micro-batches."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jetspark.core.dag import DAG
from jetspark.core.job import Job
from jetspark.core.runtime.metrics import EdgeMetrics, JobMetrics
from jetspark.edges.edge import Edge

Clock = Callable[[], float]
"""Wall-clock seconds since the epoch (time.time); tests pass a clock of their own."""

RATE_SECONDS = 0.5
"""A rate compares a sample with the newest earlier one at least this many seconds older."""
RATE_SAMPLES = 64
"""Samples kept for rates; a view polled faster than that loses its rates, not its memory."""
SHOWN_SNAPSHOTS = 10
"""The newest snapshots the model lists."""
SHOWN_BATCHES = 10
"""The newest micro-batches the model lists."""


@dataclass(frozen=True)
class VertexFigures:
    """One vertex's counters, summed over its processors."""

    name: str
    processors: int
    received: int
    """Items its processors took from their inboxes."""
    emitted: int
    """Items and watermarks its processors sent downstream."""
    queued: int
    queue_capacity: int
    watermark: int | None
    """The lowest last watermark among its processors that received one (None: none did)."""
    state_bytes: int | None
    """Its processors' state in the latest snapshot (None: no snapshot committed yet)."""


def vertex_figures(dag: DAG, metrics: JobMetrics) -> list[VertexFigures]:
    """Every vertex of `dag`, in topological order, with its figures in `metrics`."""
    latest = metrics.snapshots[-1] if metrics.snapshots else None
    figures = []
    for vertex in dag.vertices():
        processors = metrics.of_vertex(vertex.name)
        watermarks = [p.last_received_wm for p in processors if p.last_received_wm is not None]
        figures.append(
            VertexFigures(
                vertex.name,
                len(processors),
                received=sum(sum(p.received_count.values()) for p in processors),
                emitted=sum(sum(p.emitted_count.values()) for p in processors),
                queued=sum(p.queues_size for p in processors),
                queue_capacity=sum(p.queues_capacity for p in processors),
                watermark=min(watermarks, default=None),
                state_bytes=None if latest is None else latest.vertex_bytes.get(vertex.name, 0),
            )
        )
    return figures


def edge_figures(dag: DAG, metrics: JobMetrics) -> list[tuple[Edge, EdgeMetrics]]:
    """Every edge of `dag` with its counters in `metrics` (zeros where it has none yet)."""
    by_id = {e.edge_id: e for e in metrics.edges}
    edges = dag.edges()
    return [(edge, by_id.get(i) or EdgeMetrics(i, edge_name(edge))) for i, edge in enumerate(edges)]


def edge_name(edge: Edge) -> str:
    """`source:ordinal -> dest:ordinal`, the name job metrics give the edge."""
    return f"{edge.source_name}:{edge.source_ordinal} -> {edge.dest_name}:{edge.dest_ordinal}"


def watermark_lag_ms(watermark: int | None, now: float) -> int | None:
    """Wall-clock milliseconds at `now` (seconds) minus `watermark` (event-time epoch ms)."""
    return None if watermark is None else round(now * 1000) - watermark


class Rates:
    """Per-second rates of named counters, from the samples taken so far."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, Mapping[str, int]]] = deque(maxlen=RATE_SAMPLES)

    def sample(self, now: float, counts: Mapping[str, int]) -> dict[str, float | None]:
        """The rate of each counter since the newest sample at least RATE_SECONDS older than
        `now` (None: no such sample, or the counter went down); keeps this sample."""
        samples = self._samples
        while len(samples) > 1 and now - samples[1][0] >= RATE_SECONDS:
            samples.popleft()
        base = samples[0] if samples and now - samples[0][0] >= RATE_SECONDS else None
        samples.append((now, counts))
        if base is None:
            return dict.fromkeys(counts)
        then, before = base
        return {
            name: (count - before[name]) / (now - then)
            if name in before and count >= before[name]
            else None
            for name, count in counts.items()
        }


class JobSampler:
    """The live view's model of one watched job: `model()` reads the job's metrics and returns
    them as plain JSON data, with rates over the time since an earlier call. `view_id` is the
    view's number for the job (jobs of two engines may share an id)."""

    def __init__(self, view_id: int, job: Job, dag: DAG, clock: Clock = time.time) -> None:
        self.view_id = view_id
        self.job = job
        self.dag = dag
        self._clock = clock
        self._rates = Rates()
        self._lock = threading.Lock()

    def model(self) -> dict[str, Any]:
        """The job's figures now; callable from any thread."""
        job = self.job
        metrics = job.metrics
        now = self._clock()
        vertices = vertex_figures(self.dag, metrics)
        edges = edge_figures(self.dag, metrics)
        counts = {f"vertex {v.name} in": v.received for v in vertices}
        counts |= {f"vertex {v.name} out": v.emitted for v in vertices}
        counts |= {f"edge {m.edge_id}": m.received_count for _, m in edges}
        with self._lock:
            rates = self._rates.sample(now, counts)
        return {
            "id": self.view_id,
            "job_id": job.id,
            "name": job.name,
            "status": job.status.value,
            "execution_mode": metrics.execution_mode,
            "restarts": metrics.restarts,
            "rescales": metrics.rescales,
            "sampled_at": now,
            "vertices": [
                {
                    "name": v.name,
                    "processors": v.processors,
                    "received": v.received,
                    "received_per_second": rates[f"vertex {v.name} in"],
                    "emitted": v.emitted,
                    "emitted_per_second": rates[f"vertex {v.name} out"],
                    "queued": v.queued,
                    "queue_capacity": v.queue_capacity,
                    "watermark": v.watermark,
                    "watermark_lag_ms": watermark_lag_ms(v.watermark, now),
                    "state_bytes": v.state_bytes,
                }
                for v in vertices
            ],
            "edges": [
                {
                    "name": m.name,
                    "source": edge.source_name,
                    "dest": edge.dest_name,
                    "routing": edge.describe(),
                    "emitted": m.emitted_count,
                    "received": m.received_count,
                    "received_per_second": rates[f"edge {m.edge_id}"],
                    "queued": m.queues_size,
                    "queue_capacity": m.queues_capacity,
                    "distributed_items": m.distributed_items,
                    "distributed_bytes": m.distributed_bytes,
                }
                for edge, m in edges
            ],
            "snapshots": [
                {
                    "id": s.snapshot_id,
                    "committed_at": s.committed_at,
                    "age_seconds": now - s.committed_at,
                    "duration_seconds": s.duration_seconds,
                    "bytes": s.bytes,
                }
                for s in reversed(metrics.snapshots[-SHOWN_SNAPSHOTS:])
            ],
            "batches": [
                {
                    "snapshot_id": b.snapshot_id,
                    "input_items": b.input_items,
                    "duration_seconds": b.duration_seconds,
                    "state_bytes": b.state_bytes,
                    "behind": b.behind,
                }
                for b in reversed(metrics.batches[-SHOWN_BATCHES:])
            ],
        }
