"""Edges of the DAG: their configuration, routing policies and the factories to build them."""

from jetspark.edges.config import EdgeConfig
from jetspark.edges.edge import Edge, between, from_
from jetspark.edges.policy import RoutingPolicy

__all__ = ["Edge", "EdgeConfig", "RoutingPolicy", "between", "from_"]
