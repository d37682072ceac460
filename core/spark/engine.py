"""SparkEngine: runs a DAG on Spark, one `mapPartitionsWithIndex` task per member and stage."""

from __future__ import annotations

import itertools
import logging
import pickle
import threading
from collections.abc import Callable, Iterable
from typing import Any

from pyspark import RDD, InheritableThread, SparkContext, StorageLevel
from pyspark.core.broadcast import Broadcast

from jetspark.core.config import JobConfig
from jetspark.core.dag import DAG
from jetspark.core.errors import JobCancelledError, JobFailedError
from jetspark.core.job import Job, checked_submission, warn_at_submission
from jetspark.core.runtime.metrics import JobMetrics
from jetspark.core.runtime.plan import JobPlan, plan_job
from jetspark.core.serialization import decode_batch
from jetspark.core.snapshot_store import DirectorySnapshotStore, Snapshot, SnapshotStore
from jetspark.core.spark.explain import explain_plan
from jetspark.core.spark.failures import spark_job_error
from jetspark.core.spark.guarantees import check_streaming_job
from jetspark.core.spark.job_group import wait_for_tasks_to_end
from jetspark.core.spark.metrics import merge_metrics
from jetspark.core.spark.microbatch import MicroBatchRunner
from jetspark.core.spark.records import LIST, MAP, METRICS, RESULT
from jetspark.core.spark.records import RDD as RDD_KIND
from jetspark.core.spark.session import spark_context_of
from jetspark.core.spark.shipped_stores import shipped_contents
from jetspark.core.spark.shipping import ship_package
from jetspark.core.spark.spark_streams import run_streaming_query, stream_vertex
from jetspark.core.spark.stages import StagePlan, plan_stages
from jetspark.core.spark.translate import Translation, translate
from jetspark.core.spark.user_code import Shippable, UserCode
from jetspark.core.stores import Stores

_log = logging.getLogger("jetspark.spark")
_job_ids = itertools.count(1)
_CANCEL_RETRY_SECONDS = 0.1


class SparkJob(Job):
    """A job running on Spark: the Job API, plus `rdd(name)` for RDD sinks."""

    def __init__(
        self,
        job_id: int,
        name: str | None,
        context: SparkContext,
        *,
        snapshot_store: SnapshotStore | None = None,
        restart: Callable[[], Job] | None = None,
    ) -> None:
        super().__init__(job_id, name, snapshot_store=snapshot_store, restart=restart)
        self.group = f"jetspark-{job_id}"
        self._context = context
        self._merged_metrics = JobMetrics()
        self._final: RDD | None = None
        self.translation: Translation | None = None
        """The job's RDDs once translated: each stage's output, named after its vertices."""
        self.modules_used: dict[str, set[str]] = {}
        """Module -> the vertices and edges whose code needs it on the executors."""

    @property
    def metrics(self) -> JobMetrics:
        """Per-processor and per-edge metrics, merged from every task once the job ended (with a
        processing guarantee: summed over the micro-batches so far, with one report each)."""
        return self._merged_metrics

    def publish_metrics(self, metrics: JobMetrics) -> None:
        """Engine side: the metrics `metrics` returns from now on."""
        self._merged_metrics = metrics

    def cancel(self) -> None:
        """Cancels the job's Spark jobs; `join()` then raises JobCancelledError.

        Spark cancels only the jobs of the group already submitted, and the driver thread may
        be about to submit one (a cancel right after `new_job` was lost so, and the job ran
        on): a helper thread repeats the cancellation until the job ended.
        """
        if self._ended.is_set() or self.cancel_event.is_set():
            return
        self.cancel_event.set()
        threading.Thread(
            target=self._cancel_until_ended, name=f"cancel-{self.name}", daemon=True
        ).start()

    def _cancel_until_ended(self) -> None:
        while True:
            self._context.cancelJobGroup(self.group)
            if self._ended.wait(_CANCEL_RETRY_SECONDS):
                return

    def rdd(self, name: str) -> RDD:
        """The items the job's `write_rdd_p(name)` sink received, as an RDD (nothing collected).

        Available once the job completed; the job's output is persisted, so reading it does
        not run the job again.
        """
        self.join()
        assert self._final is not None
        return self._final.filter(
            lambda r: r[1][0] == RESULT and r[1][1:3] == (RDD_KIND, name)
        ).flatMap(lambda r: decode_batch(r[1][3]))


