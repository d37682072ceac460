"""The planner: turns a pipeline's transforms into a Core API DAG (Jet's `Planner`), fusing
chains of stateless stages into one vertex and throttling watermarks to the windows' frames."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from jetspark.core.dag import DAG, Vertex
from jetspark.core.errors import DagValidationError
from jetspark.core.pipeline.fusion import fuse, on_item
from jetspark.core.pipeline.transforms import (
    SinkTransform,
    StatelessTransform,
    Transform,
    accumulating_payloads,
    is_unwrap,
)
from jetspark.edges import Edge
from jetspark.processors.aggregate import AggregateOperation
from jetspark.processors.transforms import flat_map_p, map_p
from jetspark.processors.windowing import (
    WatermarkEmissionPolicy,
    emit_by_frame,
    no_throttling,
    tumbling_window_policy,
)

EdgeConfig = Callable[[Edge, int], Any]
"""Configures the edge from the transform's upstream number `ordinal`."""


class Planner:
    """Adds each transform's vertices to one DAG and remembers the vertex that emits its output
    (`add_vertex`), so downstream transforms connect to it (`connect`, `edge_from`)."""

    def __init__(self, transforms: list[Transform], name: str | None) -> None:
        self.dag = DAG(name)
        self._transforms = transforms
        self._outputs: dict[Transform, Vertex] = {}
        self._next_ordinal: dict[str, int] = {}
        self._names: set[str] = set()
        self._downstream = _downstream_of(transforms)
        self._events: dict[Transform, bool] = {}
        frame = math.gcd(*(t.watermark_frame_size() for t in transforms))
        self.emission_policy: WatermarkEmissionPolicy = (
            emit_by_frame(tumbling_window_policy(frame)) if frame else no_throttling()
        )
        """Watermarks are emitted once per frame of the finest window (none: every change)."""

    def plan(self) -> DAG:
        """The DAG of every transform, in topological order."""
        _check_no_leaks(self._transforms, self._downstream)
        for transform in self._transforms:
            if transform not in self._outputs:
                transform.add_to_dag(self)
        return self.dag

    def events(self, transform: Transform) -> bool:
        """Whether the items of `transform` travel as JetEvents (decided once per transform)."""
        known = self._events.get(transform)
        if known is None:
            known = self._events[transform] = transform.emits_events(self)
        return known

    def downstream(self, transform: Transform) -> list[Transform]:
        """The transforms that read `transform`'s output."""
        return self._downstream[transform]

    def vertex_of(self, transform: Transform) -> Vertex:
        """The vertex emitting `transform`'s output (planned already)."""
        return self._outputs[transform]

    def on_items(
        self, fns: list[Callable[[Any], Any]], upstream: list[Transform]
    ) -> list[Callable[[Any], Any]]:
        """`fns[i]` applied to what the user sees of an item of `upstream[i]`."""
        return [on_item(fn, self.events(t)) for fn, t in zip(fns, upstream, strict=True)]

    def accumulating_items(
        self, aggr_op: AggregateOperation, upstream: list[Transform]
    ) -> AggregateOperation:
        """`aggr_op` accumulating what the user sees of the items of each input."""
        return accumulating_payloads(aggr_op, [self.events(t) for t in upstream])

    def unique_name(self, proposed: str, suffix: str = "") -> str:
        """`proposed` + `suffix`, or with -2, -3... before the suffix if taken (Jet's rule)."""
        index = 1
        while True:
            candidate = f"{proposed}{'' if index == 1 else f'-{index}'}{suffix}"
            if candidate not in self._names and self.dag.get_vertex(candidate) is None:
                self._names.add(candidate)
                return candidate
            index += 1

    def add_vertex(
        self, transform: Transform, name: str, supplier: Any, local_parallelism: int
    ) -> Vertex:
        """Adds a vertex emitting `transform`'s output."""
        vertex = self.dag.new_vertex(name, supplier, local_parallelism)
        self._names.add(name)
        self._outputs[transform] = vertex
        return vertex

    def alias(self, transform: Transform, same_as: Transform) -> None:
        """`transform`'s output is that of `same_as`'s vertex (it adds no vertex)."""
        self._outputs[transform] = self._outputs[same_as]

    def edge_from(self, upstream: Transform) -> Edge:
        """An edge from the vertex of `upstream` at its next free ordinal (destination unset)."""
        vertex = self._outputs[upstream]
        ordinal = self._next_ordinal.get(vertex.name, 0)
        self._next_ordinal[vertex.name] = ordinal + 1
        return Edge.from_(vertex, ordinal)

    def connect(
        self, transform: Transform, vertex: Vertex, configure: EdgeConfig | None = None
    ) -> None:
        """Edges from each of `transform`'s upstream vertices into `vertex`, ordinal i from
        upstream i, each configured by `configure(edge, i)`."""
        for ordinal, upstream in enumerate(transform.upstream):
            edge = self.edge_from(upstream).to(vertex, ordinal)
            if configure is not None:
                configure(edge, ordinal)
            self.dag.edge(edge)

    def add_fused_chain(self, first: StatelessTransform) -> None:
        """One vertex for `first` and the stateless transforms after it that each read only
        the one before, which reads nothing else, at the same local parallelism."""
        chain = [first]
        while True:
            following = self._downstream.get(chain[-1], [])
            if len(following) != 1:
                break
            candidate = following[0]
            if not (
                isinstance(candidate, StatelessTransform)
                and candidate.local_parallelism == first.local_parallelism
            ):
                break
            chain.append(candidate)
        events = self.events(first.upstream[0])
        if not events and all(is_unwrap(t) for t in chain):  # plain items: nothing to do
            for transform in chain:
                self._outputs[transform] = self._outputs[first.upstream[0]]
            return
        kind, fn = fuse([t.step for t in chain], events)
        supplier = map_p(fn) if kind == "map" else flat_map_p(fn)
        names = [t.name for t in chain]
        name = names[0] if len(names) == 1 else f"fused({', '.join(names)})"
        vertex = self.dag.new_vertex(self.unique_name(name), supplier, first.local_parallelism)
        self.connect(first, vertex)
        for transform in chain:
            self._outputs[transform] = vertex


def _downstream_of(transforms: list[Transform]) -> dict[Transform, list[Transform]]:
    downstream: dict[Transform, list[Transform]] = {t: [] for t in transforms}
    for transform in transforms:
        for upstream in transform.upstream:
            downstream[upstream].append(transform)
    return downstream


def _check_no_leaks(
    transforms: list[Transform], downstream: dict[Transform, list[Transform]]
) -> None:
    """Every stage must lead to a sink: a stage with nothing attached is an error naming it."""
    leaks = [t.name for t in transforms if not isinstance(t, SinkTransform) and not downstream[t]]
    if leaks:
        raise DagValidationError(
            "these pipeline stages reach no sink (drain them with drain_to(sink) or remove "
            f"them): {', '.join(repr(name) for name in leaks)}"
        )
