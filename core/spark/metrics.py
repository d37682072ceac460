"""Merging the metrics every Spark task reports into one JobMetrics for the job."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from jetspark.core.runtime.metrics import EdgeMetrics, JobMetrics

_SUMMED = [f.name for f in dataclasses.fields(EdgeMetrics) if f.name not in ("edge_id", "name")]


def merge_metrics(parts: Iterable[JobMetrics]) -> JobMetrics:
    """Processors side by side (each ran in one task); edge counters summed over tasks."""
    merged = JobMetrics()
    edges: dict[int, EdgeMetrics] = {}
    for part in parts:
        merged.processors.extend(part.processors)
        for edge in part.edges:
            total = edges.setdefault(edge.edge_id, EdgeMetrics(edge.edge_id, edge.name))
            for name in _SUMMED:
                setattr(total, name, getattr(total, name) + getattr(edge, name))
    merged.processors.sort(key=lambda p: (p.vertex, p.global_index))
    merged.edges = [edges[i] for i in sorted(edges)]
    return merged


_PROCESSOR_COUNTS = ("received_count", "received_batches", "emitted_count")


def accumulate_metrics(total: JobMetrics, batch: JobMetrics) -> JobMetrics:
    """`total` plus one micro-batch's metrics: counters summed per processor and per edge,
    the rest (watermark, queue sizes) as the newer batch reports them."""
    previous = {(p.vertex, p.global_index): p for p in total.processors}
    for processor in batch.processors:
        before = previous.get((processor.vertex, processor.global_index))
        if before is None:
            continue
        for name in _PROCESSOR_COUNTS:
            summed = dict(getattr(before, name))
            for ordinal, count in getattr(processor, name).items():
                summed[ordinal] = summed.get(ordinal, 0) + count
            setattr(processor, name, summed)
    edges = merge_metrics([JobMetrics(edges=total.edges), JobMetrics(edges=batch.edges)]).edges
    batch.edges = edges
    batch.batches = total.batches
    return batch
