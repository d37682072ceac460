"""Which execution mode a job runs in on Spark, decided at submit (JobConfig.execution_mode).

- STAGES: bounded jobs without a guarantee, as RDD stages (stages/).
- MICRO_BATCH: one Spark job per snapshot interval (microbatch/); always for a DAG that reads a
  Spark stream (`read_stream_p`), whose query drives the batches.
- CONTINUOUS: every member a long-running task of one barrier stage (continuous/); AUTO picks it
  for unbounded jobs and jobs with a guarantee when the cluster has a task slot per member.

What Spark allows is decided here, at submit: a barrier stage needs all its tasks running at once,
so CONTINUOUS needs a free task slot per member (slots.py: slots that running continuous jobs
hold are not free), and Spark runs no barrier stage under dynamic allocation. Where Spark
authenticates without encrypting and the members cannot derive the job's secret on their
executors, CONTINUOUS runs only with `spark.jetspark.continuous.plaintextSecret=warn`
(continuous/secret_source.py). Explicit
CONTINUOUS fails at submit naming the numbers or the setting; AUTO runs the job otherwise
(MICRO_BATCH with a guarantee, else STAGES) and logs why, once.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark import SparkContext

from jetspark.core.config import ExecutionMode, JobConfig, ProcessingGuarantee
from jetspark.core.dag import DAG
from jetspark.core.errors import DagValidationError
from jetspark.core.spark.continuous.secret_source import plaintext_refusal
from jetspark.core.spark.continuous.security import AUTHENTICATE, spark_encrypts
from jetspark.core.spark.guarantees import stream_vertex
from jetspark.core.spark.session import master_of
from jetspark.core.spark.slots import (
    EXECUTORS_WAIT_SECONDS,
    configured_slots,
    holders_text,
    take_slots,
    wait_for_slots,
)
from jetspark.core.suppliers import declares_unbounded

_log = logging.getLogger("jetspark.spark")
DYNAMIC_ALLOCATION = "spark.dynamicAllocation.enabled"


def barrier_refusal(context: SparkContext) -> str | None:
    """Why Spark would refuse the barrier stage of a continuous job on `context`, naming the
    setting, or None. Spark's own test decides (local masters ignore dynamic allocation)."""
    conf = context._jsc.sc().conf()  # type: ignore[union-attr]
    if context._jvm.org.apache.spark.util.Utils.isDynamicAllocationEnabled(conf):  # type: ignore[union-attr]
        return (
            f"{DYNAMIC_ALLOCATION} is true, and Spark runs no barrier stage under dynamic "
            "allocation (SPARK-24942)"
        )
    return None


def secret_refusal(context: SparkContext) -> str | None:
    """Why a continuous job on `context` may not run: its secret would cross the network
    readable (continuous/secret_source.py), naming what to set; or None."""
    conf = context._jsc.sc().conf()  # type: ignore[union-attr]
    return plaintext_refusal(
        conf,
        master_of(context),
        authenticated=conf.getBoolean(AUTHENTICATE, False),
        encrypted=spark_encrypts(conf),
    )


