"""The live view's figures in Prometheus' text format (`/metrics`), through prometheus-client.

Counters are totals since the job started (items/s is PromQL's `rate()` of them); gauges are
the values at the scrape. Every series has the labels `job_id`, `job_name` and `view_id` (the
view's number for the job: jobs of two engines may share an id and a name); vertex series add
`vertex`, edge series `edge`, `source` and `dest`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from jetspark.core.runtime.metrics import EdgeMetrics, JobMetrics
from jetspark.core.view.model import (
    Clock,
    JobSampler,
    VertexFigures,
    edge_figures,
    vertex_figures,
    watermark_lag_ms,
)
from jetspark.edges.edge import Edge

_log = logging.getLogger("jetspark.view")

JOB_LABELS = ("job_id", "job_name", "view_id")
VERTEX_LABELS = (*JOB_LABELS, "vertex")
EDGE_LABELS = (*JOB_LABELS, "edge", "source", "dest")


@dataclass(frozen=True)
class _Reading:
    """One job's metrics at a scrape."""

    labels: tuple[str, str, str]
    status: str
    metrics: JobMetrics
    vertices: list[VertexFigures]
    edges: list[tuple[Edge, EdgeMetrics]]
    now: float


_Family = type[CounterMetricFamily] | type[GaugeMetricFamily]

_C, _G = CounterMetricFamily, GaugeMetricFamily

_LAST_SNAPSHOT: tuple[tuple[str, _Family, str, str], ...] = (
    ("id", _G, "snapshot_id", "The id of the job's newest committed snapshot."),
    ("timestamp_seconds", _G, "committed_at", "When the job's newest snapshot was committed."),
    ("duration_seconds", _G, "duration_seconds", "How long the newest snapshot took to commit."),
    ("bytes", _G, "bytes", "Serialized bytes of the processors' state in the newest snapshot."),
)
"""jetspark_job_last_snapshot_<suffix>: family, SnapshotReport attribute, help."""

_LAST_BATCH: tuple[tuple[str, _Family, str, str], ...] = (
    ("duration_seconds", _G, "duration_seconds", "How long the job's newest micro-batch took."),
    ("input_items", _G, "input_items", "Items the sources emitted in the newest micro-batch."),
    ("behind", _G, "behind", "1 when a source had more to read than the newest batch took."),
)
"""jetspark_job_last_batch_<suffix>: family, BatchReport attribute, help."""

_VERTEX_SERIES: tuple[tuple[str, _Family, str, str], ...] = (
    ("received_items", _C, "received", "Items the vertex's processors received."),
    ("emitted_items", _C, "emitted", "Items and watermarks the vertex's processors emitted."),
    ("queued_items", _G, "queued", "Items waiting in the vertex's input queues."),
    ("queue_capacity_items", _G, "queue_capacity", "The capacity of the vertex's input queues."),
    ("state_bytes", _G, "state_bytes", "The vertex's state in the newest snapshot."),
)
"""jetspark_vertex_<suffix>: family, VertexFigures attribute, help."""

_EDGE_SERIES: tuple[tuple[str, _Family, str, str], ...] = (
    ("emitted_items", _C, "emitted_count", "Items and watermarks sent into the edge."),
    ("received_items", _C, "received_count", "Items received from the edge."),
    ("queued_items", _G, "queues_size", "Items waiting in the edge's queues."),
    ("queue_capacity_items", _G, "queues_capacity", "The capacity of the edge's queues."),
    ("distributed_items", _C, "distributed_items", "Items and markers that crossed members."),
    ("distributed_bytes", _C, "distributed_bytes", "Serialized bytes that crossed members."),
)
"""jetspark_edge_<suffix>: family, EdgeMetrics attribute, help."""


def exposition(samplers: Sequence[JobSampler], clock: Clock) -> bytes:
    """The figures of the jobs `samplers` watch, read now, in Prometheus' text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobsCollector(samplers, clock))
    return generate_latest(registry)


_RESTART_COUNTERS = (
    ("restarts", "Restarts of the job from a snapshot after a failure."),
    ("rescales", "Restarts of the job on fewer members, the cluster having no slot for each."),
)
"""The JobMetrics counters of a job's restarts, each a counter of its own."""


class JobsCollector(Collector):
    """Collects the figures of the jobs `samplers` watch, reading their metrics at `collect()`;
    a job whose metrics cannot be read is left out (and logged), not the whole scrape."""

    def __init__(self, samplers: Sequence[JobSampler], clock: Clock) -> None:
        self._samplers = samplers
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        readings = [r for s in self._samplers if (r := self._read(s)) is not None]
        info = InfoMetricFamily(
            "jetspark_job", "A watched job: its status and execution mode.", labels=JOB_LABELS
        )
        for r in readings:
            info.add_metric(
                r.labels, {"status": r.status, "execution_mode": r.metrics.execution_mode}
            )
        yield info
        for name, help_text in _RESTART_COUNTERS:
            counter = CounterMetricFamily(f"jetspark_job_{name}", help_text, labels=JOB_LABELS)
            for r in readings:
                counter.add_metric(r.labels, getattr(r.metrics, name))
            yield counter
        snapshots = [(r.labels, r.metrics.snapshots[-1]) for r in readings if r.metrics.snapshots]
        yield from _series("jetspark_job_last_snapshot", _LAST_SNAPSHOT, JOB_LABELS, snapshots)
        batches = [(r.labels, r.metrics.batches[-1]) for r in readings if r.metrics.batches]
        yield from _series("jetspark_job_last_batch", _LAST_BATCH, JOB_LABELS, batches)
        vertices = [((*r.labels, v.name), v) for r in readings for v in r.vertices]
        yield from _series("jetspark_vertex", _VERTEX_SERIES, VERTEX_LABELS, vertices)
        lag = GaugeMetricFamily(
            "jetspark_vertex_watermark_lag_seconds",
            "Wall-clock time minus the vertex's lowest last watermark (event time in epoch ms).",
            labels=VERTEX_LABELS,
        )
        for r in readings:
            for v in r.vertices:
                if (millis := watermark_lag_ms(v.watermark, r.now)) is not None:
                    lag.add_metric((*r.labels, v.name), millis / 1000)
        yield lag
        edges = [
            ((*r.labels, m.name, edge.source_name, edge.dest_name or ""), m)
            for r in readings
            for edge, m in r.edges
        ]
        yield from _series("jetspark_edge", _EDGE_SERIES, EDGE_LABELS, edges)

    def _read(self, sampler: JobSampler) -> _Reading | None:
        job = sampler.job
        try:
            metrics = job.metrics
        except Exception:
            _log.exception("the job view could not read the metrics of job '%s'", job.name)
            return None
        return _Reading(
            (str(job.id), job.name, str(sampler.view_id)),
            job.status.value,
            metrics,
            vertex_figures(sampler.dag, metrics),
            edge_figures(sampler.dag, metrics),
            self._clock(),
        )


def _series(
    prefix: str,
    series: Sequence[tuple[str, _Family, str, str]],
    labels: Sequence[str],
    items: Sequence[tuple[Sequence[str], object]],
) -> Iterator[Metric]:
    """A metric family per series, `prefix`_suffix, with a sample per item that has a value."""
    for suffix, family, attribute, documentation in series:
        metric = family(f"{prefix}_{suffix}", documentation, labels=labels)
        for values, item in items:
            if (value := getattr(item, attribute)) is not None:
                metric.add_metric(values, float(value))
        yield metric
