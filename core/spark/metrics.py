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