def choose_mode(
    context: SparkContext, dag: DAG, config: JobConfig, members: int, holder: Any = None
) -> ExecutionMode:
    """The mode `dag` runs in under `config` on `context` with `members` members; raises a clear
    error for a combination that cannot run. An AUTO choice is logged with its reason. The job
    `holder`, when given and run CONTINUOUS, holds its task slots until `release_slots`."""
    asked = config.execution_mode
    guaranteed = config.processing_guarantee is not ProcessingGuarantee.NONE
    stream = stream_vertex(dag)
    rdd_vertex = _rdd_vertex(dag)
    if stream is not None:
        if asked in (ExecutionMode.CONTINUOUS, ExecutionMode.STAGES):
            raise DagValidationError(
                f"vertex '{stream[0]}' reads a Spark stream (read_stream_p): Spark's streaming "
                "query drives such a job batch by batch, so it runs as MICRO_BATCH, not "
                f"{asked.name}"
            )
        return ExecutionMode.MICRO_BATCH
    if asked is ExecutionMode.STAGES:
        _check_stages(dag, guaranteed)
        return ExecutionMode.STAGES
    if asked is ExecutionMode.MICRO_BATCH:
        if not guaranteed:
            raise ValueError(
                "execution_mode=MICRO_BATCH passes the job's state from batch to batch through "
                "snapshots: it needs a processing guarantee (JobConfig(processing_guarantee=...))"
            )
        _refuse_unreplayable_source(dag, "execution_mode=MICRO_BATCH")
        return ExecutionMode.MICRO_BATCH
    if asked is ExecutionMode.CONTINUOUS:
        if rdd_vertex is not None:
            raise DagValidationError(
                f"vertex '{rdd_vertex}' reads or writes an RDD, which only RDD stages can: run "
                "the job without execution_mode=CONTINUOUS"
            )
        refusal = barrier_refusal(context)
        if refusal is not None:
            raise ValueError(
                f"execution_mode=CONTINUOUS runs the job as one Spark barrier stage, but "
                f"{refusal}: set {DYNAMIC_ALLOCATION}=false for this application, or let "
                "execution_mode=AUTO run the job another way"
            )
        secret = secret_refusal(context)
        if secret is not None:
            raise ValueError(f"execution_mode=CONTINUOUS cannot run the job: {secret}")
        slots = wait_for_slots(context, members)
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
        free, holders = take_slots(context, slots, members, holder)
        if free < members:
            raise ValueError(
                f"execution_mode=CONTINUOUS runs every member as a task of its own, all at once: "
                f"the job needs {members} task slots (one per member) and {context.master} has "
                f"{slots}, {slots - free} of them held by running continuous jobs (members): "
                f"{holders_text(holders)}; wait for one to end, or run with members={free}"
            )
        return ExecutionMode.CONTINUOUS
    unbounded = [v.name for v in dag.vertices() if declares_unbounded(v.meta_supplier)]
    if not guaranteed and not unbounded:
        return ExecutionMode.STAGES
    if rdd_vertex is not None:
        return ExecutionMode.STAGES
    reason = (
        f"it has a processing guarantee ({config.processing_guarantee.name})"
        if guaranteed
        else f"it is unbounded (source {unbounded[0]!r})"
    )
    refusal = barrier_refusal(context) or secret_refusal(context)
    if refusal is not None:
        return _fallback(dag, config, guaranteed, f"{reason}, but {refusal}")
    wanted = min(members, configured_slots(context.getConf(), master_of(context)) or 1)
    slots = wait_for_slots(context, wanted)
    free, holders = take_slots(context, slots, members, holder)
    if free >= members:
        _log.info(
            "%s runs CONTINUOUS: %s, and %s has %d task slots for its %d members",
            config.name or dag.name or "the job",
            reason,
            context.master,
            slots,
            members,
        )
        return ExecutionMode.CONTINUOUS
    held = f", {slots - free} of them held by {holders_text(holders)}," if holders else ""
    why = (
        f"{reason}, but {context.master} has {slots} task slots{held} and continuous "
        f"execution needs one per member ({members})"
    )
    return _fallback(dag, config, guaranteed, why)


def _check_stages(dag: DAG, guaranteed: bool) -> None:
    """Raises when `dag` cannot run as RDD stages: they take no snapshot (no processing
    guarantee) and end only when every source does (no unbounded source)."""
    if guaranteed:
        raise ValueError(
            "execution_mode=STAGES runs the job as RDD stages, which take no snapshot: a "
            "processing guarantee needs MICRO_BATCH or CONTINUOUS (or AUTO)"
        )
    unbounded = [v.name for v in dag.vertices() if declares_unbounded(v.meta_supplier)]
    if unbounded:
        raise DagValidationError(
            f"vertex '{unbounded[0]}' never completes (an unbounded source), and RDD stages end "
            "only when their sources do: run the job CONTINUOUS or MICRO_BATCH (or AUTO)"
        )


def _fallback(dag: DAG, config: JobConfig, guaranteed: bool, why: str) -> ExecutionMode:
    """AUTO's choice when the job cannot run CONTINUOUS (`why`), logged once."""
    fallback = ExecutionMode.MICRO_BATCH if guaranteed else ExecutionMode.STAGES
    if fallback is ExecutionMode.MICRO_BATCH:
        _refuse_unreplayable_source(dag, f"{why}, so it would run as micro-batches")
    name = config.name or dag.name or "the job"
    _log.warning("%s runs as %s, not CONTINUOUS: %s", name, fallback.name, why)
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
