"""The driver's side of a staged job: plan, translate to RDD stages, run one Spark action and
apply the results it brings back (sink writes, metrics)."""

from __future__ import annotations

import pickle
from typing import Any

from pyspark import RDD, StorageLevel
from pyspark.core.broadcast import Broadcast

from jetspark.core.config import ExecutionMode, JobConfig
from jetspark.core.dag import DAG
from jetspark.core.errors import JobFailedError
from jetspark.core.runtime.metrics import JobMetrics
from jetspark.core.runtime.plan import JobPlan
from jetspark.core.serialization import decode_batch
from jetspark.core.spark.job import EngineFacts, SparkJob, plan_on
from jetspark.core.spark.job_group import wait_for_tasks_to_end
from jetspark.core.spark.metrics import merge_metrics
from jetspark.core.spark.shipped_stores import free, shipped_contents
from jetspark.core.spark.stages.plan import StagePlan, plan_stages
from jetspark.core.spark.stages.records import LIST, MAP, METRICS, RESULT, is_collected_result
from jetspark.core.spark.stages.records import RDD as RDD_KIND
from jetspark.core.spark.stages.translate import Translation, translate
from jetspark.core.stores import Stores


def run_staged_job(engine: EngineFacts, job: SparkJob, dag: DAG, config: JobConfig) -> None:
    """Runs `job` as RDD stages on the job's thread and ends it (never raises)."""
    error: BaseException | None = None
    plan: JobPlan | None = None
    shipped: Broadcast | None = None
    context = engine.context
    try:
        plan = plan_on(engine, dag, config)
        stages = plan_stages(dag)
        description = f"jetspark {dag.name or job.name}: " + " | ".join(
            s.name for s in stages.stages
        )
        context.setJobGroup(job.group, description, interruptOnCancel=True)
        shipped = context.broadcast(shipped_contents(dag, engine.stores))
        job.translation = translation = translate(context, dag, plan, stages, shipped)
        final = _final_output(dag, stages, translation)
        results = final.filter(is_collected_result).collect()
        metrics = apply_results(engine.stores, results)
        metrics.execution_mode = ExecutionMode.STAGES.value
        job.publish_metrics(metrics)
        if has_rdd_sink(dag):
            job.rdd_reader = lambda name: _rdd_sink_items(final, name)
    except BaseException as failure:
        error = job.error_of(failure)
    if shipped is not None and not (error is None and has_rdd_sink(dag)):
        # nothing will recompute the job's stages
        free(shipped, wait=not isinstance(error, JobFailedError))
    if plan is not None:
        error = plan.close_after(error)
    if error is not None:
        wait_for_tasks_to_end(context, job.group)
    job.mark_ended(error)


def apply_results(stores: Stores, results: list[Any]) -> JobMetrics:
    """Adds sink writes to the driver's stores; returns the merged metrics."""
    metrics: list[JobMetrics] = []
    for _member, body in results:
        _, kind, name, payload, _stage = body
        if kind == LIST:
            stores.get_list(name).extend(decode_batch(payload))
        elif kind == MAP:
            stores.get_map(name).update(decode_batch(payload))
        elif kind == METRICS:
            metrics.append(pickle.loads(payload))
    return merge_metrics(metrics)


def persisted_stages(dag: DAG, stages: StagePlan) -> set[int]:
    """The terminal stages, when any stage holds an RDD sink: their output carries the results
    of every stage (an earlier stage's ride along through its heirs), serves the job's action
    and then `job.rdd()`, which must not run the terminal stages again."""
    if not has_rdd_sink(dag):
        return set()
    return {s.index for s in stages.stages if not stages.consumers(s)}


def has_rdd_sink(dag: DAG) -> bool:
    """True when a `write_rdd_p` vertex makes the job's output outlive the job."""
    return any(getattr(v.meta_supplier, "rdd_sink_name", None) for v in dag.vertices())


def _final_output(dag: DAG, stages: StagePlan, translation: Translation) -> RDD:
    if persisted_stages(dag, stages):
        return translation.final.persist(StorageLevel.MEMORY_AND_DISK)
    return translation.final


def _rdd_sink_items(final: RDD, name: str) -> RDD:
    return final.filter(lambda r: r[1][0] == RESULT and r[1][1:3] == (RDD_KIND, name)).flatMap(
        lambda r: decode_batch(r[1][3])
    )
