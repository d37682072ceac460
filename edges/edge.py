"""Edge: a connection from an outbound ordinal of one vertex to an inbound ordinal of another."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jetspark.core.errors import DagValidationError
from jetspark.edges.config import EdgeConfig
from jetspark.edges.policy import RoutingPolicy
from jetspark.partitioning import DEFAULT, Partitioner

KeyFn = Callable[[Any], Any]


def _name_of(vertex: Any) -> str:
    name = getattr(vertex, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"an edge connects Vertex objects, got {type(vertex).__name__}")
    return name


class Edge:
    """A directed data stream between two vertices; chain the setters to configure it.

    Defaults as in Jet: local, unicast, priority 0, queue size 1024.
    """

    def __init__(self, source: Any, source_ordinal: int = 0) -> None:
        self.source = source
        self.source_name = _name_of(source)
        self.source_ordinal = _check_ordinal(source_ordinal, "source")
        self.destination: Any = None
        self.dest_name: str | None = None
        self.dest_ordinal = 0
        self.routing_policy = RoutingPolicy.UNICAST
        self.key_fn: KeyFn | None = None
        self.partitioner: Partitioner | None = None
        self.allows_nondeterministic_partitioner = False
        self.is_distributed = False
        self.config = EdgeConfig()
        self._priority = 0

    @staticmethod
    def between(source: Any, destination: Any) -> Edge:
        """An edge from ordinal 0 of `source` to ordinal 0 of `destination`."""
        return Edge(source, 0).to(destination, 0)

    @staticmethod
    def from_(source: Any, ordinal: int = 0) -> Edge:
        """The start of an edge leaving `source` at `ordinal`; finish it with `.to(...)`."""
        return Edge(source, ordinal)

    def to(self, destination: Any, ordinal: int = 0) -> Edge:
        """Sets the destination vertex and its inbound ordinal."""
        if self.destination is not None:
            raise DagValidationError(f"{self}: the destination is already set")
        self.destination = destination
        self.dest_name = _name_of(destination)
        self.dest_ordinal = _check_ordinal(ordinal, "destination")
        return self

    def distributed(self) -> Edge:
        """Lets items go to processors on every member, not just the local one."""
        self.is_distributed = True
        return self

    def local(self) -> Edge:
        """Keeps items on the member that produced them (the default)."""
        self.is_distributed = False
        return self

    def unicast(self) -> Edge:
        """Each item goes to exactly one processor, sprayed evenly (the default)."""
        return self._route(RoutingPolicy.UNICAST)

    def isolated(self) -> Edge:
        """Each downstream processor is fed by a fixed set of upstream processors."""
        return self._route(RoutingPolicy.ISOLATED)

    def broadcast(self) -> Edge:
        """Every downstream processor receives every item."""
        return self._route(RoutingPolicy.BROADCAST)

    def all_to_one(self) -> Edge:
        """All items go to one processor, chosen once per job."""
        return self._route(RoutingPolicy.ALL_TO_ONE)

    def partitioned(
        self,
        key_fn: KeyFn,
        partitioner: Partitioner | None = None,
        *,
        allow_nondeterministic: bool = False,
    ) -> Edge:
        """Routes each item by the partition of `key_fn(item)` (MurmurHash3 by default).

        A partitioner that is not deterministic across processes (HASH_CODE) is refused on a
        distributed edge unless `allow_nondeterministic=True` says the keys hash alike everywhere.
        """
        if not callable(key_fn):
            raise DagValidationError(
                f"{self}: partitioned() needs a key function, got {type(key_fn).__name__}"
            )
        self.routing_policy = RoutingPolicy.PARTITIONED
        self.key_fn = key_fn
        self.partitioner = DEFAULT if partitioner is None else partitioner
        self.allows_nondeterministic_partitioner = allow_nondeterministic
        return self

    def priority(self, priority: int) -> Edge:
        """Edges with lower numbers are consumed completely before those with higher ones."""
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise DagValidationError(f"{self}: priority must be an int, got {priority!r}")
        self._priority = priority
        return self

    def get_priority(self) -> int:
        """The priority set by `priority(n)`; 0 by default."""
        return self._priority

    def set_config(self, config: EdgeConfig) -> Edge:
        """Sets the fine-tuning parameters (queue size)."""
        if not isinstance(config, EdgeConfig):
            raise TypeError(f"{self}: set_config() takes an EdgeConfig, got {config!r}")
        self.config = config
        return self

    def _route(self, policy: RoutingPolicy) -> Edge:
        self.routing_policy = policy
        self.key_fn = None
        self.partitioner = None
        return self

    def describe(self) -> str:
        """Routing, locality and priority in a few words, as `to_dot()` and plans show them."""
        parts = [self.routing_policy.value, "distributed" if self.is_distributed else "local"]
        if self._priority:
            parts.append(f"priority {self._priority}")
        if self.config.queue_size != EdgeConfig().queue_size:
            parts.append(f"queue {self.config.queue_size}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return (
            f"Edge({self.source_name}:{self.source_ordinal} -> "
            f"{self.dest_name or '?'}:{self.dest_ordinal})"
        )


def _check_ordinal(ordinal: Any, end: str) -> int:
    if not isinstance(ordinal, int) or isinstance(ordinal, bool) or ordinal < 0:
        raise DagValidationError(
            f"the {end} ordinal of an edge must be an int >= 0, got {ordinal!r}"
        )
    return ordinal


def between(source: Any, destination: Any) -> Edge:
    """Shorthand for `Edge.between(source, destination)`."""
    return Edge.between(source, destination)


def from_(source: Any, ordinal: int = 0) -> Edge:
    """Shorthand for `Edge.from_(source, ordinal)`."""
    return Edge.from_(source, ordinal)
