"""A readable text plan of a continuous job: members, task slots, vertices, edges as streams."""

from __future__ import annotations

from collections.abc import Mapping

from jetspark.core.config import JobConfig, ProcessingGuarantee
from jetspark.core.dag import DAG
from jetspark.core.spark.continuous.streams import WINDOW_QUEUES
from jetspark.core.spark.stages.explain import edge_text


def explain_continuous(
    dag: DAG,
    config: JobConfig,
    members: int,
    slots: int,
    master: str,
    local_parallelism: Mapping[str, int],
) -> str:
    """The continuous plan of `dag` on `members` members, as text."""
    title = f"DAG {dag.name!r}" if dag.name else "DAG"
    lines = [
        f"{title} on Spark, CONTINUOUS: {members} members, one barrier stage of {members} "
        f"long-running tasks (needs {members} task slots; {master} has {slots})",
        "  every task is one member running every vertex:",
    ]
    for vertex in dag.vertices():
        lp = local_parallelism[vertex.name]
        lines.append(f"    {vertex.name}  local parallelism {lp}, total {lp * members}")
    lines.append("  edges:")
    for edge in dag.edges():
        queue = edge.config.queue_size
        if edge.is_distributed:
            carried = (
                f"TCP streams between members ({WINDOW_QUEUES * queue} items in flight per "
                f"link at most), queues of {queue}"
            )
            lines.append(f"    stream      {edge_text(edge)}: {carried}")
        else:
            lines.append(f"    local edge  {edge_text(edge)}: in-process queues of {queue}")
    guarantee = config.processing_guarantee
    if guarantee is ProcessingGuarantee.NONE:
        lines.append("  no snapshots (no processing guarantee)")
    else:
        alignment = "aligned" if guarantee is ProcessingGuarantee.EXACTLY_ONCE else "unaligned"
        lines.append(
            f"  snapshots: every {config.snapshot_interval_millis} ms, barriers in-band "
            f"({alignment}, {guarantee.name}), committed by the driver once every member's "
            "part is in; a lost member restarts the job from the last one "
            f"(at most {config.max_restarts} times)"
        )
    return "\n".join(lines)
