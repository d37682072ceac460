"""Turning a job plan into Spark RDDs: one `mapPartitionsWithIndex` per stage, shuffles between.

No processor runs on the driver and no data passes through it between stages: each stage reads
the shuffled records of the stages before it, and only the terminal stages' results (sink
writes, metrics) come back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import RDD, SparkContext

from jetspark.core.dag import DAG
from jetspark.core.errors import DagValidationError
from jetspark.core.runtime.plan import JobPlan
from jetspark.core.spark.stages.line_frames import read_in_bulk
from jetspark.core.spark.stages.plan import Stage, StagePlan
from jetspark.core.spark.stages.records import RESULT, member_of_key
from jetspark.core.spark.stages.task import StageSnapshots, StageTask

_FIRST = -(2**63)


@dataclass
class Translation:
    """The RDDs of a job: each stage's output and the union of the terminal ones."""

    outputs: list[RDD]
    final: RDD
    sorted_stages: set[int]
    """Stages whose union of sorted upstream shuffles is sorted once more to keep edge
    priorities (see `_stage_input`)."""


def rdd_source_of(dag: DAG, vertex: str) -> Any:
    """The RDD a `read_rdd_p` vertex reads, or None for other vertices."""
    node = dag.get_vertex(vertex)
    return getattr(node.meta_supplier, "source_rdd", None) if node is not None else None


def translate(
    sc: SparkContext,
    dag: DAG,
    plan: JobPlan,
    stages: StagePlan,
    shipped: Any,
    batch: StageSnapshots | None = None,
    rdd_sources: dict[str, RDD] | None = None,
) -> Translation:
    """Builds the RDD lineage of the job, or of one micro-batch of it (lazily: nothing runs
    until an action). `rdd_sources` gives the RDD a vertex reads in this batch (a Spark
    stream's batch), in place of a `read_rdd_p` RDD."""
    members = plan.member_count
    heir_of: dict[int, set[int]] = {}
    for stage in stages.stages:
        consumers = stages.consumers(stage)
        if consumers:
            heir_of.setdefault(consumers[0].index, set()).add(stage.index)
    outputs: list[RDD] = []
    shuffled: dict[int, RDD] = {}
    sorted_stages: set[int] = set()
    edge_rank = {edge: rank for stage in stages.stages for edge, rank in stage.ranks.items()}
    for stage in stages.stages:
        rdd_source = _rdd_source(dag, stage, rdd_sources or {})
        if rdd_source is not None:
            base = _member_partitions(sc, read_in_bulk(rdd_source[1]), members)
        else:
            base, needs_sort = _stage_input(sc, stage, stages, shuffled, members)
            if needs_sort:
                sorted_stages.add(stage.index)
        task = StageTask(
            plan,
            stage.index,
            stage.vertices,
            frozenset(heir_of.get(stage.index, ())),
            shipped,
            rdd_source[0] if rdd_source else None,
            batch,
        )
        output = base.mapPartitionsWithIndex(task).setName(stage.name)
        outputs.append(output)
        if stages.consumers(stage):
            shuffled[stage.index] = _sorted_shuffle(output, edge_rank, members).setName(
                f"{stage.name} shuffled"
            )
    terminal = [outputs[s.index] for s in stages.stages if not stages.consumers(s)]
    final = terminal[0] if len(terminal) == 1 else sc.union(terminal)
    return Translation(outputs, final, sorted_stages)


def _rdd_source(dag: DAG, stage: Stage, given: dict[str, RDD]) -> tuple[str, RDD] | None:
    sources = [
        (v, rdd) for v in stage.vertices if (rdd := given.get(v, rdd_source_of(dag, v))) is not None
    ]
    if not sources:
        return None
    if len(sources) > 1 or stage.inbound:
        names = ", ".join(v for v, _ in sources)
        raise DagValidationError(
            f"RDD-reading vertex '{sources[0][0]}' shares a Spark stage ({stage.name}) with "
            f"{'another RDD source' if len(sources) > 1 else 'shuffled input'} ({names}); "
            "an RDD source's stage reads the RDD's partitions directly, so connect the vertices "
            "it shares the stage with through a distributed edge"
        )
    return sources[0]


