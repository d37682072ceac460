"""Which execution mode a job runs in on Spark, decided at submit (JobConfig.execution_mode).

- STAGES: bounded jobs without a guarantee, as RDD stages (stages/).
- MICRO_BATCH: one Spark job per snapshot interval (microbatch/); always for a DAG that reads a
  Spark stream (`read_stream_p`), whose query drives the batches.
- CONTINUOUS: every member a long-running task of one barrier stage (continuous/); AUTO picks it
  for unbounded jobs and jobs with a guarantee when the cluster has a task slot per member.

A barrier stage needs all its tasks running at once: with fewer task slots than members Spark
would wait for slots forever, so CONTINUOUS then fails at submit, naming both numbers.
"""

from __future__ import annotations

import enum
import logging
import time

from pyspark import SparkContext

from jetspark.core.config import ExecutionMode, JobConfig, ProcessingGuarantee
from jetspark.core.dag import DAG
from jetspark.core.errors import DagValidationError
from jetspark.core.spark.guarantees import stream_vertex
from jetspark.core.suppliers import declares_unbounded

_log = logging.getLogger("jetspark.spark")

EXECUTORS_WAIT_SECONDS = 60.0
"""On a cluster, how long the choice waits for executors to register before counting slots
(they register some seconds after the context starts)."""


class Mode(enum.Enum):
    """How a job runs on Spark (what AUTO resolves to); values as `JobMetrics.execution_mode`."""

    STAGES = "stages"
    MICRO_BATCH = "micro_batch"
    CONTINUOUS = "continuous"


def task_slots(context: SparkContext) -> int:
    """How many tasks the cluster can run at once (all executors' cores / cores per task)."""
    scheduler = context._jsc.sc()  # type: ignore[union-attr]
    profile = scheduler.resourceProfileManager().defaultResourceProfile()
    return int(scheduler.maxNumConcurrentTasks(profile))


def _slots_for(context: SparkContext, members: int, *, wait_for_all: bool = True) -> int:
    """The cluster's task slots; on a cluster, waits (EXECUTORS_WAIT_SECONDS at most) until
    there are `members` of them, or with `wait_for_all` False only until some executor
    registered."""
    slots = task_slots(context)
    if slots >= members or context.master.startswith("local"):
        return slots
    needed = members if wait_for_all else 1
    deadline = time.monotonic() + EXECUTORS_WAIT_SECONDS
    while slots < needed and time.monotonic() < deadline:
        time.sleep(0.2)
        slots = task_slots(context)
    return slots


def choose_mode(context: SparkContext, dag: DAG, config: JobConfig, members: int) -> Mode:
    """The mode `dag` runs in under `config` on `context` with `members` members; raises a clear
    error for a combination that cannot run. An AUTO choice is logged with its reason."""
    asked = config.execution_mode
    guaranteed = config.processing_guarantee is not ProcessingGuarantee.NONE
    stream = stream_vertex(dag)
    rdd_vertex = _rdd_vertex(dag)
    if stream is not None:
        if asked is ExecutionMode.CONTINUOUS:
            raise DagValidationError(
                f"vertex '{stream[0]}' reads a Spark stream (read_stream_p): Spark's streaming "
                "query drives such a job batch by batch, so it runs as MICRO_BATCH, not "
                "CONTINUOUS"
            )
        return Mode.MICRO_BATCH
    if asked is ExecutionMode.MICRO_BATCH:
        if not guaranteed:
            raise ValueError(
                "execution_mode=MICRO_BATCH passes the job's state from batch to batch through "
                "snapshots: it needs a processing guarantee (JobConfig(processing_guarantee=...))"
            )
        _refuse_unreplayable_source(dag, "execution_mode=MICRO_BATCH")
        return Mode.MICRO_BATCH
    if asked is ExecutionMode.CONTINUOUS:
        if rdd_vertex is not None:
            raise DagValidationError(
                f"vertex '{rdd_vertex}' reads or writes an RDD, which only RDD stages can: run "
                "the job without execution_mode=CONTINUOUS"
            )
        slots = _slots_for(context, members)
        if slots < members:
            advice = (
                f"give the cluster more executor cores or run with members={slots}"
                if slots
                else f"no executor registered within {EXECUTORS_WAIT_SECONDS:g} s: check that "
                "the cluster is up and has free cores for this application"
            )
            raise ValueError(
                f"execution_mode=CONTINUOUS runs every member as a task of its own, all at once: "
                f"the job needs {members} task slots (one per member) and {context.master} has "
                f"{slots}; {advice}"
            )
        return Mode.CONTINUOUS
    unbounded = [v.name for v in dag.vertices() if declares_unbounded(v.meta_supplier)]
    if not guaranteed and not unbounded:
        return Mode.STAGES
    if rdd_vertex is not None:
        return Mode.STAGES
    slots = _slots_for(context, members, wait_for_all=False)
    reason = (
        f"it has a processing guarantee ({config.processing_guarantee.name})"
        if guaranteed
        else f"it is unbounded (source {unbounded[0]!r})"
    )
    if slots >= members:
        _log.info(
            "%s runs CONTINUOUS: %s, and %s has %d task slots for its %d members",
            config.name or dag.name or "the job",
            reason,
            context.master,
            slots,
            members,
        )
        return Mode.CONTINUOUS
    fallback = Mode.MICRO_BATCH if guaranteed else Mode.STAGES
    if fallback is Mode.MICRO_BATCH:
        _refuse_unreplayable_source(
            dag,
            f"{context.master} has {slots} task slots for {members} members, so it would run "
            "as micro-batches (CONTINUOUS needs a slot per member)",
        )
    _log.warning(
        "%s runs as %s, not CONTINUOUS: %s, but %s has %d task slots and continuous execution "
        "needs one per member (%d)",
        config.name or dag.name or "the job",
        fallback.name,
        reason,
        context.master,
        slots,
        members,
    )
    return fallback


def _refuse_unreplayable_source(dag: DAG, why: str) -> None:
    """A DagValidationError for a source that cannot replay (`stream_socket_p`): each
    micro-batch opens it anew, and what was in flight between two batches would be lost with no
    failure at all."""
    for vertex in dag.vertices():
        supplier = vertex.meta_supplier
        if getattr(supplier, "replayable", True) is False and not dag.inbound_edges(vertex.name):
            kind = getattr(supplier, "kind", type(supplier).__name__)
            raise DagValidationError(
                f"vertex '{vertex.name}' ({kind}) cannot replay what it read, and {why}: every "
                "batch opens the source anew, so the lines in flight between two batches would "
                "be lost; run the job CONTINUOUS (a task slot per member) or read the stream "
                "through a replayable source"
            )


def _rdd_vertex(dag: DAG) -> str | None:
    for vertex in dag.vertices():
        supplier = vertex.meta_supplier
        if (
            getattr(supplier, "rdd_sink_name", None)
            or getattr(supplier, "source_rdd", None) is not None
        ):
            return vertex.name
    return None
