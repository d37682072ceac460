"""DAG and Vertex: the pure-data description of a job (manual §8.1)."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any, Protocol

from jetspark.core.errors import DagValidationError
from jetspark.core.suppliers import ProcessorMetaSupplier, as_meta_supplier
from jetspark.edges.edge import Edge
from jetspark.edges.policy import RoutingPolicy


def _check_local_parallelism(value: Any, vertex_name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value == 0 or value < -1:
        raise DagValidationError(
            f"vertex '{vertex_name}': local parallelism must be -1 (engine default) or >= 1, "
            f"got {value!r}"
        )
    return value


class Vertex:
    """A named step of the DAG, run by `local parallelism` processors on every member."""

    def __init__(self, name: str, supplier: Any, local_parallelism: int = -1) -> None:
        if not isinstance(name, str) or not name:
            raise DagValidationError(f"a vertex name must be a non-empty str, got {name!r}")
        self.name = name
        self.supplier = supplier
        self.meta_supplier: ProcessorMetaSupplier = as_meta_supplier(supplier, name)
        self._local_parallelism = _check_local_parallelism(local_parallelism, name)

    def local_parallelism(self, n: int) -> Vertex:
        """Sets the number of processors per member (-1: the engine's default); returns self."""
        self._local_parallelism = _check_local_parallelism(n, self.name)
        return self

    def get_local_parallelism(self) -> int:
        """The configured local parallelism, -1 when left to the engine."""
        return self._local_parallelism

    def __repr__(self) -> str:
        return f"Vertex({self.name!r}, local_parallelism={self._local_parallelism})"


class DAG:
    """Vertices connected by edges; build it, then submit it to an engine.

    Structural mistakes that can be seen at once (duplicate names, foreign vertices, a taken
    ordinal) raise immediately; `validate()` checks the whole graph and engines call it on submit.
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self._vertices: dict[str, Vertex] = {}
        self._edges: list[Edge] = []

    def new_vertex(self, name: str, supplier: Any, local_parallelism: int | None = None) -> Vertex:
        """Adds a vertex; `supplier` is a processor factory, a supplier or a meta-supplier."""
        vertex = Vertex(name, supplier, -1 if local_parallelism is None else local_parallelism)
        return self.vertex(vertex)

    def vertex(self, vertex: Vertex) -> Vertex:
        """Adds an existing vertex; its name must be unique in this DAG."""
        if vertex.name in self._vertices:
            raise DagValidationError(f"vertex '{vertex.name}' already exists in this DAG")
        self._vertices[vertex.name] = vertex
        return vertex

    def edge(self, edge: Edge) -> DAG:
        """Adds an edge and returns the DAG, so calls chain."""
        if not isinstance(edge, Edge):
            raise TypeError(f"DAG.edge() takes an Edge, got {type(edge).__name__}")
        if edge.dest_name is None:
            raise DagValidationError(f"{edge}: the edge has no destination; finish it with .to()")
        for end, name, vertex in (
            ("source", edge.source_name, edge.source),
            ("destination", edge.dest_name, edge.destination),
        ):
            if self._vertices.get(name) is not vertex:
                raise DagValidationError(f"{edge}: the {end} vertex '{name}' is not in this DAG")
        for other in self._edges:
            if other is edge:
                raise DagValidationError(f"{edge}: this edge was already added")
            if (other.source_name, other.source_ordinal) == (edge.source_name, edge.source_ordinal):
                raise DagValidationError(
                    f"{edge}: outbound ordinal {edge.source_ordinal} of vertex "
                    f"'{edge.source_name}' is already taken by {other}"
                )
            if (other.dest_name, other.dest_ordinal) == (edge.dest_name, edge.dest_ordinal):
                raise DagValidationError(
                    f"{edge}: inbound ordinal {edge.dest_ordinal} of vertex "
                    f"'{edge.dest_name}' is already taken by {other}"
                )
        self._edges.append(edge)
        return self

    def get_vertex(self, name: str) -> Vertex | None:
        """The vertex called `name`, or None."""
        return self._vertices.get(name)

    def edges(self) -> list[Edge]:
        """All edges in the order they were added."""
        return list(self._edges)

    def inbound_edges(self, name: str) -> list[Edge]:
        """Edges into vertex `name`, by inbound ordinal."""
        self._require(name)
        return sorted((e for e in self._edges if e.dest_name == name), key=lambda e: e.dest_ordinal)

    def outbound_edges(self, name: str) -> list[Edge]:
        """Edges out of vertex `name`, by outbound ordinal."""
        self._require(name)
        return sorted(
            (e for e in self._edges if e.source_name == name), key=lambda e: e.source_ordinal
        )

    def vertices(self) -> list[Vertex]:
        """All vertices in topological order (ties in insertion order); raises on a cycle."""
        position = {name: i for i, name in enumerate(self._vertices)}
        indegree = dict.fromkeys(self._vertices, 0)
        for e in self._edges:
            indegree[e.dest_name] += 1  # type: ignore[index]
        # a heap of insertion positions: among the ready vertices, the earliest added goes first
        ready = [position[name] for name, degree in indegree.items() if degree == 0]
        names = list(self._vertices)
        order: list[Vertex] = []
        while ready:
            name = names[heapq.heappop(ready)]
            order.append(self._vertices[name])
            for e in self.outbound_edges(name):
                indegree[e.dest_name] -= 1  # type: ignore[index]
                if indegree[e.dest_name] == 0:  # type: ignore[index]
                    heapq.heappush(ready, position[e.dest_name])  # type: ignore[index]
        if len(order) < len(self._vertices):
            raise DagValidationError(f"the DAG has a cycle: {' -> '.join(self._find_cycle())}")
        return order

    def validate(self) -> None:
        """Checks the whole DAG; raises DagValidationError naming the first fault found."""
        if not self._vertices:
            raise DagValidationError("the DAG has no vertices")
        for vertex in self._vertices.values():
            _check_local_parallelism(vertex.get_local_parallelism(), vertex.name)
            self._check_ordinals(
                vertex.name, "inbound", [e.dest_ordinal for e in self.inbound_edges(vertex.name)]
            )
            self._check_ordinals(
                vertex.name,
                "outbound",
                [e.source_ordinal for e in self.outbound_edges(vertex.name)],
            )
        self.vertices()
        for edge in self._edges:
            _check_edge(edge)

    def _check_ordinals(self, name: str, direction: str, ordinals: list[int]) -> None:
        expected = list(range(len(ordinals)))
        if ordinals != expected:
            missing = sorted(set(range(max(ordinals) + 1)) - set(ordinals))
            raise DagValidationError(
                f"vertex '{name}': {direction} ordinals must be 0..{len(ordinals) - 1} without "
                f"gaps, got {ordinals} (missing {missing})"
            )

    def _find_cycle(self) -> list[str]:
        """One cycle as a closed path of vertex names, found by depth-first search."""
        state: dict[str, int] = {}
        path: list[str] = []

        def visit(name: str) -> list[str] | None:
            state[name] = 1
            path.append(name)
            for e in self.outbound_edges(name):
                nxt = e.dest_name
                assert nxt is not None
                if state.get(nxt) == 1:
                    return [*path[path.index(nxt) :], nxt]
                if nxt not in state and (found := visit(nxt)):
                    return found
            state[name] = 2
            path.pop()
            return None

        for name in self._vertices:
            if name not in state and (cycle := visit(name)):
                return cycle
        return []

    def _require(self, name: str) -> None:
        if name not in self._vertices:
            raise DagValidationError(f"no vertex named '{name}' in this DAG")

    def to_dot(self) -> str:
        """Graphviz text: vertices with their parallelism, edges with ordinals and routing."""
        lines = [f"digraph {_quote(self.name or 'DAG')} {{"]
        for vertex in self._vertices.values():
            lp = vertex.get_local_parallelism()
            label = f"{vertex.name}\nlocal parallelism {'default' if lp == -1 else lp}"
            lines.append(f"  {_quote(vertex.name)} [label={_quote(label)}];")
        for e in self._edges:
            attributes = [
                f"label={_quote(e.describe())}",
                f"taillabel={_quote(str(e.source_ordinal))}",
                f"headlabel={_quote(str(e.dest_ordinal))}",
            ]
            if e.is_distributed:
                attributes.append("style=bold")
            lines.append(
                f"  {_quote(e.source_name)} -> {_quote(e.dest_name or '')} "
                f"[{', '.join(attributes)}];"
            )
        lines.append("}")
        return "\n".join(lines)

    def __iter__(self) -> Iterator[Vertex]:
        return iter(self.vertices())

    def __repr__(self) -> str:
        return f"DAG({self.name!r}, vertices={list(self._vertices)}, edges={self._edges})"


def _check_edge(edge: Edge) -> None:
    if edge.is_distributed and edge.routing_policy is RoutingPolicy.ISOLATED:
        raise DagValidationError(
            f"{edge}: isolated routing works on local edges only; drop .distributed() or pick "
            "another routing policy"
        )
    if edge.routing_policy is RoutingPolicy.PARTITIONED:
        if edge.key_fn is None:
            raise DagValidationError(f"{edge}: partitioned routing needs a key function")
        deterministic = getattr(edge.partitioner, "deterministic_across_processes", True)
        if (
            edge.is_distributed
            and not deterministic
            and not edge.allows_nondeterministic_partitioner
        ):
            raise DagValidationError(
                f"{edge}: the partitioner {edge.partitioner!r} is not deterministic across "
                "processes (Python's hash() of str/bytes is randomised per worker process), so "
                "equal keys could reach different members. Use the default MurmurHash3 "
                "partitioner on distributed edges, or pass allow_nondeterministic=True to "
                "partitioned() if your keys hash alike in every process (ints, say)"
            )


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


class PlansADag(Protocol):
    """What an engine's `new_job` takes besides a DAG: anything that plans itself into one (a
    Pipeline)."""

    def to_dag(self) -> DAG: ...
