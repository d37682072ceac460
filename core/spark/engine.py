"""SparkEngine: runs a DAG on Spark, one `mapPartitionsWithIndex` task per member and stage."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pyspark import InheritableThread, SparkContext

from jetspark.core.config import ExecutionMode, JobConfig
from jetspark.core.dag import DAG, PlansADag
from jetspark.core.errors import JobFailedError
from jetspark.core.job import Job, checked_submission, end_jobs, warn_at_submission
from jetspark.core.runtime.plan import plan_job
from jetspark.core.runtime.restore import restorable
from jetspark.core.snapshot_store import Snapshot, SnapshotStore
from jetspark.core.spark.continuous.explain import explain_continuous
from jetspark.core.spark.continuous.run import run_continuous_job
from jetspark.core.spark.continuous.settings import queue_bytes_of
from jetspark.core.spark.guarantees import (
    check_streaming_job,
    discard_temporary_store,
    store_for_restart,
)
from jetspark.core.spark.job import SparkJob
from jetspark.core.spark.microbatch.run import run_micro_batch_job
from jetspark.core.spark.modes import choose_mode
from jetspark.core.spark.session import master_of, spark_context_of, stop_context
from jetspark.core.spark.shared_storage import check_storage_shared
from jetspark.core.spark.shipping import ship_package
from jetspark.core.spark.slots import release_slots, task_slots
from jetspark.core.spark.stages.explain import explain_plan
from jetspark.core.spark.stages.plan import plan_stages
from jetspark.core.spark.stages.run import persisted_stages, run_staged_job
from jetspark.core.spark.user_code import Shippable, UserCode
from jetspark.core.store_lease import acquire_store
from jetspark.core.stores import Stores

if TYPE_CHECKING:
    from jetspark.core.view import JobView

_log = logging.getLogger("jetspark.spark")
_job_ids = itertools.count(1)


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
    (default: adapted to the snapshot interval). `job_view` (a `jetspark.core.view.JobView`)
    shows every job the engine starts, live.
    """

    def __init__(
        self,
        spark: Any = None,
        members: int | None = None,
        *,
        default_local_parallelism: int = 1,
        ship: Iterable[Shippable] = (),
        batch_items: int | None = None,
        job_view: JobView | None = None,
    ) -> None:
        self.owns_context = isinstance(spark, str) or (
            spark is None and SparkContext._active_spark_context is None
        )
        """True when this engine created its SparkContext: `stop()` stops only such a one."""
        self.context = spark_context_of(spark)
        self._jobs: list[Job] = []
        self.members = members if members is not None else self.context.defaultParallelism
        if not isinstance(self.members, int) or self.members < 1:
            raise ValueError(f"members must be an int >= 1, got {self.members!r}")
        self.default_local_parallelism = default_local_parallelism
        if batch_items is not None and (not isinstance(batch_items, int) or batch_items < 1):
            raise ValueError(f"batch_items must be an int >= 1 or None, got {batch_items!r}")
        self.batch_items = batch_items
        """Micro-batches: the items each source processor emits per batch; None adapts it so
        that a batch whose sources are behind takes one snapshot interval."""
        self.job_view = job_view
        self.stores = Stores()
        """Driver-side named lists and maps: sources ship them into jobs, sinks fill them."""
        self.user_code = UserCode(self.context, ship)
        """What the engine ships of the user's code (see `user_code.py`)."""
        ship_package(self.context)

    def stop(self) -> None:
        """Cancels the engine's jobs still running, waits for them to end, then stops the
        SparkContext if this engine created it (a context the user passed in keeps running).
        Calling it again does nothing."""
        end_jobs(self._jobs)
        if self.owns_context and self.context._jsc is not None:
            stop_context(self.context)

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def queue_bytes(self) -> int:
        """The estimated bytes each queue between two processors of a member holds at most:
        `spark.jetspark.queue.maxSize` of the context's configuration, read whenever a job (or
        a micro-batch) is planned (docs/deploy.md)."""
        return queue_bytes_of(self.context)

    def get_list(self, name: str) -> list[Any]:
        """The driver-side list called `name`."""
        return self.stores.get_list(name)

    def get_map(self, name: str) -> dict[Any, Any]:
        """The driver-side dict called `name`."""
        return self.stores.get_map(name)

    def explain(self, dag: DAG | PlansADag, config: JobConfig | None = None) -> str:
        """The plan Spark would run for `dag` in the mode `config` chooses: stages and
        shuffles, or the continuous plan (members, task slots, edges as streams)."""
        dag, config = checked_submission(dag, config)
        mode = choose_mode(self.context, dag, config, self.members)
        plan = plan_job(dag, config, self.members, self.default_local_parallelism)
        parallelism = {name: v.local_parallelism for name, v in plan.vertices.items()}
        plan.close(None)
        if mode is ExecutionMode.CONTINUOUS:
            slots = task_slots(self.context)
            master = master_of(self.context)
            return explain_continuous(dag, config, self.members, slots, master, parallelism)
        stages = plan_stages(dag)
        persisted = persisted_stages(dag, stages)
        text = explain_plan(dag, stages, self.members, parallelism, persisted.__contains__)
        return (
            text
            if mode is ExecutionMode.STAGES
            else f"{text}\n\nrun as micro-batches, one per snapshot"
        )

    def new_job(
        self,
        dag: DAG | PlansADag,
        config: JobConfig | None = None,
        *,
        snapshot_store: SnapshotStore | None = None,
        restore_from: Snapshot | None = None,
    ) -> SparkJob:
        """Validates `dag` and starts it on Spark; returns at once.

        `config.execution_mode` decides how it runs (`modes.py`; `job.execution_mode` says
        which): a bounded job without a guarantee as RDD stages, one Spark job; an unbounded
        job or one with a guarantee continuously (every member a long-running task of one
        barrier stage, snapshots in-band), or as micro-batches, one Spark job per snapshot
        (docs/fault_tolerance.md). `snapshot_store` must be a DirectorySnapshotStore on storage
        every executor reaches (default: a temporary directory, local masters only), which a
        cluster's executors are asked to see before the job starts (SnapshotError if some do
        not);
        `restore_from` (typically `store.latest()`) continues a job from a snapshot, at any
        member count.
        """
        dag, config = checked_submission(dag, config)
        warn_at_submission(dag, config)
        if self.context._jsc is None:
            raise JobFailedError(
                "the SparkEngine's SparkContext has been stopped: create a new SparkEngine on a "
                "running context (SparkEngine() starts one)"
            )
        store = check_streaming_job(self.context, dag, config, snapshot_store, restore_from)
        if isinstance(restore_from, Snapshot):
            restore_from = restorable(restore_from, dag, config)

        def restart() -> Job:
            kept = store_for_restart(store)
            latest = kept.latest() if kept is not None else None
            return self.new_job(dag, config, snapshot_store=kept, restore_from=latest)

        job = SparkJob(
            next(_job_ids), config.name, self.context, snapshot_store=store, restart=restart
        )
        # one job at a time per store: a second one is refused here; a continuous job holds
        # its task slots from its mode's choice until it ends
        lease = acquire_store(store, job.name) if store is not None else None
        try:
            job.execution_mode = choose_mode(self.context, dag, config, self.members, holder=job)
            check_storage_shared(self.context, store, dag)  # what some executors do not see
            job.modules_used = self.user_code.prepare(dag)
        except BaseException:
            release_slots(self.context, job)
            if lease is not None:
                lease.release()
            discard_temporary_store(store)
            raise
        job.on_end(lambda error: release_slots(self.context, job))
        if lease is not None:
            job.on_end(lambda error: lease.release())
        self._jobs = [j for j in self._jobs if not j.status.is_terminal] + [job]
        job.on_end(lambda error: discard_temporary_store(store, job.restarting))
        if self.job_view is not None:
            self.job_view.watch(job, dag)
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
        """The job's driver thread, in the job's execution mode; whatever ends the thread,
        the job ends (FAILED with the error that ended it, if the mode did not end it)."""
        try:
            job.mark_running()
            if job.execution_mode is ExecutionMode.CONTINUOUS:
                run_continuous_job(self, job, dag, config, restore_from)
            elif job.execution_mode is ExecutionMode.MICRO_BATCH:
                run_micro_batch_job(self, job, dag, config, restore_from)
            else:
                run_staged_job(self, job, dag, config)
        except BaseException as failure:
            if job.ended:
                raise
            _log.warning("%s: its driver thread failed: %s", job.name, failure)
            job.mark_ended(job.error_of(failure))


__all__ = ["SparkEngine", "SparkJob"]
