"""A readable text plan of how a DAG runs on Spark: stages, shuffles, members, persistence."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from jetspark.core.dag import DAG
from jetspark.core.spark.stages.plan import StagePlan, is_exchange
from jetspark.edges.edge import Edge
from jetspark.edges.policy import RoutingPolicy


def _function_name(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def describe_routing(edge: Edge) -> str:
    """Routing in words, naming the key function and partitioner of a partitioned edge."""
    if edge.routing_policy is RoutingPolicy.PARTITIONED:
        partitioner = type(edge.partitioner).__name__
        return f"partitioned by {_function_name(edge.key_fn)} ({partitioner})"
    return edge.routing_policy.value.replace("_", "-")


def edge_text(edge: Edge) -> str:
    """`source:ordinal -> dest:ordinal`, its routing and priority."""
    text = f"{edge.source_name}:{edge.source_ordinal} -> {edge.dest_name}:{edge.dest_ordinal}"
    text += f"  {describe_routing(edge)}"
    if edge.get_priority():
        text += f", priority {edge.get_priority()}"
    return text


def explain_plan(
    dag: DAG,
    plan: StagePlan,
    members: int,
    local_parallelism: Mapping[str, int],
    persisted: Callable[[int], bool],
) -> str:
    """The plan as text; `persisted(stage index)` tells whether a stage output is kept in cache."""
    title = f"DAG {dag.name!r}" if dag.name else "DAG"
    lines = [f"{title} on Spark: {members} members, {len(plan.stages)} stages"]
    for stage in plan.stages:
        lines.append("")
        lines.append(f"Stage {stage.index}: {stage.name}")
        lines.append(f"  one task per member ({members} Spark partitions), each running:")
        for name in stage.vertices:
            lp = local_parallelism[name]
            lines.append(f"    {name}  local parallelism {lp}, total {lp * members}")
        for edge in dag.edges():
            inside = plan.stage_of[edge.source_name] == plan.stage_of[edge.dest_name]  # type: ignore[index]
            if inside and edge.source_name in stage.vertices:
                lines.append(f"  local edge  {edge_text(edge)}")
        for edge in stage.inbound:
            kind = "member-preserving exchange" if is_exchange(edge) else "shuffle"
            source_stage = plan.stage_of[edge.source_name]
            lines.append(f"  in  {kind} from stage {source_stage}: {edge_text(edge)}")
        consumers = plan.consumers(stage)
        if consumers:
            readers = ", ".join(str(c.index) for c in consumers)
            lines.append(f"  out shuffled once by target member, read by stage(s) {readers}")
        if persisted(stage.index):
            lines.append("  output persisted (MEMORY_AND_DISK): read by more than one action")
    return "\n".join(lines)
