"""A job upgrade that changes how an edge routes into a vertex holding keyed state.

A processor behind a partitioned edge holds the state of the keys its partitions bring it. When
the new DAG routes that edge otherwise (another policy, key function or partitioner, local
instead of distributed or back), a key's items reach other processors than the one restoring
its state, and the job's results go wrong without a word. So `check_routing_changes`, which
the engines call when a job is submitted with `restore_from`, compares the routing its manifest
recorded (edge_routing.py) with the new DAG's and refuses such a change into a vertex that saved
keyed state (an entry under a key that is not a `broadcast_key`), naming the edge, unless
`JobConfig.state_on_routing_change` says what to do with that state:

- "rekey": each keyed entry is restored into the processor that receives the key's items
  under the new routing (`rekeyed_targets`), the move a restore at another member count makes
  for a partitioned edge: the key's partition owner for a partitioned or all-to-one edge (on a
  local edge, the owner on the member owning the partition under a distributed one), every
  processor for a broadcast edge (each one sees every key now), and the default owner for an
  unicast or isolated edge (a key's items reach every processor: its state stays in one).
- "drop": the keyed entries are not restored; entries under broadcast keys are, as always.

Keyed state behind an edge that was a broadcast one cannot be re-keyed (every processor holds
every key's state): only "drop" restores it.

The change is decided where the entries are routed (`changed_edge`): the lowest inbound
ordinal whose routing differs decides. A snapshot that recorded no routing (a manifest before
version 3, or a snapshot made by hand) cannot be checked: one warning says so and it is
restored as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from jetspark.core.config import JobConfig
from jetspark.core.dag import DAG
from jetspark.core.edge_routing import EdgeRouting, Routings, routing_into
from jetspark.core.errors import SnapshotError
from jetspark.core.runtime.plan import EdgePlan, JobPlan, VertexPlan
from jetspark.core.snapshot_keys import BroadcastKey, snapshot_targets
from jetspark.core.snapshot_store import Snapshot
from jetspark.edges.edge import Edge
from jetspark.edges.policy import RoutingPolicy
from jetspark.partitioning import DEFAULT, PartitionAssignment, checked_partitioner

_log = logging.getLogger("jetspark.snapshots")

Targets = Callable[[Any], Iterable[int]]
"""A saved key -> the global indexes of the processors that restore its entry."""


def check_routing_changes(snapshot: Snapshot, dag: DAG, config: JobConfig) -> None:
    """Raises SnapshotError naming each edge whose routing into a vertex with keyed state in
    `snapshot` differs in `dag`, unless `config.state_on_routing_change` says what to do (then
    logs a warning naming them). Reads the state of such vertices only (module docstring)."""
    if snapshot.routing is None:
        _log.warning(
            "snapshot %d does not record how the edges routed into its vertices (it was taken "
            "by a jetspark before snapshot manifest version 3, or made by hand): a change of "
            "an edge's routing into a vertex with keyed state cannot be detected, and its "
            "state is restored as before",
            snapshot.snapshot_id,
        )
        return
    by_vertex: dict[str, list[tuple[Edge, EdgeRouting, EdgeRouting]]] = {}
    new_routing = routing_into(dag.edges())
    for edge in dag.edges():
        assert edge.dest_name is not None
        old = _at_ordinal(snapshot.routing, edge.dest_name, edge.dest_ordinal)
        new = _at_ordinal(new_routing, edge.dest_name, edge.dest_ordinal)
        if old is not None and new is not None and old != new:
            by_vertex.setdefault(edge.dest_name, []).append((edge, old, new))
    keyed = _vertices_with_keyed_state(snapshot, sorted(by_vertex))
    changes = [change for vertex in keyed for change in by_vertex[vertex]]
    if not changes:
        return
    described = "; ".join(
        f"edge {_edge_name(edge)} routed {old.describe()}, now {new.describe()}"
        for edge, old, new in changes
    )
    vertices = ", ".join(repr(vertex) for vertex in keyed)
    choice = config.state_on_routing_change
    if choice is None:
        raise SnapshotError(
            f"snapshot {snapshot.snapshot_id} holds keyed state of vertex {vertices}, and the "
            f"DAG routes into it otherwise: {described}. Restored as it was saved, a key's "
            "state would sit in another processor than the one receiving its items, and the "
            'results would be wrong. Pass JobConfig(state_on_routing_change="rekey") to move '
            "each key's state to the processor that receives the key now, or "
            '"drop" to restore the vertex without its keyed state'
        )
    from_broadcast = [
        edge for edge, old, _ in changes if old.policy == RoutingPolicy.BROADCAST.value
    ]
    if choice == "rekey" and from_broadcast:
        raise SnapshotError(
            f"snapshot {snapshot.snapshot_id}: the keyed state of vertex {vertices} cannot be "
            f"re-keyed: edge {_edge_name(from_broadcast[0])} was a broadcast edge, so every "
            "processor holds every key's state, and moving each to the key's new processor "
            'would restore it once per processor that saved it. Pass "drop" to restore the '
            "vertex without its keyed state"
        )
    _log.warning(
        "restoring snapshot %d with the keyed state of vertex %s %s, as "
        "state_on_routing_change=%r says: %s",
        snapshot.snapshot_id,
        vertices,
        "moved to the processors that receive each key now" if choice == "rekey" else "dropped",
        choice,
        described,
    )


def changed_edge(routing: Routings | None, vertex: VertexPlan) -> EdgePlan | None:
    """The inbound edge of `vertex` with the lowest ordinal whose routing differs from the one
    `routing` (a snapshot's) recorded; None when none does or nothing was recorded."""
    if routing is None:
        return None
    for edge in vertex.inbound:
        old = _at_ordinal(routing, vertex.name, edge.edge.dest_ordinal)
        if old is not None and old != routing_into([edge.edge])[vertex.name][0]:
            return edge
    return None


def restore_targets(
    plan: JobPlan, vertex: VertexPlan, routing: Routings | None
) -> tuple[Targets, bool]:
    """Where the saved entries of `vertex` go under `plan`, given the `routing` the snapshot
    recorded, and whether its keyed entries are dropped (`state_on_routing_change`)."""
    assignment = PartitionAssignment(
        plan.member_count, vertex.local_parallelism, plan.config.partition_count
    )

    def default(key: Any) -> Iterable[int]:
        return snapshot_targets(key, assignment)

    edge = changed_edge(routing, vertex)
    choice = plan.config.state_on_routing_change
    if edge is None or choice is None:
        return default, False
    if choice == "drop":
        return default, True
    rekeyed = rekeyed_targets(edge, default)

    def targets(key: Any) -> Iterable[int]:
        return default(key) if isinstance(key, BroadcastKey) else rekeyed(key)

    return targets, False


def rekeyed_targets(edge: EdgePlan, default: Targets) -> Targets:
    """The processors that receive the items of a key on `edge` (module docstring)."""
    policy = edge.edge.routing_policy
    if policy is RoutingPolicy.BROADCAST:
        everyone = range(edge.member_count * edge.downstream_parallelism)
        return lambda key: everyone
    if policy not in (RoutingPolicy.PARTITIONED, RoutingPolicy.ALL_TO_ONE):
        return default
    partitioner = checked_partitioner(edge.edge.partitioner or DEFAULT)
    count, members, table = edge.partition_count, edge.member_count, edge.partition_table
    lp = 0 if edge.edge.is_distributed else edge.downstream_parallelism

    def owner(key: Any) -> Iterable[int]:
        partition = edge.all_to_one_partition
        if partition is None:
            partition = partitioner.partition(key, count)
        target = table[partition] + (partition % members) * lp
        return range(target, target + 1)

    return owner


def _at_ordinal(routing: Routings, vertex: str, ordinal: int) -> EdgeRouting | None:
    for route in routing.get(vertex, ()):
        if route.ordinal == ordinal:
            return route
    return None


def _edge_name(edge: Edge) -> str:
    return f"{edge.source_name}:{edge.source_ordinal} -> {edge.dest_name}:{edge.dest_ordinal}"


def _vertices_with_keyed_state(snapshot: Snapshot, vertices: list[str]) -> list[str]:
    """Those of `vertices` some processor of which saved an entry under a key that is not a
    broadcast key in `snapshot` (their entries are decoded)."""
    keyed: set[str] = set()
    for (vertex, _), saved in snapshot.states_of(vertices):
        if vertex not in keyed and any(
            not isinstance(key, BroadcastKey) for key, _ in saved.entries()
        ):
            keyed.add(vertex)
    return sorted(keyed)
