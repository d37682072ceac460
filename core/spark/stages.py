"""Cutting a DAG into Spark stages: groups of vertices joined by local edges (DESIGN.md).

A vertex's level is the largest number of distributed edges on any path from a source to it.
A stage is a level's connected group of vertices joined by local edges, so every distributed
edge leads to a later stage and the stage graph is acyclic. A local edge that joins two levels
(it would otherwise close a cycle between stages) becomes a member-preserving exchange: a shuffle
that keeps each item on the member that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jetspark.core.dag import DAG
from jetspark.edges.edge import Edge


@dataclass
class Stage:
    """Vertices run together by one `mapPartitionsWithIndex` task per member."""

    index: int
    vertices: list[str]
    inbound: list[Edge] = field(default_factory=list)
    """Edges from earlier stages, in the order their records reach the task (priority first)."""
    outbound: list[Edge] = field(default_factory=list)
    """Edges to later stages; their items leave the task as shuffle records."""

    @property
    def name(self) -> str:
        """The Spark-UI name of the stage: its vertices joined by '+'."""
        return "+".join(self.vertices)


@dataclass
class StagePlan:
    """The stages of a DAG in execution order, and the edge ids that tag shuffle records."""

    stages: list[Stage]
    stage_of: dict[str, int]
    edge_ids: dict[int, int]
    """`id(edge)` -> the edge's position in `dag.edges()`, stable across pickling."""

    def edge_id(self, edge: Edge) -> int:
        """The id of `edge` in shuffle records."""
        return self.edge_ids[id(edge)]

    def consumers(self, stage: Stage) -> list[Stage]:
        """The later stages that read `stage`'s output."""
        targets = sorted({self.stage_of[e.dest_name] for e in stage.outbound})  # type: ignore[index]
        return [self.stages[i] for i in targets]


def is_exchange(edge: Edge) -> bool:
    """True for a local edge that crosses stages, carried by a member-preserving shuffle."""
    return not edge.is_distributed


def plan_stages(dag: DAG) -> StagePlan:
    """Cuts the validated `dag` into stages in topological order."""
    order = [v.name for v in dag.vertices()]
    level = _levels(dag, order)
    group = _local_groups(dag, order, level)
    stage_keys = sorted(set(group.values()), key=lambda g: (level[g], order.index(g)))
    stage_index = {key: i for i, key in enumerate(stage_keys)}
    stages = [
        Stage(i, [name for name in order if stage_index[group[name]] == i])
        for i in range(len(stage_keys))
    ]
    stage_of = {name: stage_index[group[name]] for name in order}
    for edge in dag.edges():
        source, dest = stage_of[edge.source_name], stage_of[edge.dest_name]  # type: ignore[index]
        if source != dest:
            stages[source].outbound.append(edge)
            stages[dest].inbound.append(edge)
    for stage in stages:
        stage.inbound.sort(key=Edge.get_priority)
    return StagePlan(stages, stage_of, {id(e): i for i, e in enumerate(dag.edges())})


def _levels(dag: DAG, order: list[str]) -> dict[str, int]:
    level = dict.fromkeys(order, 0)
    for name in order:
        for edge in dag.outbound_edges(name):
            step = 1 if edge.is_distributed else 0
            dest = edge.dest_name
            assert dest is not None
            level[dest] = max(level[dest], level[name] + step)
    return level


def _local_groups(dag: DAG, order: list[str], level: dict[str, int]) -> dict[str, str]:
    """Union-find over local edges within a level; each vertex maps to its group's first vertex."""
    parent = {name: name for name in order}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for edge in dag.edges():
        dest = edge.dest_name
        assert dest is not None
        if not edge.is_distributed and level[edge.source_name] == level[dest]:
            a, b = root(edge.source_name), root(dest)
            if a != b:
                first, second = sorted((a, b), key=order.index)
                parent[second] = first
    return {name: root(name) for name in order}