class SparkEngine:
    """Runs jobs on Spark: `local[*]` by default, or any Spark cluster through `spark`.

    `spark` is a SparkSession, a SparkContext, a master URL (a new context, see
    `session.create_context`) or None (the process's active context, else a new one on
    local[*], bound to 127.0.0.1). `members` is the number of Spark partitions per stage,
    default Spark's default parallelism. A vertex with local parallelism -1 gets
    `default_local_parallelism` processors per member (one: Spark's parallelism is members).
    `ship` names code the executors need beyond what each job's DAG refers to (found by
    itself, see `user_code.py`): modules (pickled by value) and paths of a `.py` file, a
    package directory or a `.zip` (put on the executors' `sys.path`). `batch_items` fixes the
    items each source processor reads per micro-batch in jobs with a processing guarantee
    (default: adapted to the snapshot interval).
    """

    def __init__(
        self,
        spark: Any = None,
        members: int | None = None,
        *,
        default_local_parallelism: int = 1,
        ship: Iterable[Shippable] = (),
        batch_items: int | None = None,
    ) -> None:
        self.context = spark_context_of(spark)
        self.members = members if members is not None else self.context.defaultParallelism
        if not isinstance(self.members, int) or self.members < 1:
            raise ValueError(f"members must be an int >= 1, got {self.members!r}")
        self.default_local_parallelism = default_local_parallelism
        if batch_items is not None and (not isinstance(batch_items, int) or batch_items < 1):
            raise ValueError(f"batch_items must be an int >= 1 or None, got {batch_items!r}")
        self.batch_items = batch_items
        """Micro-batches: the items each source processor emits per batch; None adapts it so
        that a batch whose sources are behind takes one snapshot interval."""
        self.stores = Stores()
        """Driver-side named lists and maps: sources ship them into jobs, sinks fill them."""
        self.user_code = UserCode(self.context, ship)
        """What the engine ships of the user's code (see `user_code.py`)."""
        ship_package(self.context)

    def get_list(self, name: str) -> list[Any]:
        """The driver-side list called `name`."""
        return self.stores.get_list(name)

    def get_map(self, name: str) -> dict[Any, Any]:
        """The driver-side dict called `name`."""
        return self.stores.get_map(name)

    def explain(self, dag: DAG, config: JobConfig | None = None) -> str:
        """The plan Spark would run for `dag`: stages, shuffles, members, parallelism."""
        dag, config = checked_submission(dag, config)
        plan = plan_job(dag, config, self.members, self.default_local_parallelism)
        stages = plan_stages(dag)
        parallelism = {name: v.local_parallelism for name, v in plan.vertices.items()}
        persisted = _persisted_stages(dag, stages)
        plan.close(None)
        return explain_plan(dag, stages, self.members, parallelism, persisted.__contains__)

    def new_job(
        self,
        dag: DAG,
        config: JobConfig | None = None,
        *,
        snapshot_store: SnapshotStore | None = None,
        restore_from: Snapshot | None = None,
    ) -> SparkJob:
        """Validates `dag` and starts it on Spark; returns at once.

        Without a processing guarantee the job is one Spark job. With one, it runs as
        micro-batches, each one Spark job ending with a snapshot (docs/fault_tolerance.md):
        `snapshot_store` must be a DirectorySnapshotStore on storage every executor reaches
        (default: a temporary directory, local masters only); `restore_from` (typically
        `store.latest()`) continues a job from a snapshot, at any member count.
        """
        dag, config = checked_submission(dag, config)
        warn_at_submission(dag, config)
        if self.context._jsc is None:
            raise JobFailedError(
                "the SparkEngine's SparkContext has been stopped: create a new SparkEngine on a "
                "running context (SparkEngine() starts one)"
            )
        store = check_streaming_job(self.context, dag, config, snapshot_store, restore_from)
        modules_used = self.user_code.prepare(dag)

        def restart() -> Job:
            latest = store.latest() if store is not None else None
            return self.new_job(dag, config, snapshot_store=store, restore_from=latest)

        job = SparkJob(
            next(_job_ids), config.name, self.context, snapshot_store=store, restart=restart
        )
        job.modules_used = modules_used
        thread = InheritableThread(
            target=self._execute,
            args=(job, dag, config, restore_from),
            name=f"jetspark-{job.name}",
            daemon=True,
        )
        thread.start()
        return job

    def _execute(
        self, job: SparkJob, dag: DAG, config: JobConfig, restore_from: Snapshot | None
    ) -> None:
        """The job's driver thread: the micro-batch loop with a processing guarantee, else
        plan, translate, run one Spark action and apply the results."""
        job.mark_running()
        if job.snapshot_store is not None:
            self._execute_batches(job, dag, config, restore_from)
            return
        error: BaseException | None = None
        plan: JobPlan | None = None
        shipped: Broadcast | None = None
        try:
            plan = plan_job(dag, config, self.members, self.default_local_parallelism)
            stages = plan_stages(dag)
            description = f"jetspark {dag.name or job.name}: " + " | ".join(
                s.name for s in stages.stages
            )
            self.context.setJobGroup(job.group, description, interruptOnCancel=True)
            shipped = self.context.broadcast(shipped_contents(dag, self.stores))
            job.translation = translate(self.context, dag, plan, stages, shipped)
            job._final = _final_output(dag, stages, job.translation)
            results = job._final.filter(_is_collected_result).collect()
            job._merged_metrics = self._apply(results)
        except BaseException as failure:
            error = _job_error(failure, job)
        if shipped is not None and not (error is None and _has_rdd_sink(dag)):
            shipped.destroy()  # nothing will recompute the job's stages: free it everywhere
        if plan is not None:
            try:
                plan.close(error)
            except BaseException as failure:
                error = error or failure
        if error is not None:
            wait_for_tasks_to_end(self.context, job.group)
        job.mark_ended(error)

    def _execute_batches(
        self, job: SparkJob, dag: DAG, config: JobConfig, restore_from: Snapshot | None
    ) -> None:
        assert isinstance(job.snapshot_store, DirectorySnapshotStore)
        runner = MicroBatchRunner(self, job, dag, job.snapshot_store, restore_from)
        stream = stream_vertex(dag)
        error: BaseException | None = None
        try:
            if stream is None:
                runner.run(config)
            else:
                name = dag.name or job.name
                vertex, frame = stream
                run_streaming_query(runner, config, name, vertex, frame, restore_from is not None)
        except BaseException as failure:
            error = _job_error(failure, job)
            wait_for_tasks_to_end(self.context, job.group)
        job.mark_ended(error)

    def _apply(self, results: list[Any]) -> JobMetrics:
        """Adds sink writes to the driver's stores; returns the merged metrics."""
        metrics: list[JobMetrics] = []
        for _member, body in results:
            _, kind, name, payload, _stage = body
            if kind == LIST:
                self.stores.get_list(name).extend(decode_batch(payload))
            elif kind == MAP:
                self.stores.get_map(name).update(decode_batch(payload))
            elif kind == METRICS:
                metrics.append(pickle.loads(payload))
        return merge_metrics(metrics)


