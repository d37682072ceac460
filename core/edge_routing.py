"""What a snapshot records of each edge: how it routes items into the vertex it feeds.

A processor behind a partitioned edge holds the state of the keys its partitions bring it; a job
upgrade that changes that routing (the policy, the key function, the partitioner, local or
distributed) sends each key's items to other processors than the ones holding its state, so a
snapshot's manifest records the routing of every edge into every vertex (`routing_into`) and a
restore compares it with the new DAG's (runtime/routing_change.py).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from jetspark.edges.edge import Edge


class EdgeRouting(NamedTuple):
    """How one edge routes into inbound ordinal `ordinal` of its destination: plain data, as a
    manifest stores it. Functions and partitioners are known by their qualified names."""

    ordinal: int
    policy: str
    """The RoutingPolicy's value."""
    distributed: bool
    key_fn: str | None
    partitioner: str | None

    def describe(self) -> str:
        """`partitioned by mod.key (MurmurHashPartitioner), distributed`, as errors say it."""
        words = self.policy
        if self.key_fn is not None:
            words += f" by {self.key_fn}"
        if self.partitioner is not None:
            words += f" ({self.partitioner.rsplit('.', 1)[-1]})"
        return f"{words}, {'distributed' if self.distributed else 'local'}"


Routings = Mapping[str, tuple[EdgeRouting, ...]]
"""Vertex name -> the routing of each edge into it, by inbound ordinal."""


def routing_into(edges: Iterable[Edge]) -> dict[str, tuple[EdgeRouting, ...]]:
    """The `Routings` of `edges` (a vertex without inbound edges has none)."""
    routings: dict[str, list[EdgeRouting]] = {}
    for edge in edges:
        assert edge.dest_name is not None
        routings.setdefault(edge.dest_name, []).append(
            EdgeRouting(
                edge.dest_ordinal,
                edge.routing_policy.value,
                edge.is_distributed,
                None if edge.key_fn is None else qualified_name(edge.key_fn),
                None if edge.partitioner is None else qualified_name(edge.partitioner),
            )
        )
    return {vertex: tuple(sorted(routes)) for vertex, routes in routings.items()}


def routings_of(record: Any) -> dict[str, tuple[EdgeRouting, ...]]:
    """`Routings` from what `routing_into` gave, after a round trip through msgpack."""
    return {vertex: tuple(EdgeRouting(*route) for route in routes) for vertex, routes in record}


def qualified_name(target: Any) -> str:
    """`module.qualname` of a function or class; of its class for any other object; a partial
    is named after the function it wraps."""
    if isinstance(target, functools.partial):
        return f"functools.partial({qualified_name(target.func)})"
    named = target if inspect.isroutine(target) or inspect.isclass(target) else type(target)
    module = getattr(named, "__module__", None) or "?"
    return f"{module}.{getattr(named, '__qualname__', type(named).__qualname__)}"
