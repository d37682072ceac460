"""Cutting a DAG into Spark stages: groups of vertices joined by local edges.

A vertex's level is the largest number of distributed edges on any path from a source to it.
A stage is a level's connected group of vertices joined by local edges, so every distributed
edge leads to a later stage and the stage graph is acyclic. A local edge that joins two levels
(it would otherwise close a cycle between stages) becomes a member-preserving exchange: a shuffle
that keeps each item on the member that produced it.

A task reads all its shuffled input through one iterator, so a record whose queue is full stops
everything behind it. Each inbound edge therefore gets a rank (see `_input_ranks`): the task
receives every record of a lower rank before any record of a higher one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from jetspark.core.dag import DAG
from jetspark.edges.edge import Edge

_log = logging.getLogger("jetspark.spark")


@dataclass
class Stage:
    """Vertices run together by one `mapPartitionsWithIndex` task per member."""

    index: int
    vertices: list[str]
    inbound: list[Edge] = field(default_factory=list)
    """Edges from earlier stages, in the order their records reach the task (lowest rank first)."""
    outbound: list[Edge] = field(default_factory=list)
    """Edges to later stages; their items leave the task as shuffle records."""
    ranks: dict[int, int] = field(default_factory=dict)
    """Inbound edge id -> rank: records of a lower rank must reach the task first."""

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
    edge_ids = {id(e): i for i, e in enumerate(dag.edges())}
    for stage in stages:
        stage.ranks = _input_ranks(dag, stage, edge_ids)
        stage.inbound.sort(key=lambda e: (stage.ranks[edge_ids[id(e)]], e.get_priority()))
    return StagePlan(stages, stage_of, edge_ids)


def _input_ranks(dag: DAG, stage: Stage, edge_ids: dict[int, int]) -> dict[int, int]:
    """The rank of every inbound edge of `stage`, by edge id.

    A processor drains its inbound edges of a lower priority number before the others; those
    edges end only when everything feeding them ended, so every shuffled input that reaches them
    through the stage's local edges must arrive before any shuffled input feeding the processor's
    other edges (else, with the other queues full, the task waits for records stuck behind them:
    the manual's TF-IDF, whose doc-count feeds tf-idf first, hangs so). An edge's rank is the
    longest chain of such "comes after" constraints ending at it; 0 for all without priorities.
    Constraints that contradict each other (a cycle) cannot all hold: a warning, best effort.
    """
    inbound = {id(e): edge_ids[id(e)] for e in stage.inbound}
    feeds: dict[str, set[int]] = {}
    """Vertex -> the ids of the inbound edges whose records it depends on."""
    after: dict[int, set[int]] = {i: set() for i in inbound.values()}
    """Inbound edge id -> the inbound edge ids whose records must come before its own."""

    def carried(edge: Edge) -> set[int]:
        return {inbound[id(edge)]} if id(edge) in inbound else feeds[edge.source_name]

    for name in stage.vertices:  # topological order
        edges = dag.inbound_edges(name)
        feeds[name] = set().union(*map(carried, edges))
        for first in edges:
            for then in edges:
                if first.get_priority() < then.get_priority():
                    for later in carried(then):
                        after[later] |= carried(first) - {later}
    rank = dict.fromkeys(after, 0)
    for _ in range(len(after) + 1):
        changed = False
        for edge, earlier in after.items():
            needed = max((rank[e] + 1 for e in earlier), default=0)
            if needed > rank[edge]:
                rank[edge], changed = needed, True
        if not changed:
            return rank
    _log.warning(
        "stage %s: the priorities of its inbound edges contradict each other; a processor "
        "may wait for records queued behind others",
        stage.name,
    )
    return rank


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