def _is_collected_result(record: Any) -> bool:
    body = record[1]
    return body[0] == RESULT and body[1] != RDD_KIND


def _persisted_stages(dag: DAG, stages: StagePlan) -> set[int]:
    """The terminal stages, when any stage holds an RDD sink: their output carries the results
    of every stage (an earlier stage's ride along through its heirs), serves the job's action
    and then `job.rdd()`, which must not run the terminal stages again."""
    if not _has_rdd_sink(dag):
        return set()
    return {s.index for s in stages.stages if not stages.consumers(s)}


def _has_rdd_sink(dag: DAG) -> bool:
    """True when a `write_rdd_p` vertex makes the job's output outlive the job."""
    return any(getattr(v.meta_supplier, "rdd_sink_name", None) for v in dag.vertices())


def _final_output(dag: DAG, stages: StagePlan, translation: Translation) -> RDD:
    if _persisted_stages(dag, stages):
        return translation.final.persist(StorageLevel.MEMORY_AND_DISK)
    return translation.final


def _job_error(failure: BaseException, job: SparkJob) -> BaseException:
    """The error `join()` raises: JobCancelledError, the task's JobFailedError, or a wrapper."""
    if job.cancel_event.is_set():
        cancelled = JobCancelledError(f"{job.name} was cancelled")
        cancelled.__cause__ = failure
        return cancelled
    if isinstance(failure, JobFailedError):
        return failure
    error = spark_job_error(failure, job.name, job.modules_used, job._context.pythonExec)
    error.__cause__ = failure
    return error


__all__ = ["SparkEngine", "SparkJob"]