def _member_partitions(sc: SparkContext, rdd: RDD, members: int) -> RDD:
    """`rdd` as exactly `members` partitions without a shuffle: member m reads a share of them."""
    partitions = rdd.getNumPartitions()
    if partitions >= members:
        return rdd.coalesce(members)
    return sc.union([rdd, sc.parallelize([], members - partitions)])


def _sorted_shuffle(output: RDD, edge_rank: dict[int, int], members: int) -> RDD:
    """`output` shuffled to its target members, each partition sorted on the records'
    (rank, sequence, edge, upstream processor): a function of the records, never of the
    order Spark fetches the map outputs in. A task re-run after a lost executor therefore
    reads the same input in the same order and sends the same records (SPARK-23207's lesson);
    interleaving the upstream processors by sequence also lets coalesced watermarks rise
    after one record of each upstream, not after a whole upstream's output."""
    return (
        output.map(lambda record: (_sort_key(record, edge_rank), record[1]))
        .repartitionAndSortWithinPartitions(members, member_of_key)
        .mapPartitions(_unkeyed, preservesPartitioning=True)
    )


def _unkeyed(keyed: Iterable[tuple[tuple[int, ...], Any]]) -> Iterator[tuple[int, Any]]:
    for key, body in keyed:
        yield key[0], body


def _stage_input(
    sc: SparkContext, stage: Stage, stages: StagePlan, shuffled: dict[int, RDD], members: int
) -> tuple[RDD, bool]:
    """The shuffled records a stage reads, with edges of a lower rank first (`Stage.ranks`:
    edge priorities, carried through the stage's local edges).

    Each upstream stage's shuffle is sorted (`_sorted_shuffle`, rank second in its key), so each
    delivers its own ranks in order. When no upstream stage sends a rank lower than one an
    earlier stage sent, their `union` in that order is free (inputs with the same partitioner
    make a PartitionerAwareUnionRDD, which reads each input's partition in turn); otherwise
    Spark sorts the union again on the same key, which spills instead of buffering.
    """
    ranks: dict[int, set[int]] = {}
    for edge in stage.inbound:
        ranks.setdefault(stages.stage_of[edge.source_name], set()).add(
            stage.ranks[stages.edge_id(edge)]
        )
    upstream = set(ranks) | {s for s in stages.stage_of.values() if _is_heir(stages, s, stage)}
    if not upstream:
        return sc.parallelize([], members), False
    order = sorted(upstream, key=lambda s: (min(ranks.get(s, {_FIRST})), s))
    inputs = [shuffled[s] for s in order]
    union = inputs[0] if len(inputs) == 1 else sc.union(inputs)
    if _union_keeps_ranks([ranks.get(s, set()) for s in order]):
        return union, False
    return _sorted_shuffle(union, stage.ranks, members), True


def _is_heir(stages: StagePlan, upstream: int, stage: Stage) -> bool:
    consumers = stages.consumers(stages.stages[upstream])
    return bool(consumers) and consumers[0].index == stage.index


def _union_keeps_ranks(groups: list[set[int]]) -> bool:
    """True when inputs in this order, each sorted by rank, deliver every rank after all
    lower ones."""
    seen_max = _FIRST
    for group in groups:
        if group and min(group) < seen_max:
            return False
        if group:
            seen_max = max(group)
    return True


def _sort_key(record: tuple[int, tuple[Any, ...]], rank: dict[int, int]) -> tuple[Any, ...]:
    member, body = record
    if body[0] == RESULT:
        return (member, _FIRST, body[4], body[1], body[2])
    edge, _local, upstream, seq, _payload = body
    return (member, rank.get(edge, 0), seq, edge, upstream)
